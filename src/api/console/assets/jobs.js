// Jobs: the searchable, filterable, paged list, and one job's page (definition, next fire
// times, history, and the actions the caller's role allows).

import { nsApi, query, enc, namespace } from './api.js';
import { h, mount, time, statusBadge, flash, errorBox, confirmDialog, pager, isFinal, namespaceTag } from './dom.js';
import { t } from './i18n.js';
import { cronWords } from './cron-words.js';
import { session } from './session.js';
import { executionTable } from './executions.js';

const PAGE_SIZE = 20;
const HISTORY_SIZE = 10;
const POLL_MS = 1500;

function go(hash) {
  location.hash = hash;
}

function schedule(job) {
  switch (job.scheduleType) {
    case 'FIXED_RATE':
      return h('span', { class: 'cron' }, t('schedule.fixedRate', { seconds: job.intervalSeconds }),
        h('span', { class: 'words' }, t('schedule.from'), ' ', time(job.startAt, job.timezone)));
    case 'FIXED_DELAY':
      return h('span', { class: 'cron' }, t('schedule.fixedDelay', { seconds: job.intervalSeconds }),
        h('span', { class: 'words' }, t('schedule.from'), ' ', time(job.startAt, job.timezone)));
    case 'ONCE':
      return h('span', { class: 'cron' }, t('schedule.once'), ' ', time(job.startAt, job.timezone));
    case 'NONE':
      return h('span', { class: 'cron muted' }, t('schedule.none'));
    default: {
      const words = cronWords(job.cron);
      return h('span', { class: 'cron' }, h('code', {}, job.cron), words ? h('span', { class: 'words' }, words) : null);
    }
  }
}

export async function jobsPage(params) {
  const filter = {
    namePrefix: params.get('namePrefix') || '',
    serviceName: params.get('serviceName') || '',
    enabled: params.get('enabled') || '',
  };
  const pageNo = Number(params.get('page') || 0);
  // One call for the page: each job comes with its next fire time and last execution.
  const page = await nsApi('GET', `/jobs${query({ ...filter, page: pageNo, size: PAGE_SIZE, summary: true })}`);
  const link = (over) => `#/jobs${query({ ...filter, page: 0, ...over })}`;

  const prefix = h('input', { type: 'search', id: 'q-name', value: filter.namePrefix });
  const service = h('input', { type: 'text', id: 'q-service', value: filter.serviceName });
  const enabled = h('select', { id: 'q-enabled' },
    h('option', { value: '' }, t('jobs.any')),
    h('option', { value: 'true', selected: filter.enabled === 'true' }, t('jobs.onlyEnabled')),
    h('option', { value: 'false', selected: filter.enabled === 'false' }, t('jobs.onlyDisabled')));
  const form = h('form', {
    class: 'filters',
    role: 'search',
    onsubmit: (ev) => {
      ev.preventDefault();
      go(link({ namePrefix: prefix.value.trim(), serviceName: service.value.trim(), enabled: enabled.value }));
    },
  },
  h('div', { class: 'field' }, h('label', { for: 'q-name' }, t('jobs.namePrefix')), prefix),
  h('div', { class: 'field' }, h('label', { for: 'q-service' }, t('jobs.service')), service),
  h('div', { class: 'field' }, h('label', { for: 'q-enabled' }, t('jobs.enabled')), enabled),
  h('button', { type: 'submit' }, t('action.search')));

  const rows = page.content.map((job) => {
    const { nextFireTime, lastExecution } = job.summary;
    const next = h('td', {}, !job.enabled ? h('span', { class: 'muted' }, t('jobs.paused'))
      : nextFireTime ? time(nextFireTime) : '–');
    const last = h('td', {}, lastExecution
      ? h('a', { href: `#/executions/${enc(lastExecution.traceId)}` }, statusBadge(lastExecution.status))
      : h('span', { class: 'muted' }, '–'));
    return h('tr', { class: job.enabled ? '' : 'row-muted' },
      h('td', {}, h('a', { href: `#/jobs/${enc(job.name)}` }, job.name)),
      h('td', {}, job.serviceName),
      h('td', {}, schedule(job)),
      next,
      h('td', {}, job.enabled ? t('yes') : t('no')),
      last);
  });

  const node = h('div', {},
    h('div', { class: 'title-row' },
      h('h1', {}, t('jobs.title'), namespaceTag(namespace.get())),
      session.can('admin') ? h('a', { class: 'button', href: '#/jobs/+new' }, t('action.create')) : null),
    form,
    page.content.length === 0 ? h('p', { class: 'muted' }, t('jobs.empty')) : h('div', { class: 'table-wrap' }, h('table', {},
      h('thead', {}, h('tr', {},
        h('th', {}, t('jobs.name')), h('th', {}, t('jobs.service')), h('th', {}, t('jobs.cron')),
        h('th', {}, t('jobs.nextFire')), h('th', {}, t('jobs.enabled')), h('th', {}, t('jobs.lastResult')))),
      h('tbody', {}, rows))),
    pager(page, (n) => go(link({ page: n }))));
  return { node, title: t('jobs.title') };
}

