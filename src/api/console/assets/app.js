// The console's shell: sign-in, navigation, the namespace selector, the language switch and
// the hash router (`#/jobs/order-sync` and so on, so every page has a link and Back works; any
// address may add `?ns=team-a` to open it in that namespace).

import { api, token, whenUnauthorized, namespace, isNamespace, NAMESPACE_PATTERN } from './api.js';
import { h, mount, errorBox, flash } from './dom.js';
import { t, lang, setLang } from './i18n.js';
import { overviewPage } from './overview.js';
import { jobsPage, jobPage } from './jobs.js';
import { jobFormPage } from './job-form.js';
import { executionsPage, executionPage } from './executions.js';
import { clusterPage } from './cluster.js';
import { executorsPage } from './executors.js';
import { session } from './session.js';


const NAV = [
  ['overview', 'nav.overview'],
  ['jobs', 'nav.jobs'],
  ['executions', 'nav.executions'],
  ['executors', 'nav.executors'],
  ['cluster', 'nav.cluster'],
  ['tokens', 'nav.tokens'],
  ['audit', 'nav.audit'],
];

/// Pages about every namespace: the API answers 403 to a token restricted to some.
const EVERY_NAMESPACE = ['overview', 'executors', 'cluster', 'tokens', 'audit'];
/// Pages for admins only.
const ADMIN_ONLY = ['tokens', 'audit'];

function shown(section) {
  if (session.restricted() && EVERY_NAMESPACE.includes(section)) return false;
  return !ADMIN_ONLY.includes(section) || session.can('admin');
}

/// The first page: the overview, or the jobs for a token that may not see the overview.
const home = () => (session.restricted() ? 'jobs' : 'overview');

const main = () => document.getElementById('main');

/// Stops the current page's timers when another page is shown.
let leaveCurrent = () => {};

