// Tokens: the API tokens an admin creates, rotates and revokes without a redeploy. The secret of
// a new or rotated token is shown once, on this page, and never again: the server keeps only
// its digest. Tokens of the configuration (auth.tokens) are not listed.

import { api, enc } from './api.js';
import { h, mount, time, field, flash, errorBox, confirmDialog } from './dom.js';
import { t } from './i18n.js';

const ROLES = ['viewer', 'operator', 'admin'];

/// `all` for every namespace (null), else the comma-separated names.
function namespacesOf(text) {
  const s = text.trim();
  if (s.toLowerCase() === 'all') return null;
  return s.split(',').map((x) => x.trim()).filter(Boolean);
}

export async function tokensPage() {
  const secret = h('div', {});
  const status = h('div', {});
  const list = h('section', { class: 'card', 'aria-labelledby': 'tokens-title' });

  async function act(work) {
    mount(status);
    try {
      await work();
    } catch (err) {
      mount(status, errorBox(err));
    }
  }

  /// The secret of a token just created or rotated, with what to do with it. Leaving the page
  /// (or the next create or rotate) takes it away for good.
  function showSecret(made, headingKey) {
    const value = h('code', { id: 'token-secret', class: 'secret-value', tabindex: 0 }, made.token);
    const copy = () => {
      const selectIt = () => {
        window.getSelection().selectAllChildren(value);
        flash(t('tokens.copyByHand'));
      };
      if (!navigator.clipboard) return selectIt();
      return navigator.clipboard.writeText(made.token).then(() => flash(t('tokens.copied')), selectIt);
    };
    mount(secret, h('section', { class: 'card secret', 'aria-labelledby': 'secret-title' },
      h('h2', { id: 'secret-title' }, t(headingKey, { name: made.name })),
      h('p', { class: 'secret-warning' }, t('tokens.secretOnce')),
      h('div', { class: 'secret-row' }, value,
        h('button', { type: 'button', class: 'secondary', onclick: copy }, t('tokens.copy')))));
    value.focus();
  }

  async function drawList() {
    const tokens = await api('GET', '/tokens');
    const rotate = (tok) => h('button', {
      type: 'button',
      class: 'secondary',
      onclick: () => act(async () => {
        if (!(await confirmDialog(t('tokens.confirmRotate', { name: tok.name }), t('tokens.rotate')))) return;
        const made = await api('POST', `/tokens/${enc(tok.name)}/rotate`);
        showSecret(made, 'tokens.rotated');
        await drawList();
      }),
    }, t('tokens.rotate'));
    const revoke = (tok) => h('button', {
      type: 'button',
      class: 'danger',
      onclick: () => act(async () => {
        if (!(await confirmDialog(t('tokens.confirmRevoke', { name: tok.name }), t('tokens.revoke')))) return;
        await api('DELETE', `/tokens/${enc(tok.name)}`);
        flash(t('tokens.revoked', { name: tok.name }));
        await drawList();
      }),
    }, t('tokens.revoke'));
    mount(list,
      h('h2', { id: 'tokens-title' }, t('tokens.list')),
      tokens.length === 0 ? h('p', { class: 'muted' }, t('tokens.none')) : h('div', { class: 'table-wrap' }, h('table', { class: 'tokens' },
        h('thead', {}, h('tr', {},
          h('th', {}, t('tokens.name')), h('th', {}, t('tokens.role')), h('th', {}, t('tokens.namespaces')),
          h('th', {}, t('tokens.createdAt')), h('th', {}, t('tokens.createdBy')), h('th', {}, t('tokens.rotatedAt')),
          h('th', {}, ''))),
        h('tbody', {}, tokens.map((tok) => h('tr', {},
          h('td', {}, tok.name),
          h('td', {}, t(`role.${tok.role}`)),
          h('td', {}, tok.namespaces === null ? h('span', { class: 'muted' }, t('tokens.all')) : tok.namespaces.join(', ')),
          h('td', {}, time(tok.createdAt)),
          h('td', {}, tok.createdBy || '–'),
          h('td', {}, time(tok.rotatedAt)),
          h('td', {}, h('div', { class: 'actions' }, rotate(tok), revoke(tok)))))))),
      h('p', { class: 'hint' }, t('tokens.configured')));
  }

  const c = {
    name: h('input', { type: 'text', required: true, maxlength: 100, autocomplete: 'off', pattern: '[A-Za-z0-9._:\\-]{1,100}' }),
    role: h('select', {}, ROLES.map((r) => h('option', { value: r }, t(`role.${r}`)))),
    namespaces: h('input', { type: 'text', required: true, autocomplete: 'off', placeholder: 'team-a, team-b' }),
  };
  const general = h('div', {});
  const form = h('form', {
    class: 'card token-form',
    novalidate: true,
    onsubmit: (ev) => {
      ev.preventDefault();
      create();
    },
  },
  h('h2', {}, t('tokens.create')),
  h('div', { class: 'row' },
    field('name', t('tokens.name'), c.name),
    field('role', t('tokens.role'), c.role),
    field('namespaces', t('tokens.namespaces'), c.namespaces, t('tokens.namespacesHint'))),
  general,
  h('button', { type: 'submit' }, t('tokens.createButton')));

  function setError(name, message) {
    const el = form.querySelector(`[data-field="${name}"]`);
    if (!el) return false;
    el.textContent = message;
    form.querySelector(`#f-${name}`).setAttribute('aria-invalid', message ? 'true' : 'false');
    return true;
  }

  async function create() {
    for (const k of Object.keys(c)) setError(k, '');
    mount(general);
    const body = { name: c.name.value.trim(), role: c.role.value, namespaces: namespacesOf(c.namespaces.value) };
    if (Array.isArray(body.namespaces) && body.namespaces.length === 0) {
      setError('namespaces', t('tokens.namespacesMissing'));
      c.namespaces.focus();
      return;
    }
    try {
      const made = await api('POST', '/tokens', body);
      form.reset();
      flash(t('tokens.createdFlash', { name: made.name }));
      showSecret(made, 'tokens.created');
      await drawList();
    } catch (err) {
      // `namespaces[1]` is shown beside `namespaces`.
      const placed = {};
      for (const [k, m] of Object.entries(err.fields)) {
        const base = k.split('[')[0];
        placed[base] = placed[base] ? `${placed[base]}; ${m}` : m;
      }
      const unplaced = Object.entries(placed).filter(([k, m]) => !setError(k, m));
      if (Object.keys(placed).length === 0 || unplaced.length) mount(general, errorBox(err));
      const first = form.querySelector('[aria-invalid="true"]');
      if (first) first.focus();
    }
  }

  await drawList();
  const node = h('div', {},
    h('h1', {}, t('tokens.title')),
    secret,
    status,
    form,
    list);
  return { node, title: t('tokens.title') };
}
