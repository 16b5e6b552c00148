// The Node SDK's sample for the conformance suite (conformance/README.md): the handlers every
// SDK's sample serves, on 127.0.0.1:$JOBFLOW_CONFORMANCE_PORT, accepting only calls signed
// with $JOBFLOW_SIGNING_SECRET.
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { JobExecutor, JobResult, NacosRegistration } from './src/index.js';

const runs = new Map();

async function witness(ctx) {
  const url = ctx.jobParams?.witness;
  if (url) await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ traceId: ctx.traceId }) });
}

async function sleepThenWitness(ctx) {
  await sleep(ctx.jobParams?.millis ?? 0, undefined, { signal: ctx.signal });
  await witness(ctx);
}

const executor = new JobExecutor({ secret: process.env.JOBFLOW_SIGNING_SECRET })
  .handler('echo', async (ctx) => {
    runs.set(ctx.traceId, (runs.get(ctx.traceId) ?? 0) + 1);
    return JSON.stringify({
      traceId: ctx.traceId, executionId: ctx.executionId, jobName: ctx.jobName,
      handler: ctx.handler, triggerType: ctx.triggerType,
      fireTime: ctx.fireTime.toISOString(), shardStart: ctx.shardStart, shardEnd: ctx.shardEnd,
      shardCount: ctx.shardCount, shardStrategy: ctx.shardStrategy, retryCount: ctx.retryCount,
      timeoutSeconds: ctx.timeoutSeconds, jobParams: ctx.jobParams, dataRange: ctx.dataRange,
      shardItems: ctx.shardItems, runs: runs.get(ctx.traceId),
    });
  })
  .handler('sleep', async (ctx) => { await sleepThenWitness(ctx); return 'slept'; })
  .handler('log', async (ctx) => { ctx.log('one'); ctx.log('two', 'WARN'); ctx.log('three', 'ERROR'); return 'logged'; })
  .handler('fail', async () => JobResult.failure('failed on purpose'))
  .handler('throw', async () => { throw new Error('thrown on purpose'); })
  .backgroundHandler('background', async (ctx) => { await sleepThenWitness(ctx); return 'done in background'; });

const port = Number(process.env.JOBFLOW_CONFORMANCE_PORT);
http.createServer(executor.listener()).listen(port, '127.0.0.1');
// With $JOBFLOW_NACOS_ADDR set, registers as $JOBFLOW_NACOS_SERVICE (credentials from
// $JOBFLOW_NACOS_USERNAME and _PASSWORD) for as long as the sample serves.
if (process.env.JOBFLOW_NACOS_ADDR) {
  await new NacosRegistration({
    serverAddr: process.env.JOBFLOW_NACOS_ADDR, serviceName: process.env.JOBFLOW_NACOS_SERVICE, ip: '127.0.0.1', port,
    username: process.env.JOBFLOW_NACOS_USERNAME, password: process.env.JOBFLOW_NACOS_PASSWORD,
  }).start();
}
