// JobFlow executors in Node (docs/executors/node.md): the executor protocol of
// docs/executor-protocol.md around handlers that are async functions.
//
// For every call the executor checks the signature, parses the call into a context, runs the
// handler with an AbortSignal that aborts at the job's timeoutSeconds or on a cancel, remembers
// the execution by trace id so a repeated call never runs it twice, answers status and cancel,
// and reports results (signed) to the scheduler when the caller does not wait for them.
//
// Stopping: a promise cannot be interrupted in JavaScript. The handler is told through its
// signal and the executor waits up to `stopWaitMs` (10 s) for its promise to settle. A handler
// that does not stop in that time is reported truthfully as still RUNNING (status, cancel, and a
// 202 to a waiting call) until it settles, so the scheduler never runs a retry beside it.

import { createHmac, timingSafeEqual } from 'node:crypto';
import { Capture, CarriedMemory, DEFAULT_LOG_BOUND, carryRoom, logUrl, ship } from './logs.js';

export const MAX_SKEW_SECONDS = 300;
export const KEEP_FINISHED = 10_000;
export const KEEP_FINISHED_FOR_MS = 600_000;
export const KEEP_FINISHED_AT_MOST = 1_000_000;
const FINAL = new Set(['SUCCESS', 'FAILED', 'TIMEOUT', 'CANCELLED']);

/** The `X-JobFlow-Signature` value for a request or report (docs/executor-protocol.md §5). */
export function sign(secret, method, path, timestamp, traceId, body) {
  const mac = createHmac('sha256', secret);
  mac.update(`${method}\n${path}\n${timestamp}\n${traceId}\n`);
  mac.update(body);
  return `v1=${mac.digest('hex')}`;
}

/** Whether a request is signed with `secret` within the allowed skew (constant-time compare). */
export function verify(secret, method, path, headers, traceId, body, nowSeconds = Date.now() / 1000) {
  const timestamp = headers['x-jobflow-timestamp'];
  const signature = headers['x-jobflow-signature'];
  if (!timestamp || !signature || !/^-?\d+$/.test(timestamp)) return false;
  if (Math.abs(nowSeconds - Number(timestamp)) > MAX_SKEW_SECONDS) return false;
  const expected = Buffer.from(sign(secret, method, path, timestamp, traceId, body));
  const given = Buffer.from(String(signature));
  return expected.length === given.length && timingSafeEqual(expected, given);
}

/** A result as §2 defines it. */
export class JobResult {
  constructor(success, message, status) {
    this.success = success;
    this.message = message ?? undefined;
    this.status = status ?? undefined;
  }
  static ok(message) { return new JobResult(true, message); }
  static failure(message) { return new JobResult(false, message); }
  static timedOut(seconds) { return new JobResult(false, `aborted after ${seconds}s (timeoutSeconds)`, 'TIMEOUT'); }
  static cancelled() { return new JobResult(false, 'cancelled by the scheduler', 'CANCELLED'); }
  get finalStatus() { return FINAL.has(this.status) ? this.status : (this.success ? 'SUCCESS' : 'FAILED'); }
  toJSON() {
    const out = { success: this.success };
    if (this.status !== undefined) out.status = this.status;
    if (this.message !== undefined) out.message = this.message;
    return out;
  }
}

/** What a handler returned, as a JobResult: a JobResult as it is, undefined/null as success, a
 * string as success with that message, anything else as success with its JSON. */
function asResult(value) {
  if (value instanceof JobResult) return value;
  if (value === undefined || value === null) return JobResult.ok();
  if (typeof value === 'string') return JobResult.ok(value);
  return JobResult.ok(JSON.stringify(value));
}

/** Parses a call's body into the handler's context; throws on anything that is not a call. */
export function parseCall(body) {
  const need = (k) => {
    if (body[k] === undefined || body[k] === null) throw new Error(`missing ${k}`);
    return body[k];
  };
  const items = body.shardItems ?? {};
  return {
    traceId: String(need('traceId')),
    executionId: String(need('executionId')),
    jobName: String(need('jobName')),
    handler: String(need('handler')),
    triggerType: String(body.triggerType ?? 'CRON'),
    fireTime: new Date(need('fireTime')),
    shardStart: Number(need('shardStart')),
    shardEnd: Number(need('shardEnd')),
    shardCount: Number(need('shardCount')),
    shardStrategy: String(body.shardStrategy ?? 'MOD_HASH'),
    retryCount: Number(body.retryCount ?? 0),
    timeoutSeconds: Number(body.timeoutSeconds ?? 0),
    jobParams: body.jobParams ?? null,
    dataRange: body.dataRange ? { start: Number(body.dataRange.start), end: Number(body.dataRange.end) } : null,
    shardItems: Object.fromEntries(Object.entries(items).map(([k, v]) => [Number(k), String(v)])),
    reportUrl: String(body.reportUrl ?? ''),
    /** MOD_HASH: whether a record belongs to this execution (`id % shardCount` in range). */
    ownsId(id) {
      const shard = Number(BigInt(id) % BigInt(Math.max(this.shardCount, 1)));
      return this.shardStart <= shard && shard <= this.shardEnd;
    },
  };
}

