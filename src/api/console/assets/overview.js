// Overview: instances and the compensation leader, jobs owned per instance, the last hour's
// fires and failures, the current fire delay and the executors of every service.

import { api } from './api.js';
import { h, duration } from './dom.js';
import { t } from './i18n.js';

const REFRESH_MS = 10000;

function stat(label, value, kind) {
  return h('div', { class: `stat ${kind || ''}` }, h('span', { class: 'label' }, label), h('span', { class: 'value' }, value));
}

function view(o) {
  const h1 = o.lastHour;
  const d = o.fireDelay;
  return h('div', {},
    h('h1', {}, t('overview.title')),
    h('section', { class: 'stats', 'aria-label': t('overview.title') },
      stat(t('overview.jobs'), t('overview.jobsValue', { total: o.jobs.total, enabled: o.jobs.enabled })),
      stat(t('overview.fires'), String(h1.fires)),
      stat(t('overview.executions'), String(h1.executions)),
      stat(t('overview.failures'), String(h1.failures), h1.failures > 0 ? 'bad' : 'ok'),
      stat(t('overview.delay'), d.samples === 0 ? t('overview.noDelay')
        : t('overview.delayValue', {
          latest: duration(d.latestMs), average: duration(d.averageMs), max: duration(d.maxMs), samples: d.samples,
        }))),
    h('section', { class: 'card' },
      h('h2', {}, t('overview.instances')),
      h('table', {},
        h('thead', {}, h('tr', {}, h('th', {}, t('overview.instance')), h('th', { class: 'num' }, t('overview.ownedJobs')))),
        h('tbody', {}, o.instances.map((i) => h('tr', {},
          h('td', {}, i.instance,
            i.instance === o.compensationLeader ? h('span', { class: 'tag' }, t('overview.leader')) : null,
            i.instance === o.selfInstance ? h('span', { class: 'tag muted' }, t('overview.self')) : null),
          h('td', { class: 'num' }, String(i.ownedJobs))))))),
    h('section', { class: 'card' },
      h('h2', {}, t('overview.executors')),
      o.executors.length === 0 ? h('p', { class: 'muted' }, t('none')) : h('table', {},
        h('thead', {}, h('tr', {},
          h('th', {}, t('overview.service')), h('th', { class: 'num' }, t('overview.serviceJobs')),
          h('th', {}, t('overview.serviceInstances')))),
        h('tbody', {}, o.executors.map((s) => h('tr', { class: s.instances.length ? '' : 'row-bad' },
          h('td', {}, h('a', { href: `#/jobs?serviceName=${encodeURIComponent(s.serviceName)}` }, s.serviceName),
            s.serviceGroup ? h('span', { class: 'muted' }, ` (${t('f.serviceGroup')}: ${s.serviceGroup})`) : null),
          h('td', { class: 'num' }, String(s.jobs)),
          h('td', {}, s.instances.length ? s.instances.join(', ') : h('span', { class: 'bad-text' }, t('overview.noExecutors')))))))));
}

export async function overviewPage() {
  const node = h('div', {}, view(await api('GET', '/overview')));
  const timer = setInterval(async () => {
    try {
      node.replaceChildren(view(await api('GET', '/overview')));
    } catch {
      // Keep the last view; the next tick tries again.
    }
  }, REFRESH_MS);
  return { node, title: t('overview.title'), leave: () => clearInterval(timer) };
}
