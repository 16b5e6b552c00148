// Registering an executor in Nacos, so schedulers that discover executors there find it
// (docs/executors/node.md, "Registering in Nacos").
//
// The instance is ephemeral: Nacos keeps it while beats arrive (every 5 s, or what the server
// asks for) and drops it about 30 s after they stop, so a process that dies leaves no stale
// address; close() removes it at once. Spoken over Nacos' HTTP open API (v1), which Nacos 1 and
// 2 and rnacos serve, and Nacos 3.2 and later through its legacy adapter; with authentication
// on, a login gives the access token, renewed before it expires. A failed beat is logged and
// tried again at the next interval; an instance Nacos no longer knows (a Nacos restart) is
// registered again. The beat timer is unref'd: it never keeps the process alive.

const DEFAULT_PATH_PREFIX = '/internal/job';

export class NacosError extends Error {}

function baseUrls(serverAddr) {
  const urls = String(serverAddr ?? '').split(',').map((p) => p.trim().replace(/\/+$/, ''))
    .filter(Boolean).map((p) => (p.includes('://') ? p : `http://${p}`));
  if (urls.length === 0) throw new Error('serverAddr names no Nacos server');
  return urls;
}

export class NacosRegistration {
  /**
   * @param {object} options serverAddr (one or several, comma-separated), serviceName, ip,
   *   port; namespace (default public), group (default DEFAULT_GROUP), pathPrefix (announced
   *   as jobflow.path-prefix when not /internal/job), username, password, timeoutMs (3000),
   *   logger (console).
   */
  constructor({ serverAddr, serviceName, ip, port, namespace = 'public', group = 'DEFAULT_GROUP',
    pathPrefix, username, password, timeoutMs = 3000, logger = console }) {
    this.urls = baseUrls(serverAddr);
    this.serviceName = serviceName;
    this.ip = ip;
    this.port = Number(port);
    // `public` is Nacos' default namespace, whose id is empty.
    this.namespaceId = namespace === 'public' ? '' : namespace;
    this.group = group;
    this.metadata = {};
    if (pathPrefix && pathPrefix !== DEFAULT_PATH_PREFIX) this.metadata['jobflow.path-prefix'] = pathPrefix;
    this.username = username;
    this.password = password;
    this.timeoutMs = timeoutMs;
    this.logger = logger;
    this.intervalMs = 5000;
    this.token = null;
    this.renewAt = 0;
    this.timer = null;
    this.closed = false;
  }

  /** Registers the instance and starts beating; rejects with NacosError when Nacos refuses. */
  async start() {
    await this.#register();
    this.#schedule();
    return this;
  }

  /** Stops beating and removes the instance (best effort: Nacos drops it once beats stop). */
  async close() {
    this.closed = true;
    clearTimeout(this.timer);
    await this.#request('DELETE', '/nacos/v1/ns/instance', this.#instance());
  }

  #schedule() {
    if (this.closed) return;
    this.timer = setTimeout(async () => {
      try {
        await this.#beat();
      } catch (e) {
        this.logger.warn?.(`jobflow executor: Nacos beat failed; trying again in ${this.intervalMs} ms: ${e.message}`);
      }
      this.#schedule();
    }, this.intervalMs);
    this.timer.unref?.();
  }

  #instance() {
    const p = { serviceName: this.serviceName, groupName: this.group, ip: this.ip, port: String(this.port), ephemeral: 'true' };
    if (this.namespaceId) p.namespaceId = this.namespaceId;
    return p;
  }

  async #register() {
    await this.#request('POST', '/nacos/v1/ns/instance', {
      ...this.#instance(), weight: '1.0', enabled: 'true', healthy: 'true', metadata: JSON.stringify(this.metadata),
    });
  }

  async #beat() {
    const beat = {
      serviceName: `${this.group}@@${this.serviceName}`, ip: this.ip, port: this.port, cluster: 'DEFAULT',
      weight: 1.0, metadata: this.metadata, scheduled: true,
    };
    const text = await this.#request('PUT', '/nacos/v1/ns/instance/beat', { ...this.#instance(), beat: JSON.stringify(beat) });
    let answer;
    try { answer = JSON.parse(text); } catch { return; }
    if (answer.clientBeatInterval > 0) this.intervalMs = answer.clientBeatInterval;
    if (answer.code === 20404) {
      // Nacos forgot the instance (it restarted, or the beats stopped long enough).
      this.logger.info?.('jobflow executor: Nacos no longer knew this instance; registering again');
      await this.#register();
    }
  }

  async #accessToken(base) {
    if (this.username === undefined) return null;
    if (this.token && Date.now() < this.renewAt) return this.token;
    let response;
    try {
      response = await fetch(`${base}/nacos/v1/auth/login`, {
        method: 'POST', body: new URLSearchParams({ username: this.username, password: this.password ?? '' }),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (e) {
      throw new NacosError(`Nacos login failed at ${base}: ${e.message}`);
    }
    if (!response.ok) {
      const refused = new NacosError(`Nacos login refused (${response.status}): check the username and password`);
      refused.refused = true;
      throw refused;
    }
    const body = await response.json();
    this.token = body.accessToken;
    this.renewAt = Date.now() + (body.tokenTtl || 18000) * 800;
    return this.token;
  }

  /** Asks each address in turn; the first answer counts. */
  async #request(method, path, params) {
    const failures = [];
    for (const base of this.urls) {
      let token;
      try {
        token = await this.#accessToken(base);
      } catch (e) {
        if (e.refused) throw e;
        failures.push(e.message);
        continue;
      }
      const query = new URLSearchParams(params);
      if (token) query.set('accessToken', token);
      let response;
      try {
        response = await fetch(`${base}${path}?${query}`, { method, signal: AbortSignal.timeout(this.timeoutMs) });
      } catch (e) {
        failures.push(`${base}: ${e.cause?.message ?? e.message}`);
        continue;
      }
      const text = await response.text();
      if (!response.ok) {
        if (response.status === 403) this.token = null;
        throw new NacosError(`${method} ${path} refused by ${base} (${response.status}): ${text.slice(0, 200)}`);
      }
      return text;
    }
    throw new NacosError(`no Nacos server answered ${method} ${path}: ${failures.join('; ')}`);
  }
}