function routeOf(hash) {
  const [path, q] = hash.replace(/^#\/?/, '').split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  return { parts, params: new URLSearchParams(q || '') };
}

function pageFor({ parts, params }) {
  const [section, id, sub] = parts;
  switch (section || home()) {
    case 'overview': return () => overviewPage();
    case 'jobs':
      if (id === undefined) return () => jobsPage(params);
      if (id === '+new') return () => jobFormPage(null);
      if (sub === 'edit') return () => jobFormPage(id);
      return () => jobPage(id, params);
    case 'executions':
      return id === undefined ? () => executionsPage(params) : () => executionPage(id);
    case 'executors': return () => executorsPage();
    case 'cluster': return () => clusterPage(params);
    // Loaded when first shown: only unrestricted admins see these, so the others never fetch them.
    case 'tokens': return async () => (await import('./tokens.js')).tokensPage();
    case 'audit': return async () => (await import('./audit.js')).auditPage(params);
    default: return null;
  }
}

/// A token restricted to some namespaces works in one of them: the one chosen before if it
/// may, else its first.
function settleNamespace() {
  if (session.restricted() && !session.mayActIn(namespace.get()) && session.me.namespaces.length) {
    namespace.set(session.me.namespaces[0]);
  }
}

/// Shows `ns` from now on. The page of a job or an execution of the old namespace would be a
/// 404 there: those go to their list instead.
function switchNamespace(ns) {
  if (ns === namespace.get()) return;
  namespace.set(ns);
  flash(t('ns.switched', { ns }));
  const section = routeOf(location.hash).parts[0];
  const hash = ['jobs', 'executions'].includes(section) ? `#/${section}` : location.hash;
  if (location.hash === hash) render();
  else location.hash = hash;
}

/// The namespace selector: the token's namespaces when it is restricted, else any name (those
/// chosen before in this browser session are offered).
function namespacePicker() {
  const current = namespace.get();
  const label = h('label', { for: 'ns-pick' }, t('ns.label'));
  if (session.restricted()) {
    const select = h('select', { id: 'ns-pick', onchange: () => switchNamespace(select.value) },
      session.me.namespaces.map((n) => h('option', { value: n, selected: n === current }, n)));
    return h('div', { class: 'ns' }, label, select);
  }
  const input = h('input', {
    type: 'text', id: 'ns-pick', value: current, list: 'ns-seen', required: true, maxlength: 40,
    pattern: NAMESPACE_PATTERN, size: 12, autocomplete: 'off', spellcheck: 'false', title: t('ns.invalid'),
  });
  const pick = () => {
    const value = input.value.trim();
    if (!isNamespace(value)) {
      input.setAttribute('aria-invalid', 'true');
      flash(t('ns.invalid'), 'bad');
      return;
    }
    input.removeAttribute('aria-invalid');
    switchNamespace(value);
  };
  input.addEventListener('change', pick);
  const seen = [...new Set(['default', ...namespace.seen()])];
  return h('form', { class: 'ns', novalidate: true, onsubmit: (ev) => { ev.preventDefault(); pick(); } },
    label, input, h('datalist', { id: 'ns-seen' }, seen.map((n) => h('option', { value: n }))));
}

function renderChrome() {
  document.getElementById('skip').textContent = t('skip');
  const section = routeOf(location.hash).parts[0] || home();
  mount(document.getElementById('nav'), session.me
    ? NAV.filter(([id]) => shown(id))
      .map(([id, key]) => h('a', { href: `#/${id}`, 'aria-current': section === id ? 'page' : null }, t(key)))
    : null);
  mount(document.getElementById('ns'), session.me ? namespacePicker() : null);
  const langButton = document.getElementById('lang');
  langButton.textContent = t('lang.switch');
  langButton.setAttribute('aria-label', t('lang.switchLabel'));
  const me = session.me;
  document.getElementById('who').textContent = !me ? ''
    : me.authEnabled ? t('who', { name: me.name, role: t(`role.${me.role}`) }) : t('who.open');
  const signOut = document.getElementById('signout');
  signOut.textContent = t('signout');
  signOut.hidden = !(me && me.authEnabled);
}

/// Counts renders: a page that finishes loading after another one was asked for is dropped.
let rendering = 0;

async function render() {
  const mine = ++rendering;
  leaveCurrent();
  leaveCurrent = () => {};
  let route = routeOf(location.hash);
  // `?ns=` in the address (a shared link, the audit trail's links) picks the namespace.
  const wanted = route.params.get('ns');
  if (session.me && wanted && isNamespace(wanted) && session.mayActIn(wanted)) namespace.set(wanted);
  settleNamespace();
  // A page this token may not see (the address of the one signed in before, say): the first page.
  const section = route.parts[0];
  if (session.me && NAV.some(([id]) => id === section) && !shown(section)) {
    history.replaceState(null, '', `#/${home()}`);
    route = routeOf(location.hash);
  }
  renderChrome();
  if (!session.me) return signIn();
  const page = pageFor(route);
  const el = main();
  if (!page) {
    mount(el, h('h1', {}, t('error.title')), h('p', {}, t('error.notFound')));
    return;
  }
  mount(el, h('p', { class: 'muted' }, t('loading')));
  try {
    const view = await page();
    if (mine !== rendering) {
      // The user (or a link) moved on while this page loaded.
      if (view && view.leave) view.leave();
      return;
    }
    if (view) {
      mount(el, view.node);
      leaveCurrent = view.leave || (() => {});
      document.title = `${view.title} · JobFlow`;
    }
  } catch (err) {
    if (err.status !== 401 && mine === rendering) mount(el, h('h1', {}, t('error.title')), errorBox(err));
  }
}

function signIn(message) {
  const input = h('input', { type: 'password', id: 'token', autocomplete: 'current-password', required: true });
  const status = h('div', {}, message ? h('p', { class: 'error', role: 'alert' }, message) : null);
  const form = h('form', {
    class: 'card signin',
    onsubmit: async (ev) => {
      ev.preventDefault();
      token.set(input.value.trim());
      try {
        session.me = await api('GET', '/auth/me');
        render();
      } catch (err) {
        token.clear();
        mount(status, h('p', { class: 'error', role: 'alert' }, err.status === 401 ? t('signin.rejected') : err.message));
        input.focus();
      }
    },
  },
  h('h1', {}, t('signin.title')),
  h('p', { class: 'muted' }, t('signin.help')),
  h('div', { class: 'field' }, h('label', { for: 'token' }, t('signin.token')), input),
  status,
  h('button', { type: 'submit' }, t('signin.submit')));
  document.title = `${t('signin.title')} · JobFlow`;
  mount(main(), form);
  input.focus();
}

async function start() {
  setLang(lang());
  document.getElementById('lang').addEventListener('click', () => {
    setLang(lang() === 'zh' ? 'en' : 'zh');
    render();
  });
  document.getElementById('signout').addEventListener('click', () => {
    token.clear();
    namespace.clear();
    session.me = null;
    render();
  });
  // A 401 while signed in: the token was revoked or the server restarted with other tokens.
  // (A 401 before sign-in is answered by the sign-in form itself.)
  whenUnauthorized(() => {
    if (!session.me) return;
    token.clear();
    session.me = null;
    leaveCurrent();
    leaveCurrent = () => {};
    renderChrome();
    signIn(t('signin.expired'));
  });
  window.addEventListener('hashchange', () => {
    render();
    main().focus({ preventScroll: true });
  });
  try {
    session.me = await api('GET', '/auth/me');
  } catch (err) {
    if (err.status !== 401) {
      mount(main(), h('h1', {}, t('error.title')), errorBox(err));
      return;
    }
  }
  render();
}

start();
