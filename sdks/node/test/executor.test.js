// The Node SDK without a scheduler: the protocol's signature vector, the call parsed, the
// memory of executions, and handlers that stop or do not.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { JobExecutor, JobResult, parseCall, sign, verify } from '../src/index.js';

const SECRET = 's3cret';

test('the signature of the protocol example', () => {
  const body = Buffer.from('{"traceId":"4bf92f3577b34da6a3ce929d0e0e4736","jobName":"order-sync"}');
  const expected = 'v1=a2d5a056476b16333e35d275ad4d8d0d8476492edb2e89cebf24a7ba34ca13f2';
  assert.equal(sign(SECRET, 'POST', '/internal/job/syncOrders', '1700000000', '4bf92f3577b34da6a3ce929d0e0e4736', body), expected);
  const headers = { 'x-jobflow-timestamp': '1700000000', 'x-jobflow-signature': expected };
  const args = [SECRET, 'POST', '/internal/job/syncOrders', headers, '4bf92f3577b34da6a3ce929d0e0e4736', body];
  assert.ok(verify(...args, 1700000000 + 300));
  assert.ok(!verify(...args, 1700000000 + 301), 'stale by more than 300 s');
  assert.ok(!verify('other', ...args.slice(1), 1700000000));
  assert.ok(!verify(SECRET, 'POST', '/internal/job/other', headers, '4bf92f3577b34da6a3ce929d0e0e4736', body, 1700000000));
  assert.ok(!verify(SECRET, 'POST', '/internal/job/syncOrders', {}, '4bf92f3577b34da6a3ce929d0e0e4736', body, 1700000000));
});

function call(extra = {}) {
  return {
    traceId: 't1', executionId: 'job:20260101020000:2-3', jobName: 'job', handler: 'work',
    triggerType: 'CRON', fireTime: '2026-01-01T02:00:00Z', shardStart: 2, shardEnd: 3,
    shardCount: 4, shardStrategy: 'RANGE', retryCount: 1, timeoutSeconds: 30,
    jobParams: { batch: 5 }, dataRange: { start: 51, end: 100 }, reportUrl: '', ...extra,
  };
}

test('the call parsed into the context', () => {
  const ctx = parseCall(call({ shardItems: { 2: 'Shanghai', 3: 'Guangzhou' } }));
  assert.deepEqual([ctx.shardStart, ctx.shardEnd, ctx.shardCount], [2, 3, 4]);
  assert.deepEqual([0, 1, 2, 3, 4, 5, 6, 7].filter((i) => ctx.ownsId(i)), [2, 3, 6, 7]);
  assert.equal(ctx.fireTime.toISOString(), '2026-01-01T02:00:00.000Z');
  assert.deepEqual(ctx.dataRange, { start: 51, end: 100 });
  assert.deepEqual(ctx.shardItems, { 2: 'Shanghai', 3: 'Guangzhou' });
  assert.throws(() => parseCall({ traceId: 'x' }), /missing executionId/);
});

function signedRequest(executor, method, path, traceId, body = Buffer.alloc(0)) {
  const ts = String(Math.floor(Date.now() / 1000));
  return executor.handle(method, path, {
    'x-trace-id': traceId, 'x-jobflow-timestamp': ts,
    'x-jobflow-signature': sign(SECRET, method, path, ts, traceId, body),
  }, body);
}

const run = (executor, body) => signedRequest(executor, 'POST', '/internal/job/work', body.traceId, Buffer.from(JSON.stringify(body)));

test('a repeated call runs the handler once', async () => {
  const executor = new JobExecutor({ secret: SECRET });
  let runs = 0;
  executor.handler('work', async () => `run ${++runs}`);
  const first = await run(executor, call());
  const second = await run(executor, call());
  assert.deepEqual(first, [200, { success: true, message: 'run 1' }]);
  assert.deepEqual(second, first);
  assert.equal(runs, 1);
});

test('finished executions are forgotten by age and count, never running ones', async () => {
  const executor = new JobExecutor({ secret: SECRET, keepAtLeast: 2, keepForMs: 0, keepAtMost: 4 });
  let release;
  const held = new Promise((r) => { release = r; });
  executor.handler('work', async (ctx) => (ctx.jobParams?.hold ? held : 'done'));
  const running = run(executor, call({ traceId: 'running', jobParams: { hold: true } }));
  for (const id of ['a', 'b', 'c']) {
    await run(executor, call({ traceId: id }));
    await new Promise((r) => setTimeout(r, 3)); // each finished before the next
  }
  // Older than keepForMs (0) and over keepAtLeast (2): the oldest-finished goes.
  assert.deepEqual([...executor.ledger.entries.keys()].sort(), ['b', 'c', 'running']);
  assert.equal((await signedRequest(executor, 'GET', '/internal/job/status/a', 'a'))[0], 404);
  assert.ok(Date.parse((await signedRequest(executor, 'GET', '/internal/job/status/a', 'a'))[1].rememberedSince) >= executor.startedAt);
  release('released');
  assert.equal((await running)[1].message, 'released');
});

test('a handler that ignores its signal is reported RUNNING until it settles', async () => {
  const executor = new JobExecutor({ secret: SECRET, stopWaitMs: 300 });
  let release;
  const held = new Promise((r) => { release = r; });
  executor.handler('work', async () => held);
  const answer = await run(executor, call({ timeoutSeconds: 1 }));
  assert.equal(answer[0], 202, 'past its timeout and not stopped: the result will be reported');
  assert.equal((await signedRequest(executor, 'GET', '/internal/job/status/t1', 't1'))[1].status, 'RUNNING');
  assert.equal((await signedRequest(executor, 'POST', '/internal/job/cancel/t1', 't1'))[1].status, 'RUNNING');
  release('finished anyway');
  await new Promise((r) => setTimeout(r, 50));
  assert.equal((await signedRequest(executor, 'GET', '/internal/job/status/t1', 't1'))[1].status, 'TIMEOUT');
});

test('a handler that honours its signal stops at the timeout', async () => {
  const executor = new JobExecutor({ secret: SECRET });
  executor.handler('work', (ctx) => new Promise((resolve, reject) => {
    const t = setTimeout(() => resolve('too late'), 5000);
    ctx.signal.addEventListener('abort', () => { clearTimeout(t); reject(new Error('aborted')); });
  }));
  const began = Date.now();
  const answer = await run(executor, call({ timeoutSeconds: 1 }));
  assert.deepEqual(answer, [200, JobResult.timedOut(1).toJSON()]);
  assert.ok(Date.now() - began < 3000);
});

test('as middleware: its paths served, the others passed on, unsigned calls refused', async () => {
  const executor = new JobExecutor({ secret: SECRET }).handler('work', async () => 'ok');
  const mw = executor.middleware();
  const server = http.createServer((req, res) => mw(req, res, () => { res.writeHead(418); res.end(); }));
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${server.address().port}`;
  try {
    assert.equal((await fetch(`${base}/elsewhere`)).status, 418);
    const unsigned = await fetch(`${base}/internal/job/work`, { method: 'POST', body: JSON.stringify(call()), headers: { 'x-trace-id': 't1' } });
    assert.equal(unsigned.status, 401);
  } finally {
    server.close();
  }
});