function definition(job) {
  const item = (key, value) => (value === undefined ? null : [h('dt', {}, t(key)), h('dd', {}, value)]);
  const json = (v) => (v === null || v === undefined ? '–' : h('code', {}, JSON.stringify(v)));
  const list = (v) => (Array.isArray(v) ? (v.length ? v.join(', ') : '–') : undefined);
  return h('dl', { class: 'definition' },
    item('f.namespace', job.namespace),
    item('f.serviceName', job.serviceName),
    item('f.serviceGroup', job.serviceGroup || undefined),
    item('f.handler', job.handler),
    item('f.cron', schedule(job)),
    item('f.timezone', job.timezone),
    item('f.calendar', job.calendar || undefined),
    item('f.enabled', job.enabled ? t('yes') : t('no')),
    item('f.shardCount', `${job.shardCount} (${job.shardStrategy})`),
    item('f.shardParams', json(job.shardParams)),
    item('f.jobParams', json(job.jobParams)),
    item('f.timeoutSeconds', String(job.timeoutSeconds)),
    item('f.maxRetry', String(job.maxRetry)),
    item('f.misfirePolicy', job.misfirePolicy),
    item('f.routeStrategy', job.routeStrategy),
    item('f.overlapPolicy', job.overlapPolicy),
    item('f.childJobs', list(job.childJobs)),
    item('f.alertChannels', list(job.alertChannels)),
    item('f.source', job.source),
    item('f.description', job.description || '–'),
    item('f.createdAt', time(job.createdAt)),
    item('f.updatedAt', time(job.updatedAt)),
    item('f.createdBy', job.createdBy || '–'),
    item('f.updatedBy', job.updatedBy || '–'));
}

