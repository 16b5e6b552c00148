// Executors: every executor service the jobs name, its live instances, the calls in flight to
// each across the cluster, and the last call this instance made to it. Refreshed every few
// seconds while shown.

import { api, enc } from './api.js';
import { h, mount, time, statusBadge, jobHref, jobLabel } from './dom.js';
import { t } from './i18n.js';

const REFRESH_MS = 3000;

function lastCall(c) {
  if (!c) return h('span', { class: 'muted' }, '–');
  const outcome = ['ACCEPTED', 'NO_ANSWER', 'UNREACHABLE'].includes(c.outcome)
    ? h('span', { class: `badge ${c.outcome === 'ACCEPTED' ? 'busy' : 'bad'}` }, t(`executors.${c.outcome}`))
    : statusBadge(c.outcome);
  return h('span', {},
    h('a', { href: `#/executions/${enc(c.traceId)}?ns=${c.namespace}` }, outcome), ' ',
    h('a', { href: jobHref(c.jobName, c.namespace) }, jobLabel(c.jobName, c.namespace)), ' ', time(c.at));
}

function service(s) {
  const title = s.serviceGroup ? `${s.serviceName} (${s.serviceGroup})` : s.serviceName;
  return h('section', { class: 'card' },
    h('h2', {}, title),
    h('p', { class: 'muted' }, t('executors.jobs', { n: s.jobs })),
    s.instances.length === 0
      ? h('p', { class: 'error' }, t('executors.noInstance'))
      : h('div', { class: 'table-wrap' }, h('table', { class: 'executors' },
        h('thead', {}, h('tr', {},
          h('th', {}, t('executors.address')), h('th', {}, t('executors.prefix')),
          h('th', { class: 'num' }, t('executors.inFlight')), h('th', {}, t('executors.lastCall')))),
        h('tbody', {}, s.instances.map((i) => h('tr', {},
          h('td', { class: 'mono' }, i.address),
          h('td', {}, i.pathPrefix || h('span', { class: 'muted' }, '–')),
          h('td', { class: 'num' }, String(i.callsInFlight)),
          h('td', {}, lastCall(i.lastCall))))))));
}

export async function executorsPage() {
  const node = h('div', {});
  let timer = null;
  let shown = true;
  async function draw() {
    const view = await api('GET', '/executors');
    if (!shown) return;
    mount(node,
      h('h1', {}, t('executors.title')),
      h('p', { class: 'muted' }, t('executors.help', { self: view.selfInstance })),
      view.services.length === 0 ? h('p', { class: 'muted' }, t('executors.none')) : view.services.map(service));
    timer = setTimeout(() => draw().catch(() => {}), REFRESH_MS);
  }
  await draw();
  return { node, title: t('executors.title'), leave: () => { shown = false; clearTimeout(timer); } };
}
