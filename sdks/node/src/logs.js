// What a handler logs, captured per execution and shipped to the scheduler
// (docs/executor-protocol.md, "Shipping logs").
//
// A handler logs through its context: ctx.log(message, level = 'INFO'). Each execution keeps
// at most its bound (1 MiB by default, the executor's `logBound`) of messages; what comes
// beyond is counted, and a last line says how much was dropped. What was logged goes to the
// scheduler every second while the handler runs (the first batch a second after the start),
// in order, each line numbered so a batch sent
// again after a lost answer is stored once. When the handler has finished, the rest goes with
// the result (`takeRest`): in the answer to the call or in the result report, which the
// executor sends anyway, so a handler that logs a few lines costs no request of its own. Only
// a rest past CARRY_BYTES is shipped on its own, with the log's end. A failed batch is sent
// again with a growing wait, for up to ten minutes after the end. A handler that logged
// nothing sends nothing. Logging appends to an array: a handler never waits for its log, and
// the shipping timers never keep the process alive.

import { setTimeout as sleep } from 'node:timers/promises';

export const DEFAULT_LOG_BOUND = 1024 * 1024;
const SHIP_EVERY_MS = 1000;
const RETRY_AT_MOST_MS = 30_000;
const GIVE_UP_AFTER_MS = 600_000;
const BATCH_LINES = 500;
// Bytes of serialised lines per batch: the scheduler takes bodies of at most 1 MiB, and one
// line (16,384 characters, escaped) always fits.
const BATCH_BYTES = 512 * 1024;
const LINE_CHARS = 16 * 1024;
// The most serialised lines a result carries.
export const CARRY_BYTES = 32 * 1024;
// The most a result and the lines it carries take together: the scheduler reads 64 KiB of an
// answer, and a cut answer is not a result.
const ANSWER_BYTES = 48 * 1024;

/** How many bytes of lines a result of `resultBytes` (serialised) may carry. */
export function carryRoom(resultBytes) {
  return Math.max(0, Math.min(CARRY_BYTES, ANSWER_BYTES - resultBytes));
}
// Bytes of carried logs remembered for repeated calls (see CarriedMemory).
const CARRIED_MEMORY = 8 * 1024 * 1024;
const LEVELS = new Set(['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR']);

/** One execution's log: appended to by the handler, drained by its shipper. */
export class Capture {
  constructor(bound = DEFAULT_LOG_BOUND) {
    this.bound = bound;
    this.pending = [];
    this.seq = 0;
    this.kept = 0;
    this.dropped = 0;
    this.ended = false;
    // The rest went with the result: the shipper stops.
    this.carried = false;
    // A batch is on its way: the rest is not taken meanwhile, since two batches stored at once
    // could both hold a line.
    this.sending = false;
    this.wake = null;
  }

  push(level, message) {
    if (this.ended) return;
    const text = String(message).slice(0, LINE_CHARS);
    const size = Buffer.byteLength(text);
    if (this.kept + size > this.bound) {
      this.dropped += size;
      return;
    }
    this.kept += size;
    this.seq += 1;
    this.pending.push({ seq: this.seq, at: new Date().toISOString(), level: LEVELS.has(level) ? level : 'INFO', message: text });
  }

  end() {
    if (this.dropped > 0) {
      this.seq += 1;
      this.pending.push({
        seq: this.seq, at: new Date().toISOString(), level: 'WARN',
        message: `${this.dropped} bytes of log dropped: past this execution's bound of ${this.bound} bytes`,
      });
    }
    this.ended = true;
    this.wake?.();
  }

  /** The next batch to send (kept until `shipped`), and the end when it goes with it. */
  next() {
    const lines = [];
    let size = 0;
    for (const line of this.pending.slice(0, BATCH_LINES)) {
      size += Buffer.byteLength(JSON.stringify(line));
      if (size > BATCH_BYTES && lines.length > 0) break;
      lines.push(line);
    }
    const end = this.ended && lines.length === this.pending.length
      ? { lines: this.seq, droppedBytes: this.dropped } : null;
    return { lines, end };
  }

