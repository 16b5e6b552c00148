// Executions: the search across jobs, and one execution's page with its shard range,
// executor, trace id, timings, error, retry chain and the Retry / Cancel actions.

import { nsApi, apiWithLink, inNamespace, query, enc, namespace } from './api.js';
import { h, mount, time, duration, statusBadge, flash, errorBox, pager, isFinal, namespaceTag } from './dom.js';
import { t } from './i18n.js';
import { session } from './session.js';

const STATUSES = ['PENDING', 'RUNNING', 'SUCCESS', 'FAILED', 'TIMEOUT', 'CANCELLED', 'SKIPPED'];
const TRIGGERS = ['CRON', 'MANUAL', 'RETRY', 'COMPENSATION', 'CHILD'];
const PAGE_SIZE = 20;
const POLL_MS = 1500;

const failed = (s) => s === 'FAILED' || s === 'TIMEOUT';

/// A table of executions; failed ones stand out.
export function executionTable(rows, { showJob }) {
  if (rows.length === 0) return h('p', { class: 'muted' }, t('exec.empty'));
  return h('div', { class: 'table-wrap' }, h('table', { class: 'executions' },
    h('thead', {}, h('tr', {},
      h('th', {}, t('exec.triggerTime')),
      showJob ? h('th', {}, t('exec.job')) : null,
      h('th', {}, t('exec.status')), h('th', {}, t('exec.triggerType')), h('th', {}, t('exec.shards')),
      h('th', {}, t('exec.executor')), h('th', { class: 'num' }, t('exec.duration')), h('th', {}, t('exec.trace')))),
    h('tbody', {}, rows.map((e) => h('tr', { class: failed(e.status) ? 'row-bad' : '' },
      h('td', {}, time(e.triggerTime)),
      showJob ? h('td', {}, h('a', { href: `#/jobs/${enc(e.jobName)}` }, e.jobName)) : null,
      h('td', {}, statusBadge(e.status)),
      h('td', {}, e.triggerType, e.retryCount ? ` #${e.retryCount}` : ''),
      h('td', {}, `${e.shardStart}–${e.shardEnd}`),
      h('td', {}, e.executorInstance || '–'),
      h('td', { class: 'num' }, duration(e.durationMs)),
      h('td', {}, h('a', { href: `#/executions/${enc(e.traceId)}`, class: 'mono' }, e.traceId.slice(0, 12))))))));
}

/// `datetime-local` value (local time) to an RFC 3339 instant.
export function instant(local) {
  if (!local) return '';
  const d = new Date(local);
  return Number.isNaN(d.getTime()) ? '' : d.toISOString();
}

/// An RFC 3339 instant to a `datetime-local` value.
export function localValue(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  const off = d.getTimezoneOffset() * 60000;
  return new Date(d.getTime() - off).toISOString().slice(0, 16);
}

export async function executionsPage(params) {
  const filter = {
    jobName: params.get('jobName') || '',
    status: params.get('status') || '',
    triggerType: params.get('triggerType') || '',
    from: params.get('from') || '',
    to: params.get('to') || '',
  };
  const pageNo = Number(params.get('page') || 0);
  const link = (over) => `#/executions${query({ ...filter, page: 0, ...over })}`;
  const job = h('input', { type: 'search', id: 'q-job', value: filter.jobName });
  const status = h('select', { id: 'q-status' }, h('option', { value: '' }, t('exec.all')),
    STATUSES.map((s) => h('option', { value: s, selected: s === filter.status }, t(`status.${s}`))));
  const trigger = h('select', { id: 'q-trigger' }, h('option', { value: '' }, t('exec.all')),
    TRIGGERS.map((s) => h('option', { value: s, selected: s === filter.triggerType }, s)));
  const from = h('input', { type: 'datetime-local', id: 'q-from', value: localValue(filter.from) });
  const to = h('input', { type: 'datetime-local', id: 'q-to', value: localValue(filter.to) });
  const form = h('form', {
    class: 'filters',
    role: 'search',
    onsubmit: (ev) => {
      ev.preventDefault();
      location.hash = link({
        jobName: job.value.trim(), status: status.value, triggerType: trigger.value,
        from: instant(from.value), to: instant(to.value),
      });
    },
  },
  h('div', { class: 'field' }, h('label', { for: 'q-job' }, t('exec.job')), job),
  h('div', { class: 'field' }, h('label', { for: 'q-status' }, t('exec.status')), status),
  h('div', { class: 'field' }, h('label', { for: 'q-trigger' }, t('exec.triggerType')), trigger),
  h('div', { class: 'field' }, h('label', { for: 'q-from' }, t('exec.from')), from),
  h('div', { class: 'field' }, h('label', { for: 'q-to' }, t('exec.to')), to),
  h('button', { type: 'submit' }, t('action.search')));

  let results;
  try {
    const page = await nsApi('GET', `/executions${query({ ...filter, page: pageNo, size: PAGE_SIZE })}`);
    results = [executionTable(page.content, { showJob: true }), pager(page, (n) => { location.hash = link({ page: n }); })];
  } catch (err) {
    if (err.status === 401) throw err;
    results = err.status === 404 && !err.fields.jobName
      ? h('p', { class: 'error' }, t('exec.searchUnavailable', { message: err.message }))
      : errorBox(err);
  }
  return { node: h('div', {}, h('h1', {}, t('exec.title'), namespaceTag(namespace.get())), form, results), title: t('exec.title') };
}

