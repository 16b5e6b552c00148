// Audit: who created, changed, deleted, enabled, disabled or triggered which job, retried or
// cancelled which execution, started or cancelled which backfill, managed which token, and
// what each Nacos jobs document applied. Newest first, filtered and paged.

import { api, query, enc } from './api.js';
import { h, time, errorBox, pager } from './dom.js';
import { t } from './i18n.js';
import { instant, localValue } from './executions.js';

const ACTIONS = [
  'JOB_CREATED', 'JOB_UPDATED', 'JOB_DELETED', 'JOB_ENABLED', 'JOB_DISABLED', 'JOB_TRIGGERED',
  'EXECUTION_RETRIED', 'EXECUTION_CANCELLED', 'BACKFILL_STARTED', 'BACKFILL_CANCELLED',
  'TOKEN_CREATED', 'TOKEN_ROTATED', 'TOKEN_REVOKED', 'NACOS_DOCUMENT_APPLIED',
];
const PAGE_SIZE = 20;
/// Longer details fold away behind their first characters.
const SHORT_DETAIL = 100;

/// The target, as a link to the job or execution it names (in its namespace) where there is one.
function target(e) {
  if (e.namespace && /^(JOB_|BACKFILL_)/.test(e.action) && e.action !== 'JOB_DELETED') {
    return h('a', { href: `#/jobs/${enc(e.target)}?ns=${enc(e.namespace)}` }, e.target);
  }
  if (e.namespace && e.action.startsWith('EXECUTION_')) {
    return h('a', { href: `#/executions/${enc(e.target)}?ns=${enc(e.namespace)}`, class: 'mono' }, e.target);
  }
  return e.target;
}

function detail(value) {
  if (value === null || value === undefined) return h('span', { class: 'muted' }, '–');
  const text = JSON.stringify(value);
  if (text.length <= SHORT_DETAIL) return h('code', { class: 'detail' }, text);
  return h('details', {},
    h('summary', {}, h('code', {}, `${text.slice(0, SHORT_DETAIL)}…`)),
    h('code', { class: 'detail' }, text));
}

export async function auditPage(params) {
  const filter = {
    actor: params.get('actor') || '',
    action: params.get('action') || '',
    namespace: params.get('namespace') || '',
    target: params.get('target') || '',
    from: params.get('from') || '',
    to: params.get('to') || '',
  };
  const pageNo = Number(params.get('page') || 0);
  const link = (over) => `#/audit${query({ ...filter, page: 0, ...over })}`;
  const actor = h('input', { type: 'search', id: 'q-actor', value: filter.actor });
  const action = h('select', { id: 'q-action' }, h('option', { value: '' }, t('exec.all')),
    ACTIONS.map((a) => h('option', { value: a, selected: a === filter.action }, a)));
  const ns = h('input', { type: 'search', id: 'q-namespace', value: filter.namespace, size: 12 });
  const tgt = h('input', { type: 'search', id: 'q-target', value: filter.target });
  const from = h('input', { type: 'datetime-local', id: 'q-from', value: localValue(filter.from) });
  const to = h('input', { type: 'datetime-local', id: 'q-to', value: localValue(filter.to) });
  const form = h('form', {
    class: 'filters',
    role: 'search',
    onsubmit: (ev) => {
      ev.preventDefault();
      location.hash = link({
        actor: actor.value.trim(), action: action.value, namespace: ns.value.trim(), target: tgt.value.trim(),
        from: instant(from.value), to: instant(to.value),
      });
    },
  },
  h('div', { class: 'field' }, h('label', { for: 'q-actor' }, t('audit.actor')), actor),
  h('div', { class: 'field' }, h('label', { for: 'q-action' }, t('audit.action')), action),
  h('div', { class: 'field' }, h('label', { for: 'q-namespace' }, t('audit.namespace')), ns),
  h('div', { class: 'field' }, h('label', { for: 'q-target' }, t('audit.target')), tgt),
  h('div', { class: 'field' }, h('label', { for: 'q-from' }, t('exec.from')), from),
  h('div', { class: 'field' }, h('label', { for: 'q-to' }, t('exec.to')), to),
  h('button', { type: 'submit' }, t('action.search')));

  let results;
  try {
    const page = await api('GET', `/audit${query({ ...filter, page: pageNo, size: PAGE_SIZE })}`);
    results = page.content.length === 0 ? h('p', { class: 'muted' }, t('audit.empty')) : [
      h('div', { class: 'table-wrap' }, h('table', { class: 'audit' },
        h('thead', {}, h('tr', {},
          h('th', {}, t('audit.at')), h('th', {}, t('audit.actor')), h('th', {}, t('audit.action')),
          h('th', {}, t('audit.namespace')), h('th', {}, t('audit.target')), h('th', {}, t('audit.detail')))),
        h('tbody', {}, page.content.map((e) => h('tr', {},
          h('td', {}, time(e.at)),
          h('td', {}, e.actor),
          h('td', {}, h('span', { class: 'badge' }, e.action)),
          h('td', {}, e.namespace || h('span', { class: 'muted' }, '–')),
          h('td', {}, target(e)),
          h('td', {}, detail(e.detail))))))),
      pager(page, (n) => { location.hash = link({ page: n }); })];
  } catch (err) {
    if (err.status === 401) throw err;
    results = errorBox(err);
  }
  return {
    node: h('div', {}, h('h1', {}, t('audit.title')), form, results),
    title: t('audit.title'),
  };
}
