// The executor inside the two servers Node teams use most: Express (as middleware, before its
// body parser) and Fastify (in an onRequest hook, before its body parsing). Signed calls reach
// the handler; the applications' own routes keep working.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import express from 'express';
import Fastify from 'fastify';
import { JobExecutor, sign } from '../src/index.js';

const SECRET = 's3cret';

function executor() {
  return new JobExecutor({ secret: SECRET }).handler('work', async (ctx) => `shards ${ctx.shardStart}-${ctx.shardEnd} of ${ctx.shardCount}`);
}

async function signedCall(base) {
  const body = JSON.stringify({
    traceId: 'f1', executionId: 'job:20260101020000:0-1', jobName: 'job', handler: 'work',
    fireTime: '2026-01-01T02:00:00Z', shardStart: 0, shardEnd: 1, shardCount: 2, timeoutSeconds: 5,
  });
  const ts = String(Math.floor(Date.now() / 1000));
  const resp = await fetch(`${base}/internal/job/work`, {
    method: 'POST', body,
    headers: {
      'content-type': 'application/json', 'x-trace-id': 'f1', 'x-jobflow-timestamp': ts,
      'x-jobflow-signature': sign(SECRET, 'POST', '/internal/job/work', ts, 'f1', Buffer.from(body)),
    },
  });
  return [resp.status, await resp.json()];
}

test('Express: middleware before express.json()', async () => {
  const app = express();
  app.use(executor().middleware());
  app.use(express.json());
  app.post('/orders', (req, res) => res.json({ got: req.body }));
  const server = await new Promise((r) => { const s = app.listen(0, '127.0.0.1', () => r(s)); });
  const base = `http://127.0.0.1:${server.address().port}`;
  try {
    assert.deepEqual(await signedCall(base), [200, { success: true, message: 'shards 0-1 of 2' }]);
    const own = await fetch(`${base}/orders`, { method: 'POST', body: '{"a":1}', headers: { 'content-type': 'application/json' } });
    assert.deepEqual(await own.json(), { got: { a: 1 } });
  } finally {
    server.close();
  }
});

test('Fastify: an onRequest hook, before body parsing', async () => {
  const app = Fastify();
  const mw = executor().middleware();
  app.addHook('onRequest', (req, reply, done) => {
    if (!req.url.startsWith('/internal/job/')) return done();
    reply.hijack();
    mw(req.raw, reply.raw, done);
  });
  app.post('/orders', async (req) => ({ got: req.body }));
  await app.listen({ port: 0, host: '127.0.0.1' });
  const base = `http://127.0.0.1:${app.server.address().port}`;
  try {
    assert.deepEqual(await signedCall(base), [200, { success: true, message: 'shards 0-1 of 2' }]);
    const own = await fetch(`${base}/orders`, { method: 'POST', body: '{"a":1}', headers: { 'content-type': 'application/json' } });
    assert.deepEqual(await own.json(), { got: { a: 1 } });
  } finally {
    await app.close();
  }
});