const rfc3339 = (ms) => new Date(ms).toISOString();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Whether `promise` settles within `ms`; the timer is cleared either way. */
async function within(promise, ms) {
  let timer;
  const late = new Promise((r) => { timer = setTimeout(() => r(false), ms); });
  try {
    return await Promise.race([promise.then(() => true, () => true), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** The executions this executor knows, by trace id (see the protocol's §4 on memory). */
class Ledger {
  constructor(startedAt, { keepAtLeast, keepForMs, keepAtMost }) {
    this.entries = new Map();
    this.finished = new Map(); // traceId -> finished at (ms), oldest-finished first
    this.keepAtLeast = keepAtLeast;
    this.keepForMs = keepForMs;
    this.keepAtMost = keepAtMost;
    this.rememberedSince = startedAt;
  }

  finish(traceId, result, now) {
    const entry = this.entries.get(traceId);
    entry.result = result;
    this.finished.set(traceId, now);
    entry.resolveFinished();
    for (const [id, at] of this.finished) {
      const tooMany = this.finished.size > this.keepAtMost;
      const overCount = this.finished.size > this.keepAtLeast;
      if (!(tooMany || (overCount && now - at > this.keepForMs))) break;
      this.finished.delete(id);
      this.entries.delete(id);
      this.rememberedSince = Math.max(this.rememberedSince, at);
    }
    return entry;
  }
}

function newEntry(reportUrl) {
  const entry = { reportUrl, reportWhenDone: false, result: null, stopReason: null, stuck: false };
  entry.controller = new AbortController();
  entry.finishedPromise = new Promise((r) => { entry.resolveFinished = r; });
  entry.stuckPromise = new Promise((r) => { entry.resolveStuck = r; });
  entry.stopAskedPromise = new Promise((r) => { entry.resolveStopAsked = r; });
  return entry;
}

export class JobExecutor {
  /**
   * @param {object} options
   * @param {string|Buffer|null} options.secret the scheduler's executor.signing_secret; null
   *   accepts unsigned calls (anyone who reaches the executor runs its handlers)
   */
  constructor({
    secret, pathPrefix = '/internal/job', keepAtLeast = KEEP_FINISHED,
    keepForMs = KEEP_FINISHED_FOR_MS, keepAtMost = KEEP_FINISHED_AT_MOST, stopWaitMs = 10_000,
    reportAttempts = 8, log = console, logBound = DEFAULT_LOG_BOUND,
  } = {}) {
    if (secret === undefined) throw new Error('secret: the signing secret, or null for unsigned calls');
    this.secret = secret === null ? null : Buffer.from(secret);
    this.pathPrefix = pathPrefix.replace(/\/+$/, '');
    this.startedAt = Date.now();
    this.ledger = new Ledger(this.startedAt, { keepAtLeast, keepForMs, keepAtMost });
    this.stopWaitMs = stopWaitMs;
    this.reportAttempts = reportAttempts;
    this.log = log;
    this.logBound = logBound;
    this.carried = new CarriedMemory();
    this.handlers = new Map();
  }

  /** Registers `fn(ctx)` as the handler `name`; the call waits for its result. `ctx.signal`
   * aborts at the timeout or on a cancel. */
  handler(name, fn) { this.handlers.set(name, { fn, background: false }); return this; }

  /** Registers a handler whose call is answered 202 at once; its result is reported. */
  backgroundHandler(name, fn) { this.handlers.set(name, { fn, background: true }); return this; }

  /** A `(req, res)` listener for `http.createServer`; other paths get 404. */
  listener() {
    return (req, res) => this.#serve(req, res, () => answer(res, 404, { message: 'not found' }));
  }

  /** Express-style middleware: serves the executor's paths, `next()` for the others. Mount it
   * before any body parser: signatures are checked over the raw body. */
  middleware() {
    return (req, res, next) => this.#serve(req, res, next);
  }

  #serve(req, res, next) {
    const path = (req.originalUrl ?? req.url).split('?')[0];
    if (!path.startsWith(`${this.pathPrefix}/`)) return next();
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', async () => {
      let gone;
      const callerGone = new Promise((r) => { gone = r; });
      res.on('close', () => { if (!res.writableFinished) gone(); });
      const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k.toLowerCase(), Array.isArray(v) ? v[0] : v]));
      try {
        const [status, body] = await this.handle(req.method, path, headers, Buffer.concat(chunks), callerGone);
        answer(res, status, body);
      } catch (e) {
        this.log.error?.('jobflow executor: request failed', e);
        answer(res, 500, { success: false, message: 'executor error' });
      }
    });
  }

  /** Answers one request under the prefix: `[status, body]`. `headers` by lower-case name;
   * `callerGone` resolves when the caller hangs up. */
  async handle(method, path, headers, body, callerGone = new Promise(() => {})) {
    const rest = decodeURIComponent(path.slice(this.pathPrefix.length + 1));
    if (method === 'GET' && rest.startsWith('status/')) {
      const traceId = rest.slice('status/'.length);
      if (!this.#signed(method, path, headers, traceId, Buffer.alloc(0))) return [401, { message: 'missing or wrong signature' }];
      return this.#status(traceId);
    }
    if (method === 'POST' && rest.startsWith('cancel/')) {
      const traceId = rest.slice('cancel/'.length);
      if (!this.#signed(method, path, headers, traceId, Buffer.alloc(0))) return [401, { message: 'missing or wrong signature' }];
      return this.#cancel(traceId);
    }
    if (method === 'POST' && !rest.includes('/')) return this.#call(rest, path, headers, body, callerGone);
    return [404, { success: false, message: `no route ${method} ${path}` }];
  }

  #signed(method, path, headers, traceId, body) {
    return this.secret === null || verify(this.secret, method, path, headers, traceId, body);
  }

  #statusJson(traceId, status, message) {
    const out = { traceId, status, startedAt: rfc3339(this.startedAt), rememberedSince: rfc3339(this.ledger.rememberedSince) };
    if (message !== undefined) out.message = message;
    return out;
  }

  #status(traceId) {
    const entry = this.ledger.entries.get(traceId);
    if (!entry) return [404, this.#statusJson(traceId, 'UNKNOWN')];
    if (!entry.result) return [200, this.#statusJson(traceId, 'RUNNING')];
    return [200, this.#statusJson(traceId, entry.result.finalStatus, entry.result.message)];
  }

  async #cancel(traceId) {
    const entry = this.ledger.entries.get(traceId);
    if (!entry) {
      // The cancel overtook its call: remembered, and the call never runs.
      this.ledger.entries.set(traceId, newEntry(''));
      this.ledger.finish(traceId, JobResult.cancelled(), Date.now());
      return [200, this.#statusJson(traceId, 'CANCELLED')];
    }
    if (!entry.result) {
      this.#askStop(entry, JobResult.cancelled());
      if (!(await within(entry.finishedPromise, this.stopWaitMs + 1000))) return [200, this.#statusJson(traceId, 'RUNNING')];
    }
    return this.#status(traceId);
  }

  async #call(name, path, headers, body, callerGone) {
    const traceId = headers['x-trace-id'] ?? '';
    if (!this.#signed('POST', path, headers, traceId, body)) return [401, { success: false, message: 'missing or wrong signature' }];
    let ctx;
    try {
      ctx = parseCall(JSON.parse(body.toString('utf8')));
    } catch (e) {
      return [400, { success: false, message: `not a JobFlow call: ${e.message}` }];
    }
    const registered = this.handlers.get(name);
    if (!registered) return [404, { success: false, message: `no handler ${name}` }];
    const known = this.ledger.entries.get(ctx.traceId);
    if (known) {
      if (known.result) return [200, this.#withLog(ctx.traceId, known.result)];
      // Repeated while the first run goes on: its result goes to the latest caller.
      known.reportUrl = ctx.reportUrl;
      known.reportWhenDone = true;
      return [202, { success: true, message: 'running' }];
    }
    const entry = newEntry(ctx.reportUrl);
    entry.reportWhenDone = registered.background;
    this.ledger.entries.set(ctx.traceId, entry);
    ctx.signal = entry.controller.signal;
    const capture = this.logBound > 0 ? new Capture(this.logBound) : null;
    ctx.log = (message, level = 'INFO') => capture?.push(level, message);
    const target = capture && logUrl(ctx.reportUrl);
    if (target) {
      ship(capture, ctx.traceId, (body) => this.#post(target, ctx.traceId, body), this.log.warn?.bind(this.log))
        .catch((e) => this.log.error?.('jobflow executor: log shipping failed', e));
    }
    entry.capture = capture;
    this.#supervise(ctx, registered, entry).catch((e) => this.log.error?.('jobflow executor: supervision failed', e));
    if (registered.background) return [202, { success: true, message: 'accepted' }];
    await Promise.race([entry.finishedPromise, entry.stuckPromise, callerGone]);
    if (entry.result) return [200, this.#withLog(ctx.traceId, entry.result)];
    // Still running: too slow to stop (the scheduler waits for the report), or the caller hung
    // up (nobody reads the answer; the result is reported).
    entry.reportWhenDone = true;
    return [202, { success: true, message: 'running' }];
  }

  #askStop(entry, reason) {
    if (!entry.stopReason) entry.stopReason = reason;
    entry.controller.abort(reason.status);
    entry.resolveStopAsked();
  }

  async #supervise(ctx, registered, entry) {
    let outcome;
    const run = (async () => registered.fn(ctx))().then(
      (value) => { outcome = asResult(value); },
      (error) => {
        this.log.error?.(`jobflow executor: handler ${ctx.handler} threw`, error);
        outcome = JobResult.failure(`handler threw: ${error?.message ?? String(error)}`);
      },
    );
    const timeoutMs = ctx.timeoutSeconds > 0 ? ctx.timeoutSeconds * 1000 : null;
    let timer;
    const timedOut = timeoutMs === null ? new Promise(() => {}) : new Promise((r) => { timer = setTimeout(() => r('timeout'), timeoutMs); });
    const first = await Promise.race([run.then(() => 'done'), entry.stopAskedPromise.then(() => 'stop'), timedOut]);
    clearTimeout(timer);
    let result;
    if (first === 'done' && !entry.stopReason) {
      result = outcome;
    } else {
      this.#askStop(entry, JobResult.timedOut(ctx.timeoutSeconds));
      if (!(await within(run, this.stopWaitMs))) {
        this.log.warn?.(`jobflow executor: handler ${ctx.handler} did not stop within ${this.stopWaitMs} ms; reported RUNNING until it settles`);
        entry.stuck = true;
        entry.resolveStuck();
        await run;
      }
      result = entry.stopReason;
    }
    entry.capture?.end();
    // The rest of the log goes with the result, and is remembered a while for a repeated call
    // (a scheduler that stopped before storing the answer calls again).
    if (entry.capture && logUrl(entry.reportUrl)) {
      const rest = entry.capture.takeRest(carryRoom(Buffer.byteLength(JSON.stringify(result))));
      if (rest) this.carried.keep(ctx.traceId, rest);
    }
    this.ledger.finish(ctx.traceId, result, Date.now());
    if (entry.reportWhenDone) await this.report(entry.reportUrl, ctx.traceId, result);
  }

  /** POSTs `body` to `url`, signed; its status, or null when no answer came. */
  async #post(url, traceId, body) {
    const headers = { 'content-type': 'application/json', 'x-trace-id': traceId };
    if (this.secret !== null) {
      const ts = String(Math.floor(Date.now() / 1000));
      headers['x-jobflow-timestamp'] = ts;
      headers['x-jobflow-signature'] = sign(this.secret, 'POST', new URL(url).pathname, ts, traceId, body);
    }
    try {
      const resp = await fetch(url, { method: 'POST', headers, body, signal: AbortSignal.timeout(10_000) });
      await resp.arrayBuffer();
      return resp.status;
    } catch {
      return null;
    }
  }

  /** `result` as sent, with the rest of its execution's log when it carries one. */
  #withLog(traceId, result) {
    const out = result.toJSON();
    const rest = this.carried.get(traceId);
    if (rest) out.logs = rest;
    return out;
  }

  /** POSTs `result` (with the rest of its log) to `url`, signed; retried with backoff on no
   * answer or a 5xx, stopped at any other answer. True when the scheduler took it (200) or had
   * it settled (409). */
  async report(url, traceId, result) {
    if (!url) return false;
    const body = Buffer.from(JSON.stringify(this.#withLog(traceId, result)));
    for (let attempt = 0; attempt < this.reportAttempts; attempt++) {
      const status = await this.#post(url, traceId, body);
      if (status !== null && status < 500) {
        if (status !== 200 && status !== 409) this.log.warn?.(`jobflow executor: report of ${traceId} refused with ${status}`);
        return status === 200 || status === 409;
      }
      await sleep(Math.min(2 ** attempt, 30) * 1000);
    }
    this.log.error?.(`jobflow executor: report of ${traceId} not delivered after ${this.reportAttempts} attempts`);
    return false;
  }
}

function answer(res, status, body) {
  if (res.headersSent || res.destroyed) return;
  const data = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) });
  res.end(data);
}
export { NacosError, NacosRegistration } from './nacos.js';
export { DEFAULT_LOG_BOUND };