/// The retries before this execution (following parentTraceId) and after it (rows of the
/// same job whose parent is in the chain), oldest first.
async function retryChain(exec) {
  const chain = [exec];
  let cur = exec;
  for (let i = 0; i < 20 && cur.parentTraceId; i += 1) {
    try {
      cur = await nsApi('GET', `/jobs/executions/${enc(cur.parentTraceId)}`);
    } catch {
      break;
    }
    chain.unshift(cur);
  }
  try {
    const recent = await nsApi('GET', `/jobs/${enc(exec.jobName)}/executions?size=200`);
    const byParent = new Map(recent.content.filter((e) => e.parentTraceId).map((e) => [e.parentTraceId, e]));
    let last = exec;
    while (byParent.has(last.traceId) && chain.length < 50) {
      last = byParent.get(last.traceId);
      chain.push(last);
    }
  } catch {
    // The chain before this execution is still shown.
  }
  return chain;
}

/// The execution's log, as its executor shipped it, followed while more may come.
function executionLog(traceId) {
  const lines = h('div', { class: 'log-lines mono', role: 'log', 'aria-live': 'polite' });
  const note = h('p', { class: 'muted' }, t('exec.logWaiting'));
  const elsewhere = h('p', {});
  const card = h('section', { class: 'card log', 'aria-label': t('exec.log') }, h('h2', {}, t('exec.log')), elsewhere, note, lines);
  let after = '';
  let timer = null;
  let seen = 0;
  async function follow() {
    try {
      const { json: page, link } = await apiWithLink('GET', inNamespace(`/jobs/executions/${enc(traceId)}/logs${query({ after, limit: 1000 })}`));
      if (link && !elsewhere.firstChild) {
        mount(elsewhere, h('a', { href: link, target: '_blank', rel: 'noopener' }, t('exec.logElsewhere')));
      }
      for (const l of page.lines) {
        lines.append(h('div', { class: `log-line level-${l.level.toLowerCase()}` },
          h('span', { class: 'log-at' }, time(l.at)), ' ', h('span', { class: 'log-level' }, l.level), ' ',
          h('span', { class: 'log-message' }, l.message)));
      }
      seen += page.lines.length;
      after = page.next;
      if (page.complete) {
        mount(note, seen === 0 ? t('exec.logNone') : t('exec.logComplete', { lines: seen }));
        return;
      }
      if (seen > 0) mount(note, t('exec.logFollowing'));
      timer = setTimeout(follow, page.lines.length === 1000 ? 0 : POLL_MS);
    } catch (err) {
      mount(note, errorBox(err));
      timer = setTimeout(follow, POLL_MS * 4);
    }
  }
  follow();
  return { card, stop: () => clearTimeout(timer) };
}

