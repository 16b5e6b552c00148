// Per-execution logs: what a handler logs reaches the scheduler's log endpoint in order,
// signed, with the end; the bound drops and says so; a handler that logs nothing sends nothing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { JobExecutor, sign } from '../src/index.js';
import { Capture, CARRY_BYTES, DEFAULT_LOG_BOUND, carryRoom, spreadOf } from '../src/logs.js';

const SECRET = 's3cret';

async function scheduler(t) {
  const batches = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      if (req.url.endsWith('/logs')) batches.push({ path: req.url, headers: req.headers, body });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => server.close());
  const { port } = server.address();
  return { batches, reportUrl: (trace) => `http://127.0.0.1:${port}/api/v1/jobs/executions/${trace}/result` };
}

function call(traceId, reportUrl) {
  return {
    traceId, executionId: 'job:20260101020000:0-0', jobName: 'job', handler: 'work', triggerType: 'CRON',
    fireTime: '2026-01-01T02:00:00Z', shardStart: 0, shardEnd: 0, shardCount: 1, shardStrategy: 'MOD_HASH',
    retryCount: 0, timeoutSeconds: 30, jobParams: null, reportUrl,
  };
}

async function run(executor, body) {
  const raw = Buffer.from(JSON.stringify(body));
  const ts = String(Math.floor(Date.now() / 1000));
  const path = '/internal/job/work';
  return executor.handle('POST', path, {
    'x-trace-id': body.traceId, 'x-jobflow-timestamp': ts,
    'x-jobflow-signature': sign(SECRET, 'POST', path, ts, body.traceId, raw),
  }, raw);
}

test('what a handler logs goes with the answer in order with the end, and again to a repeated call', async (t) => {
  const s = await scheduler(t);
  const executor = new JobExecutor({ secret: SECRET }).handler('work', async (ctx) => {
    ctx.log('loading 300 orders');
    await sleep(1);
    ctx.log('order 17 skipped', 'WARN');
    ctx.log('order 42 failed', 'ERROR');
    return 'done';
  });
  const body = call('l1', s.reportUrl('l1'));
  const [status, answer] = await run(executor, body);
  assert.equal(status, 200);
  const lines = answer.logs.lines.map((l) => [l.seq, l.level, l.message]);
  assert.deepEqual(lines, [[1, 'INFO', 'loading 300 orders'], [2, 'WARN', 'order 17 skipped'], [3, 'ERROR', 'order 42 failed']]);
  assert.deepEqual(answer.logs.end, { lines: 3, droppedBytes: 0 });
  const [, again] = await run(executor, body);
  assert.deepEqual(again, answer);
  await sleep(1500);
  assert.deepEqual(s.batches, [], 'no request of its own');
});

test('the rest stays with the shipper while a batch is on its way', () => {
  const capture = new Capture();
  capture.push('INFO', 'loading');
  capture.sending = true;
  capture.end();
  assert.equal(capture.takeRest(), null);
  capture.sending = false;
  assert.deepEqual(capture.takeRest().lines.map((l) => l.seq), [1]);
  assert.equal(capture.carried, true);
});

test('a long result leaves its log to the shipper', () => {
  assert.equal(carryRoom(40), CARRY_BYTES);
  assert.equal(carryRoom(60 * 1024), 0);
  const capture = new Capture();
  capture.push('INFO', 'done');
  capture.end();
  assert.equal(capture.takeRest(carryRoom(60 * 1024)), null);
  assert.equal(capture.carried, false);
});

test('a rest past the carry bound is shipped on its own, signed, with the end', async (t) => {
  const s = await scheduler(t);
  const executor = new JobExecutor({ secret: SECRET }).handler('work', async (ctx) => {
    for (let i = 0; i < 3; i++) ctx.log('x'.repeat(16 * 1024));
    return 'done';
  });
  const [status, answer] = await run(executor, call('v1', s.reportUrl('v1')));
  assert.equal(status, 200);
  assert.equal(answer.logs, undefined);
  const deadline = Date.now() + 10_000;
  while (!s.batches.some((b) => JSON.parse(b.body).end)) {
    assert.ok(Date.now() < deadline, 'no end shipped');
    await sleep(20);
  }
  assert.deepEqual(s.batches.flatMap((b) => JSON.parse(b.body).lines).map((l) => l.seq), [1, 2, 3]);
  const last = s.batches.at(-1);
  assert.deepEqual(JSON.parse(last.body).end, { lines: 3, droppedBytes: 0 });
  assert.equal(last.headers['x-jobflow-signature'],
    sign(SECRET, 'POST', '/api/v1/jobs/executions/v1/logs', last.headers['x-jobflow-timestamp'], 'v1', last.body));
});

test('a handler that logs nothing sends nothing', async (t) => {
  const s = await scheduler(t);
  const executor = new JobExecutor({ secret: SECRET }).handler('work', async () => 'done');
  await run(executor, call('q1', s.reportUrl('q1')));
  await sleep(1500);
  assert.deepEqual(s.batches, []);
});

test('past its bound an execution counts what it dropped and says so last', () => {
  const c = new Capture(10);
  for (const m of ['12345', '123456', '12345']) c.push('INFO', m);
  c.end();
  c.push('INFO', 'after the end');
  const { lines, end } = c.next();
  assert.deepEqual(lines.map((l) => l.message),
    ['12345', '12345', "6 bytes of log dropped: past this execution's bound of 10 bytes"]);
  assert.deepEqual(end, { lines: 3, droppedBytes: 6 });
});

test('a batch stays under the scheduler\'s body limit whatever its lines', () => {
  // The whole 1 MiB bound logged at once, in long lines that JSON escapes six-fold.
  const c = new Capture(DEFAULT_LOG_BOUND);
  for (let i = 0; i < 64; i++) c.push('INFO', '\x01'.repeat(16384));
  c.end();
  let shipped = 0;
  while (shipped < 64) {
    const { lines, end } = c.next();
    const body = Buffer.from(JSON.stringify(end ? { lines, end } : { lines }));
    assert.ok(body.length < 1024 * 1024, `${body.length} bytes`);
    shipped += lines.length;
    c.shipped(lines[lines.length - 1].seq);
  }
  assert.equal(shipped, 64);
});

test('the last batch waits a share of a second set by the trace id', () => {
  // The same vector in every SDK: the spread is the FNV-1a hash of the trace id.
  assert.equal(spreadOf('4bf92f3577b34da6a3ce929d0e0e4736'), 618);
  assert.equal(spreadOf('a'), 996);
});