  /**
   * The rest of an ended log, to go with the result as its `logs`: every line not yet taken by
   * the scheduler, and the end. Null when it is more than `most` bytes serialised or while a
   * batch is on its way (the shipper sends it then), or when nothing was logged (nothing is
   * sent). Once taken, the shipper stops: batches never overlap in flight.
   */
  takeRest(most = CARRY_BYTES) {
    if (!this.ended || this.carried || this.sending) return null;
    if (this.seq === 0) {
      this.carried = true;
      return null;
    }
    if (this.pending.length > BATCH_LINES) return null;
    const bytes = Buffer.byteLength(JSON.stringify(this.pending));
    if (bytes > most) return null;
    const rest = { lines: this.pending, end: { lines: this.seq, droppedBytes: this.dropped } };
    this.carried = true;
    this.pending = [];
    this.wake?.();
    return rest;
  }

  shipped(through) {
    this.pending = this.pending.filter((l) => l.seq > through);
  }

  async idle(ms) {
    await Promise.race([sleep(ms, undefined, { ref: false }), new Promise((r) => { this.wake = r; })]);
    this.wake = null;
  }
}

/** Where an execution's log goes: beside its reportUrl (…/result → …/logs). */
export function logUrl(reportUrl) {
  return reportUrl.endsWith('/result') ? `${reportUrl.slice(0, -'/result'.length)}/logs` : null;
}

/** Ships `capture` with `post(body) → status|null` until its end has been taken. */
/**
 * Milliseconds the last batch of `traceId` waits after its execution's end: spread over
 * SHIP_EVERY_MS by a hash of the trace id (FNV-1a, as every JobFlow SDK does).
 */
export function spreadOf(traceId) {
  let h = 0xcbf29ce484222325n;
  for (const b of Buffer.from(traceId)) h = ((h ^ BigInt(b)) * 0x100000001b3n) & 0xffffffffffffffffn;
  return Number(h % 1000n) * SHIP_EVERY_MS / 1000;
}

export async function ship(capture, traceId, post, warn) {
  let failures = 0;
  let endedAt = null;
  let spread = false;
  // The first batch waits a period (or the end): a handler that ends within it sends its
  // whole log with its result.
  if (!capture.ended) await capture.idle(SHIP_EVERY_MS);
  for (;;) {
    if (capture.carried) return;
    if (capture.ended && endedAt === null) endedAt = Date.now();
    const { lines, end } = capture.next();
    if (end && end.lines === 0) return; // nothing was logged: nothing is sent
    if (end && !spread) {
      // Executions that end together would ship their last batches together, in the
      // scheduler's busiest moment: the last batch waits a share of a second.
      spread = true;
      await sleep(spreadOf(traceId), undefined, { ref: false });
      continue;
    }
    if (lines.length === 0 && !end) {
      await capture.idle(SHIP_EVERY_MS);
      continue;
    }
    const body = Buffer.from(JSON.stringify(end ? { lines, end } : { lines }));
    if (capture.carried) return;
    capture.sending = true;
    let status;
    try {
      status = await post(body);
    } finally {
      capture.sending = false;
    }
    if (status === 200) {
      failures = 0;
      if (lines.length > 0) capture.shipped(lines[lines.length - 1].seq);
      if (end) return;
      if (!capture.ended) await capture.idle(SHIP_EVERY_MS);
    } else if (status !== null && status >= 400 && status < 500) {
      warn?.(`jobflow executor: log refused with ${status}; dropped`);
      return;
    } else {
      if (endedAt !== null && Date.now() - endedAt > GIVE_UP_AFTER_MS) {
        warn?.('jobflow executor: log could not be shipped; dropped');
        return;
      }
      failures += 1;
      await sleep(Math.min(250 * 2 ** Math.min(failures, 10), RETRY_AT_MOST_MS), undefined, { ref: false });
    }
  }
}

/**
 * The logs carried lately, by trace id, within a byte budget, oldest forgotten first: a
 * scheduler that took an answer and stopped before storing it calls again, and the repeated
 * call's answer carries the log again.
 */
export class CarriedMemory {
  constructor(budget = CARRIED_MEMORY) {
    this.budget = budget;
    this.bytes = 0;
    this.logs = new Map();
  }

  keep(traceId, rest) {
    if (this.logs.has(traceId)) return;
    const size = Buffer.byteLength(JSON.stringify(rest));
    this.logs.set(traceId, { rest, size });
    this.bytes += size;
    for (const [old, { size: gone }] of this.logs) {
      if (this.bytes <= this.budget) break;
      this.logs.delete(old);
      this.bytes -= gone;
    }
  }

  get(traceId) {
    return this.logs.get(traceId)?.rest ?? null;
  }
}
