// Small helpers to build the page without a framework.

import { t, lang } from './i18n.js';

/// `h('a', {href: '#/jobs'}, 'Jobs')`: an element with attributes, properties (`on*`
/// handlers, `hidden`, `value`, …) and children (strings, nodes, arrays, null skipped).
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k in el && typeof v !== 'string') el[k] = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

/// Replaces the content of `el`.
export function mount(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

const STATUS_CLASS = {
  SUCCESS: 'ok', FAILED: 'bad', TIMEOUT: 'bad', RUNNING: 'busy', PENDING: 'busy',
  CANCELLED: 'muted', SKIPPED: 'muted', DONE: 'ok',
};

export function statusBadge(status) {
  if (!status) return h('span', { class: 'muted' }, '–');
  return h('span', { class: `badge ${STATUS_CLASS[status] || ''}` }, t(`status.${status}`));
}

export const isFinal = (status) => !['PENDING', 'RUNNING'].includes(status);

/// A local date and time, e.g. `2026-11-30 18:00:05`, with the instant as a tooltip.
export function time(iso, timeZone) {
  if (!iso) return h('span', { class: 'muted' }, '–');
  const d = new Date(iso);
  const opts = {
    year: 'numeric', month: '2-digit', day: '2-digit',
    hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23',
  };
  if (timeZone) opts.timeZone = timeZone;
  let text;
  try {
    text = new Intl.DateTimeFormat(lang() === 'zh' ? 'zh-CN' : 'en-CA', opts).format(d).replace(',', '');
  } catch {
    text = d.toISOString();
  }
  return h('time', { datetime: iso, title: iso }, text);
}

export function duration(ms) {
  if (ms === null || ms === undefined) return '–';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
}

let flashTimer;
/// A short message in the live region (read out by screen readers).
export function flash(text, kind = 'ok') {
  const el = document.getElementById('flash');
  mount(el, h('p', { class: `flash ${kind}` }, text));
  clearTimeout(flashTimer);
  flashTimer = setTimeout(() => el.replaceChildren(), 6000);
}

/// The message of a failed call, for an error paragraph.
export function errorBox(err) {
  return h('p', { class: 'error', role: 'alert' }, err.message || String(err));
}

/// Asks before something that cannot be undone; resolves true when confirmed.
export function confirmDialog(question, confirmLabel) {
  return new Promise((resolve) => {
    const dialog = h('dialog', { class: 'confirm', 'aria-label': question },
      h('p', {}, question),
      h('form', { method: 'dialog', class: 'actions' },
        h('button', { type: 'submit', value: 'no', class: 'secondary' }, t('dialog.keep')),
        h('button', { type: 'submit', value: 'yes', class: 'danger' }, confirmLabel)));
    dialog.addEventListener('close', () => {
      resolve(dialog.returnValue === 'yes');
      dialog.remove();
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}

/// Previous / next page buttons for a Spring-style page answer.
export function pager(page, go) {
  if (!page || page.totalPages <= 1) return null;
  return h('nav', { class: 'pager', 'aria-label': t('pager.label') },
    h('button', { type: 'button', class: 'secondary', disabled: page.number <= 0, onclick: () => go(page.number - 1) }, t('pager.prev')),
    h('span', {}, t('pager.position', { page: page.number + 1, pages: page.totalPages, total: page.totalElements })),
    h('button', { type: 'button', class: 'secondary', disabled: page.number + 1 >= page.totalPages, onclick: () => go(page.number + 1) }, t('pager.next')));
}

/// The namespace a page shows, beside its title.
export function namespaceTag(ns) {
  return h('span', { class: 'tag ns-tag' }, t('ns.tag', { ns }));
}

/// The page of job `name` of namespace `ns`, opened in its namespace.
export function jobHref(name, ns) {
  return `#/jobs/${encodeURIComponent(name)}?ns=${ns}`;
}

/// A job as views of every namespace show it: `ns/name`, the name alone in `default`.
export function jobLabel(name, ns) {
  return ns === 'default' ? name : `${ns}/${name}`;
}

/// A labelled form field with a place for its error message beside it.
export function field(name, label, control, hint) {
  control.id = `f-${name}`;
  control.name = name;
  const err = h('p', { class: 'field-error', id: `err-${name}`, 'data-field': name });
  control.setAttribute('aria-describedby', `err-${name}`);
  return h('div', { class: 'field' },
    h('label', { for: control.id }, label),
    control,
    hint ? h('p', { class: 'hint' }, hint) : null,
    err);
}
