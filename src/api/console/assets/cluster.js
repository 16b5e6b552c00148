// Cluster: the members, how the jobs spread over them, and which instance owns a given job.

import { api } from './api.js';
import { h, mount, jobHref, jobLabel } from './dom.js';
import { t } from './i18n.js';

const SHOWN = 100;

/// A bar `share` (0..1) of the full width. Set through the CSSOM: the Content-Security-Policy
/// refuses inline style attributes.
function bar(share) {
  const el = h('span', { class: 'bar' });
  el.style.width = `${Math.round(share * 100)}%`;
  return el;
}

export async function clusterPage(params) {
  const c = await api('GET', '/cluster');
  const spread = new Map(c.instances.map((i) => [i, 0]));
  for (const j of c.jobs) if (j.owner) spread.set(j.owner, (spread.get(j.owner) || 0) + 1);
  const most = Math.max(1, ...spread.values());

  const find = h('input', { type: 'search', id: 'find-job', placeholder: t('cluster.findPlaceholder'), value: params.get('job') || '' });
  const table = h('div', {});
  function drawJobs() {
    const q = find.value.trim().toLowerCase();
    const matches = c.jobs.filter((j) => !q || jobLabel(j.name, j.namespace).toLowerCase().includes(q));
    mount(table,
      h('table', {},
        h('thead', {}, h('tr', {}, h('th', {}, t('jobs.name')), h('th', {}, t('cluster.owner')))),
        h('tbody', {}, matches.slice(0, SHOWN).map((j) => h('tr', { class: j.enabled ? '' : 'row-muted' },
          h('td', {}, h('a', { href: jobHref(j.name, j.namespace) }, jobLabel(j.name, j.namespace))),
          h('td', {}, j.owner || h('span', { class: 'muted' }, t('cluster.nobody'))))))),
      h('p', { class: 'muted' }, t('cluster.shown', { shown: Math.min(SHOWN, matches.length), total: matches.length })));
  }
  find.addEventListener('input', drawJobs);
  drawJobs();

  const node = h('div', {},
    h('h1', {}, t('cluster.title')),
    h('p', { class: 'muted' }, t('cluster.strategy', { strategy: c.ownership })),
    h('div', { class: 'columns' },
      h('section', { class: 'card' },
        h('h2', {}, t('cluster.members')),
        h('table', {},
          h('thead', {}, h('tr', {}, h('th', {}, t('overview.instance')), h('th', { class: 'num' }, t('overview.ownedJobs')))),
          h('tbody', {}, c.instances.map((i) => h('tr', {},
            h('td', {}, i,
              i === c.compensationLeader ? h('span', { class: 'tag' }, t('overview.leader')) : null,
              i === c.selfInstance ? h('span', { class: 'tag muted' }, t('overview.self')) : null),
            h('td', { class: 'num' }, String(spread.get(i) || 0))))))),
      h('section', { class: 'card' },
        h('h2', {}, t('cluster.spread')),
        h('ul', { class: 'bars' }, [...spread.entries()].map(([i, n]) => h('li', {},
          h('span', { class: 'bar-label' }, i),
          bar(n / most),
          h('span', { class: 'bar-value' }, String(n))))))),
    h('section', { class: 'card' },
      h('h2', {}, t('cluster.jobs')),
      h('div', { class: 'field' }, h('label', { for: 'find-job' }, t('cluster.find')), find),
      table));
  return { node, title: t('cluster.title') };
}