export async function jobPage(name, params) {
  const node = h('div', {});
  let timer = null;
  let historyPage = Number(params.get('page') || 0);
  let historyStatus = params.get('status') || '';
  const status = h('div', {});

  async function act(work) {
    try {
      await work();
    } catch (err) {
      mount(status, errorBox(err));
    }
  }

  const history = h('section', { class: 'card', 'aria-labelledby': 'history-title' });
  const backfills = h('section', { class: 'card', 'aria-labelledby': 'backfills-title' });
  let backfillTimer = null;
  async function drawBackfills(job) {
    clearTimeout(backfillTimer);
    const list = await nsApi('GET', `/jobs/${enc(name)}/backfills`);
    const cancel = (b) => h('button', {
      type: 'button',
      class: 'secondary',
      onclick: () => act(async () => {
        await nsApi('POST', `/jobs/${enc(name)}/backfills/${enc(b.backfillId)}/cancel`);
        flash(t('backfill.cancelled'));
        await drawBackfills(job);
      }),
    }, t('action.cancel'));
    const rows = list.map((b) => h('tr', {},
      h('td', { class: 'mono' }, b.backfillId),
      h('td', {}, time(b.from, job.timezone), ' – ', time(b.to, job.timezone)),
      h('td', {}, h('progress', { value: b.done, max: b.fires }), ` ${b.done} / ${b.fires}`),
      h('td', {}, statusBadge(b.status)),
      h('td', {}, b.createdBy || '–'),
      h('td', {}, b.status === 'RUNNING' && session.can('operator') ? cancel(b) : null)));
    mount(backfills,
      h('h2', { id: 'backfills-title' }, t('backfill.title')),
      list.length === 0 ? h('p', { class: 'muted' }, t('backfill.none')) : h('div', { class: 'table-wrap' }, h('table', { class: 'backfills' },
        h('thead', {}, h('tr', {},
          h('th', {}, t('backfill.id')), h('th', {}, t('backfill.interval')), h('th', {}, t('backfill.progress')),
          h('th', {}, t('backfill.status')), h('th', {}, t('backfill.by')), h('th', {}, ''))),
        h('tbody', {}, rows))),
      session.can('operator') && job.scheduleType !== 'NONE' ? backfillForm(job) : null);
    // Follow running backfills until they end.
    if (list.some((b) => b.status === 'RUNNING')) {
      backfillTimer = setTimeout(() => drawBackfills(job).catch(() => {}), POLL_MS);
    }
  }
  function backfillForm(job) {
    const from = h('input', { type: 'datetime-local', id: 'backfill-from', step: 1, required: true });
    const to = h('input', { type: 'datetime-local', id: 'backfill-to', step: 1, required: true });
    const pace = h('input', { type: 'number', id: 'backfill-pace', min: 1, max: 1000, value: 10 });
    return h('form', {
      class: 'filters',
      onsubmit: (ev) => {
        ev.preventDefault();
        act(async () => {
          // The inputs are in the browser's time zone.
          const body = {
            from: new Date(from.value).toISOString(),
            to: new Date(to.value).toISOString(),
            maxPerSecond: Number(pace.value),
          };
          const started = await nsApi('POST', `/jobs/${enc(name)}/backfill`, body);
          mount(status);
          flash(t('backfill.started', { fires: started.fires }));
          await drawBackfills(job);
        });
      },
    },
    h('div', { class: 'field' }, h('label', { for: 'backfill-from' }, t('backfill.from')), from),
    h('div', { class: 'field' }, h('label', { for: 'backfill-to' }, t('backfill.to')), to),
    h('div', { class: 'field' }, h('label', { for: 'backfill-pace' }, t('backfill.pace')), pace),
    h('button', { type: 'submit' }, t('backfill.start')));
  }
  async function drawHistory() {
    clearTimeout(timer);
    const page = await nsApi('GET', `/jobs/${enc(name)}/executions${query({ page: historyPage, size: HISTORY_SIZE, status: historyStatus })}`);
    const statusFilter = h('select', {
      id: 'history-status',
      onchange: () => { historyStatus = statusFilter.value; historyPage = 0; drawHistory(); },
    }, h('option', { value: '' }, t('exec.all')),
    ['PENDING', 'RUNNING', 'SUCCESS', 'FAILED', 'TIMEOUT', 'CANCELLED', 'SKIPPED']
      .map((s) => h('option', { value: s, selected: s === historyStatus }, t(`status.${s}`))));
    mount(history,
      h('div', { class: 'title-row' }, h('h2', { id: 'history-title' }, t('job.history')),
        h('div', { class: 'inline' }, h('label', { for: 'history-status' }, t('job.status')), statusFilter)),
      executionTable(page.content, { showJob: false }),
      pager(page, (n) => { historyPage = n; drawHistory(); }));
    // Follow running executions until they settle.
    if (page.content.some((e) => !isFinal(e.status))) {
      timer = setTimeout(() => drawHistory().catch(() => {}), POLL_MS);
    }
  }

  async function draw() {
    const [job, next] = await Promise.all([
      nsApi('GET', `/jobs/${enc(name)}`),
      nsApi('GET', `/jobs/${enc(name)}/next-fire-times?count=10`),
    ]);
    const params = h('textarea', { id: 'trigger-params', rows: 3, placeholder: '{"date": "2026-01-01"}' });
    const actions = h('div', { class: 'actions' },
      session.can('operator') ? h('button', {
        type: 'button',
        onclick: () => act(async () => {
          let body;
          const text = params.value.trim();
          if (text) {
            try {
              body = { jobParams: JSON.parse(text) };
            } catch (e) {
              mount(status, h('p', { class: 'error', role: 'alert' }, t('job.invalidParams', { message: e.message })));
              return;
            }
          }
          const created = await nsApi('POST', `/jobs/${enc(name)}/trigger`, body);
          mount(status);
          // The overlap policy may have skipped the run: its executions say so.
          const skipped = created.every((e) => e.status === 'SKIPPED');
          flash(t(skipped ? 'job.skipped' : 'job.triggered', { n: created.length }));
          historyPage = 0;
          await drawHistory();
        }),
      }, t('action.trigger')) : null,
      session.can('operator') ? h('button', {
        type: 'button',
        class: 'secondary',
        onclick: () => act(async () => {
          await nsApi('PATCH', `/jobs/${enc(name)}/enabled?enabled=${!job.enabled}`);
          flash(t(job.enabled ? 'job.disabledNow' : 'job.enabledNow'));
          await draw();
        }),
      }, t(job.enabled ? 'action.disable' : 'action.enable')) : null,
      session.can('admin') ? h('a', { class: 'button secondary', href: `#/jobs/${enc(name)}/edit` }, t('action.edit')) : null,
      session.can('admin') ? h('button', {
        type: 'button',
        class: 'danger',
        onclick: () => act(async () => {
          if (!(await confirmDialog(t('job.confirmDelete', { name }), t('action.delete')))) return;
          await nsApi('DELETE', `/jobs/${enc(name)}`);
          flash(t('job.deleted', { name }));
          go('#/jobs');
        }),
      }, t('action.delete')) : null);
    mount(node,
      h('p', { class: 'crumbs' }, h('a', { href: '#/jobs' }, t('nav.jobs')), ' ', namespaceTag(job.namespace), ' / '),
      h('div', { class: 'title-row' },
        h('h1', {}, name, job.enabled ? null : h('span', { class: 'tag muted' }, t('jobs.paused'))),
        actions),
      session.can('operator') ? h('details', { class: 'trigger-params' },
        h('summary', {}, t('job.params')), h('label', { for: 'trigger-params', class: 'sr-only' }, t('job.params')), params) : null,
      status,
      h('div', { class: 'columns' },
        h('section', { class: 'card' }, h('h2', {}, t('job.definition')), definition(job)),
        h('section', { class: 'card' },
          h('h2', {}, t('job.nextFires', { tz: next.timezone })),
          h('ol', { class: 'fire-times' }, next.fireTimes.map((ft) => h('li', {}, time(ft, next.timezone)))))),
      history,
      backfills);
    await Promise.all([drawHistory(), drawBackfills(job)]);
  }

  await draw();
  return { node, title: name, leave: () => { clearTimeout(timer); clearTimeout(backfillTimer); } };
}
