// The create / edit form: a live preview of the schedule (next fire times from the API as you
// type), only the fields the chosen schedule type takes, and the API's validation messages
// beside the fields they name.

import { api, nsApi, query, enc, namespace } from './api.js';
import { h, mount, time, field, flash, errorBox, namespaceTag } from './dom.js';
import { t } from './i18n.js';
import { cronWords } from './cron-words.js';

const PREVIEW_DELAY_MS = 300;

/// The fields each schedule type takes (the others are hidden and not sent).
const SCHEDULE_FIELDS = {
  CRON: ['cron'],
  FIXED_RATE: ['intervalSeconds', 'startAt'],
  FIXED_DELAY: ['intervalSeconds', 'startAt'],
  ONCE: ['startAt'],
  NONE: [],
};

/// A comma-separated list as an array (empty entries dropped).
const list = (text) => text.split(',').map((x) => x.trim()).filter(Boolean);

function select(options, value) {
  return h('select', {}, options.map((o) => h('option', { value: o, selected: o === value }, o)));
}

function jsonText(v) {
  return v === null || v === undefined ? '' : JSON.stringify(v, null, 2);
}

export async function jobFormPage(name) {
  const job = name ? await nsApi('GET', `/jobs/${enc(name)}`) : null;
  const v = job || {
    name: '', serviceName: '', serviceGroup: null, handler: '', scheduleType: 'CRON', cron: '0 0 * * * ?',
    intervalSeconds: null, startAt: null, timezone: '', enabled: true,
    shardCount: 1, shardStrategy: 'MOD_HASH', shardParams: null, jobParams: null,
    timeoutSeconds: 300, maxRetry: 3, misfirePolicy: 'FIRE_ONCE_NOW', description: '',
    routeStrategy: 'ROUND_ROBIN', overlapPolicy: 'ALLOW', childJobs: [], alertChannels: [], calendar: null,
  };
  const c = {
    name: h('input', { type: 'text', value: v.name, required: true, maxlength: 100, readOnly: !!job }),
    serviceName: h('input', { type: 'text', value: v.serviceName, required: true }),
    serviceGroup: h('input', { type: 'text', value: v.serviceGroup || '', placeholder: t('f.serviceGroupDefault'), maxlength: 128 }),
    handler: h('input', { type: 'text', value: v.handler, required: true }),
    scheduleType: select(Object.keys(SCHEDULE_FIELDS), v.scheduleType || 'CRON'),
    cron: h('input', { type: 'text', value: v.cron || '', required: true, class: 'mono', autocomplete: 'off' }),
    intervalSeconds: h('input', { type: 'number', value: v.intervalSeconds ? String(v.intervalSeconds) : '', min: 1, max: 31622400 }),
    startAt: h('input', { type: 'text', value: v.startAt || '', class: 'mono', placeholder: '2026-12-24T18:00:00+08:00', autocomplete: 'off' }),
    timezone: h('input', { type: 'text', value: v.timezone, placeholder: 'UTC' }),
    calendar: h('input', { type: 'text', value: v.calendar || '', placeholder: t('f.calendarNone'), maxlength: 64 }),
    enabled: h('input', { type: 'checkbox', checked: v.enabled }),
    shardCount: h('input', { type: 'number', value: String(v.shardCount), min: 1, max: 10000 }),
    shardStrategy: select(['MOD_HASH', 'RANGE', 'CUSTOM'], v.shardStrategy),
    shardParams: h('textarea', { rows: 2, class: 'mono' }, jsonText(v.shardParams)),
    jobParams: h('textarea', { rows: 3, class: 'mono' }, jsonText(v.jobParams)),
    timeoutSeconds: h('input', { type: 'number', value: String(v.timeoutSeconds), min: 1, max: 86400 }),
    maxRetry: h('input', { type: 'number', value: String(v.maxRetry), min: 0, max: 100 }),
    misfirePolicy: select(['FIRE_ONCE_NOW', 'DO_NOTHING'], v.misfirePolicy),
    routeStrategy: select(['ROUND_ROBIN', 'FIRST', 'RANDOM', 'CONSISTENT_HASH', 'LEAST_BUSY', 'BROADCAST'], v.routeStrategy || 'ROUND_ROBIN'),
    overlapPolicy: select(['ALLOW', 'SKIP', 'COVER'], v.overlapPolicy || 'ALLOW'),
    childJobs: h('input', { type: 'text', value: (v.childJobs || []).join(', ') }),
    alertChannels: h('input', { type: 'text', value: (v.alertChannels || []).join(', ') }),
    description: h('textarea', { rows: 2 }, v.description || ''),
  };

  const preview = h('div', { class: 'preview', 'aria-live': 'polite' });
  let previewTimer;
  let previewSeq = 0;
  const previewed = ['cron', 'intervalSeconds', 'startAt', 'timezone', 'calendar'];
  /// The schedule type's own fields as given (empty ones left out).
  function scheduleFields() {
    const type = c.scheduleType.value;
    const fields = { scheduleType: type };
    for (const k of SCHEDULE_FIELDS[type]) {
      const value = c[k].value.trim();
      if (value) fields[k] = k === 'intervalSeconds' ? Number(value) : value;
    }
    return fields;
  }
  async function updatePreview() {
    const seq = ++previewSeq;
    const fields = scheduleFields();
    const type = fields.scheduleType;
    if (type === 'NONE' || SCHEDULE_FIELDS[type].some((k) => k !== 'startAt' && !fields[k])) {
      return mount(preview, type === 'NONE' ? h('p', { class: 'hint' }, t('schedule.none')) : null);
    }
    try {
      const next = await api('GET', `/cron/next-fire-times${query({ ...fields, timezone: c.timezone.value.trim(), calendar: c.calendar.value.trim(), count: 5 })}`);
      if (seq !== previewSeq) return undefined;
      for (const k of previewed) setError(k, '');
      const words = type === 'CRON' ? cronWords(fields.cron)
        : type === 'FIXED_DELAY' ? t('schedule.fixedDelayThen', { seconds: fields.intervalSeconds }) : null;
      return mount(preview,
        h('p', { class: 'hint' }, t('form.preview'), words ? ` (${words})` : '', ':'),
        next.fireTimes.length
          ? h('ol', { class: 'fire-times' }, next.fireTimes.map((ft) => h('li', {}, time(ft, next.timezone))))
          : h('p', { class: 'hint' }, t('schedule.noMore')));
    } catch (err) {
      if (seq !== previewSeq) return undefined;
      mount(preview);
      if (previewed.some((k) => err.fields[k])) {
        for (const k of previewed) setError(k, err.fields[k] || '');
      }
      return undefined;
    }
  }
  const schedulePreview = () => {
    clearTimeout(previewTimer);
    previewTimer = setTimeout(updatePreview, PREVIEW_DELAY_MS);
  };
  for (const k of ['cron', 'intervalSeconds', 'startAt', 'timezone', 'calendar']) {
    c[k].addEventListener('input', schedulePreview);
  }

  const general = h('div', {});
  const form = h('form', { class: 'card job-form', novalidate: true, onsubmit: (ev) => { ev.preventDefault(); save(); } },
    field('name', t('f.name'), c.name),
    field('serviceName', t('f.serviceName'), c.serviceName),
    field('serviceGroup', t('f.serviceGroup'), c.serviceGroup),
    field('handler', t('f.handler'), c.handler),
    field('scheduleType', t('f.scheduleType'), c.scheduleType),
    field('cron', t('f.cron'), c.cron, t('form.previewHint')),
    h('div', { class: 'row' },
      field('intervalSeconds', t('f.intervalSeconds'), c.intervalSeconds),
      field('startAt', t('f.startAt'), c.startAt, t('form.startAtHint'))),
    preview,
    field('timezone', t('f.timezone'), c.timezone),
    field('calendar', t('f.calendar'), c.calendar),
    h('div', { class: 'field checkbox' }, c.enabled, h('label', { for: 'f-enabled' }, t('f.enabled')),
      h('p', { class: 'field-error', id: 'err-enabled', 'data-field': 'enabled' })),
    h('div', { class: 'row' },
      field('shardCount', t('f.shardCount'), c.shardCount),
      field('shardStrategy', t('f.shardStrategy'), c.shardStrategy)),
    field('shardParams', t('f.shardParams'), c.shardParams),
    field('jobParams', t('f.jobParams'), c.jobParams),
    h('div', { class: 'row' },
      field('timeoutSeconds', t('f.timeoutSeconds'), c.timeoutSeconds),
      field('maxRetry', t('f.maxRetry'), c.maxRetry),
      field('misfirePolicy', t('f.misfirePolicy'), c.misfirePolicy)),
    h('div', { class: 'row' },
      field('routeStrategy', t('f.routeStrategy'), c.routeStrategy),
      field('overlapPolicy', t('f.overlapPolicy'), c.overlapPolicy)),
    field('childJobs', t('f.childJobs'), c.childJobs, t('form.listHint')),
    field('alertChannels', t('f.alertChannels'), c.alertChannels, t('form.listHint')),
    field('description', t('f.description'), c.description),
    general,
    h('div', { class: 'actions' },
      h('button', { type: 'submit' }, t('action.save')),
      h('a', { class: 'button secondary', href: job ? `#/jobs/${enc(job.name)}` : '#/jobs' }, t('action.back'))));
  c.enabled.id = 'f-enabled';
  c.enabled.name = 'enabled';

  /// Shows the fields of the chosen schedule type only.
  function showScheduleFields() {
    const shown = SCHEDULE_FIELDS[c.scheduleType.value];
    for (const k of ['cron', 'intervalSeconds', 'startAt']) {
      c[k].closest('.field').hidden = !shown.includes(k);
    }
  }
  c.scheduleType.addEventListener('change', () => {
    showScheduleFields();
    schedulePreview();
  });
  showScheduleFields();

  function setError(name, message) {
    const el = form.querySelector(`[data-field="${name}"]`);
    if (!el) return false;
    el.textContent = message;
    const control = form.querySelector(`#f-${name}`);
    if (control) control.setAttribute('aria-invalid', message ? 'true' : 'false');
    return true;
  }

  function body() {
    const errors = {};
    const json = (key) => {
      const text = c[key].value.trim();
      if (!text) return null;
      try {
        return JSON.parse(text);
      } catch (e) {
        errors[key] = t('form.invalidJson', { message: e.message });
        return null;
      }
    };
    const num = (key) => (c[key].value.trim() === '' ? null : Number(c[key].value));
    const b = {
      serviceName: c.serviceName.value.trim(),
      handler: c.handler.value.trim(),
      ...scheduleFields(),
      enabled: c.enabled.checked,
      shardCount: num('shardCount'),
      shardStrategy: c.shardStrategy.value,
      shardParams: json('shardParams'),
      jobParams: json('jobParams'),
      timeoutSeconds: num('timeoutSeconds'),
      maxRetry: num('maxRetry'),
      misfirePolicy: c.misfirePolicy.value,
      routeStrategy: c.routeStrategy.value,
      overlapPolicy: c.overlapPolicy.value,
      childJobs: list(c.childJobs.value),
      alertChannels: list(c.alertChannels.value),
    };
    if (!job) b.name = c.name.value.trim();
    const tz = c.timezone.value.trim();
    if (tz) b.timezone = tz;
    const description = c.description.value.trim();
    if (description) b.description = description;
    const group = c.serviceGroup.value.trim();
    if (group) b.serviceGroup = group;
    const calendar = c.calendar.value.trim();
    if (calendar) b.calendar = calendar;
    for (const k of Object.keys(b)) if (b[k] === null) delete b[k];
    return { b, errors };
  }

  async function save() {
    // A pending preview must not replace the messages of the save.
    clearTimeout(previewTimer);
    previewSeq += 1;
    form.querySelectorAll('.field-error').forEach((el) => { el.textContent = ''; });
    mount(general);
    const { b, errors } = body();
    if (Object.keys(errors).length) {
      for (const [k, m] of Object.entries(errors)) setError(k, m);
      return;
    }
    try {
      const saved = job
        ? await nsApi('PUT', `/jobs/${enc(job.name)}`, b)
        : await nsApi('POST', '/jobs', b);
      flash(t('form.saved'));
      location.hash = `#/jobs/${enc(saved.name)}`;
    } catch (err) {
      // `childJobs[1]` is shown beside `childJobs`.
      const placed = {};
      for (const [k, m] of Object.entries(err.fields)) {
        const base = k.split(/[[.]/)[0];
        placed[base] = placed[base] ? `${placed[base]}; ${m}` : m;
      }
      const unplaced = Object.entries(placed).filter(([k, m]) => !setError(k, m));
      if (Object.keys(err.fields).length === 0 || unplaced.length) {
        mount(general, errorBox({ message: t('form.failed', { message: err.message }) }));
      }
      const first = form.querySelector('[aria-invalid="true"]');
      if (first) first.focus();
    }
  }

  updatePreview();
  const title = job ? t('form.editTitle', { name: job.name }) : t('form.createTitle');
  return {
    node: h('div', {}, h('h1', {}, title, namespaceTag(job ? job.namespace : namespace.get())), form),
    title,
    leave: () => clearTimeout(previewTimer),
  };
}