export async function executionPage(traceId) {
  const node = h('div', {});
  const status = h('div', {});
  let timer = null;
  const log = executionLog(traceId);

  async function act(work) {
    try {
      await work();
    } catch (err) {
      mount(status, errorBox(err));
    }
  }

  async function draw() {
    clearTimeout(timer);
    const e = await nsApi('GET', `/jobs/executions/${enc(traceId)}`);
    const chain = await retryChain(e);
    const item = (key, value) => [h('dt', {}, t(key)), h('dd', {}, value)];
    const actions = h('div', { class: 'actions' },
      session.can('operator') && isFinal(e.status) ? h('button', {
        type: 'button',
        onclick: () => act(async () => {
          const retry = await nsApi('POST', `/jobs/executions/${enc(traceId)}/retry`);
          flash(t('exec.retried'));
          location.hash = `#/executions/${enc(retry.traceId)}`;
        }),
      }, t('action.retry')) : null,
      session.can('operator') && !isFinal(e.status) ? h('button', {
        type: 'button',
        class: 'danger',
        onclick: () => act(async () => {
          await nsApi('POST', `/jobs/executions/${enc(traceId)}/cancel`);
          flash(t('exec.cancelled'));
          await draw();
        }),
      }, t('action.cancel')) : null);
    mount(node,
      h('p', { class: 'crumbs' }, h('a', { href: '#/executions' }, t('nav.executions')), ' / ',
        h('a', { href: `#/jobs/${enc(e.jobName)}` }, e.jobName), ' / '),
      h('div', { class: 'title-row' }, h('h1', {}, h('span', { class: 'mono' }, e.traceId), ' ', statusBadge(e.status)), actions),
      status,
      failed(e.status) && e.errorMessage ? h('pre', { class: 'error-message', role: 'alert' }, e.errorMessage) : null,
      h('div', { class: 'columns' },
        h('section', { class: 'card' }, h('dl', { class: 'definition' },
          item('exec.namespace', e.namespace),
          item('exec.job', h('a', { href: `#/jobs/${enc(e.jobName)}` }, e.jobName)),
          item('exec.status', statusBadge(e.status)),
          item('exec.triggerType', e.triggerType),
          item('exec.retryCount', String(e.retryCount)),
          item('exec.shards', t('exec.shardRange', { start: e.shardStart, end: e.shardEnd, count: e.shardCount ?? '?' })),
          item('exec.executor', e.executorInstance || '–'),
          item('exec.scheduler', e.schedulerInstance || '–'),
          item('exec.trace', h('span', { class: 'mono' }, e.traceId)),
          item('exec.executionId', h('span', { class: 'mono' }, e.executionId)),
          item('exec.fireTime', time(e.fireTime)),
          item('exec.triggerTime', time(e.triggerTime)),
          item('exec.start', time(e.startTime)),
          item('exec.finish', time(e.finishTime)),
          item('exec.duration', duration(e.durationMs)),
          item('exec.params', e.jobParams == null ? t('exec.paramsOfJob')
            : h('pre', { class: 'params mono' }, JSON.stringify(e.jobParams, null, 2))),
          item('exec.result', e.resultMessage || '–'),
          item('exec.error', e.errorMessage ? h('span', { class: 'bad-text' }, e.errorMessage) : '–'),
          e.parentTraceId ? item('exec.parent', h('a', { href: `#/executions/${enc(e.parentTraceId)}`, class: 'mono' }, e.parentTraceId)) : null)),
        h('section', { class: 'card' },
          h('h2', {}, t('exec.chain')),
          h('ol', { class: 'chain' }, chain.map((c) => h('li', { class: c.traceId === e.traceId ? 'current' : '' },
            c.traceId === e.traceId ? h('strong', { class: 'mono' }, c.traceId.slice(0, 12))
              : h('a', { href: `#/executions/${enc(c.traceId)}`, class: 'mono' }, c.traceId.slice(0, 12)),
            ' ', c.triggerType, ' ', statusBadge(c.status), ' ', time(c.triggerTime)))))),
      log.card);
    if (!isFinal(e.status)) timer = setTimeout(() => draw().catch(() => {}), POLL_MS);
  }

  await draw();
  return { node, title: traceId.slice(0, 12), leave: () => { clearTimeout(timer); log.stop(); } };
}
