// Registration in a real Nacos server (rnacos, found through $RNACOS_BIN as the other suites
// find it).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { NacosError, NacosRegistration } from '../src/index.js';

async function freePort() {
  return new Promise((resolve) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

// rnacos 0.8.8 sometimes panics in its raft store on a first start: naming keeps working, but
// every login then answers "Mailbox has closed" (more often when a login comes before the store
// is wired up, so readiness is probed without one). A start that does not take its admin login
// is redone afresh, on new ports and a new data directory, as the other suites do.
async function startRnacos(t, auth) {
  const bin = process.env.RNACOS_BIN;
  if (!bin) {
    if (process.env.CI) assert.fail('RNACOS_BIN is not set (scripts/conformance.sh sets it)');
    t.skip('RNACOS_BIN is not set: the Nacos registration tests need rnacos');
    return null;
  }
  for (let start = 1; ; start++) {
    const nacos = await launchRnacos(t, bin, auth);
    const last = await ready(nacos, auth);
    if (last === null) return nacos;
    nacos.stop();
    if (start === 3) throw new Error(`rnacos did not answer: ${last}`);
  }
}

// null once rnacos answers without a login, then takes its admin login (20 s in all); else
// what it last said.
async function ready(nacos, auth) {
  const deadline = Date.now() + 20_000;
  const lastError = async (probe) => {
    try { await probe(); return null; } catch (e) { return e.message; }
  };
  let last = await lastError(() => nacos.answers());
  while (last !== null && Date.now() < deadline) {
    await sleep(100);
    last = await lastError(() => nacos.answers());
  }
  if (last !== null || !auth) return last;
  // The admin user is created through raft shortly after start: give it a moment.
  await sleep(500);
  for (;;) {
    last = await lastError(() => nacos.hosts('nobody'));
    if (last === null || /Mailbox/.test(last) || Date.now() > deadline) return last;
    await sleep(100);
  }
}

async function launchRnacos(t, bin, auth) {
  let port = await freePort();
  while (port + 1000 > 65535) port = await freePort();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rnacos-'));
  const env = {
    ...process.env, RNACOS_HTTP_PORT: String(port), RNACOS_GRPC_PORT: String(port + 1000),
    RNACOS_HTTP_CONSOLE_PORT: String(await freePort()), RNACOS_DATA_DIR: path.join(dir, 'data'), RUST_LOG: 'warn',
  };
  if (auth) Object.assign(env, { RNACOS_ENABLE_OPEN_API_AUTH: 'true', RNACOS_INIT_ADMIN_USERNAME: auth[0], RNACOS_INIT_ADMIN_PASSWORD: auth[1] });
  const child = spawn(bin, [], { cwd: dir, env, stdio: 'ignore' });
  const stop = () => { child.kill('SIGKILL'); rmSync(dir, { recursive: true, force: true }); };
  t.after(stop);
  return {
    addr: `127.0.0.1:${port}`,
    stop,
    // Up without a login: the HTTP port answers (with authentication on, any answer, a 403)
    // and the gRPC port accepts.
    async answers() {
      const answer = await fetch(`http://${this.addr}/nacos/v1/ns/service/list?pageNo=1&pageSize=10`);
      if (!auth && !answer.ok) throw new Error(`HTTP ${answer.status}`);
      await new Promise((resolve, reject) => {
        const socket = net.connect(port + 1000, '127.0.0.1', () => { socket.end(); resolve(); });
        socket.on('error', reject);
      });
    },
    async hosts(service) {
      const q = new URLSearchParams({ serviceName: service });
      if (auth) {
        const login = await fetch(`http://${this.addr}/nacos/v1/auth/login`, { method: 'POST', body: new URLSearchParams({ username: auth[0], password: auth[1] }) });
        q.set('accessToken', (await login.json()).accessToken);
      }
      const answer = await fetch(`http://${this.addr}/nacos/v1/ns/instance/list?${q}`);
      if (!answer.ok) throw new Error(`${answer.status}`);
      return (await answer.json()).hosts;
    },
  };
}

async function waitFor(what, check) {
  const deadline = Date.now() + 10_000;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

test('the instance is listed with its prefix and leaves on close', async (t) => {
  const nacos = await startRnacos(t);
  if (!nacos) return;
  const registration = await new NacosRegistration({ serverAddr: nacos.addr, serviceName: 'orders', ip: '127.0.0.1', port: 18323, pathPrefix: '/jobs' }).start();
  const hosts = await nacos.hosts('orders');
  assert.deepEqual(hosts.map((h) => [h.ip, h.port, h.healthy, h.ephemeral, h.metadata]),
    [['127.0.0.1', 18323, true, true, { 'jobflow.path-prefix': '/jobs' }]]);
  await registration.close();
  await waitFor('the instance to leave', async () => (await nacos.hosts('orders')).length === 0);
});

test('a forgotten instance registers again on its next beat, through a second address', async (t) => {
  const nacos = await startRnacos(t);
  if (!nacos) return;
  const dead = `127.0.0.1:${await freePort()}`;
  const registration = await new NacosRegistration({ serverAddr: `${dead},${nacos.addr}`, serviceName: 'kept', ip: '127.0.0.1', port: 18325, logger: { info() {}, warn() {} } }).start();
  try {
    assert.deepEqual((await nacos.hosts('kept')).map((h) => h.metadata), [{}]);
    await fetch(`http://${nacos.addr}/nacos/v1/ns/instance?serviceName=kept&ip=127.0.0.1&port=18325&ephemeral=true`, { method: 'DELETE' });
    assert.deepEqual(await nacos.hosts('kept'), []);
    // The next beat (rnacos asks for one every 5 s) finds it forgotten.
    await waitFor('registered again', async () => (await nacos.hosts('kept')).length === 1);
  } finally {
    await registration.close();
  }
});

test('with authentication a wrong password is refused and the right one registers', async (t) => {
  const nacos = await startRnacos(t, ['jobflow', 's3cret-pass']);
  if (!nacos) return;
  await assert.rejects(
    new NacosRegistration({ serverAddr: nacos.addr, serviceName: 'secured', ip: '127.0.0.1', port: 18327, username: 'jobflow', password: 'wrong' }).start(),
    (e) => e instanceof NacosError && /login refused/.test(e.message),
  );
  const registration = await new NacosRegistration({ serverAddr: nacos.addr, serviceName: 'secured', ip: '127.0.0.1', port: 18327, username: 'jobflow', password: 's3cret-pass' }).start();
  try {
    assert.deepEqual((await nacos.hosts('secured')).map((h) => h.port), [18327]);
  } finally {
    await registration.close();
  }
});

test('an unreachable Nacos fails the start naming it', async () => {
  const dead = `127.0.0.1:${await freePort()}`;
  await assert.rejects(
    new NacosRegistration({ serverAddr: dead, serviceName: 'nowhere', ip: '127.0.0.1', port: 1, timeoutMs: 1000 }).start(),
    (e) => e instanceof NacosError && e.message.includes(dead),
  );
});
