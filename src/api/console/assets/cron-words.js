// A cron expression in words for the common shapes (every N seconds or minutes, hourly,
// daily, weekly, monthly); null for anything else, where the expression itself is shown.
// The API remains the authority: the next fire times always come from it.

import { lang } from './i18n.js';

const DAYS = {
  en: ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'],
  zh: ['周日', '周一', '周二', '周三', '周四', '周五', '周六'],
};
const DAY_NAMES = ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'];

const isNum = (s) => /^\d+$/.test(s);
const any = (s) => s === '*' || s === '?';
/// `*/N` or `0/N` as N.
const step = (s) => {
  const m = /^(?:\*|0)\/(\d+)$/.exec(s);
  return m ? Number(m[1]) : null;
};
const pad = (n) => String(n).padStart(2, '0');

/// The day of week as 0 (Sunday) to 6, or null.
function weekday(s, quartz) {
  const upper = s.toUpperCase();
  const byName = DAY_NAMES.indexOf(upper);
  if (byName >= 0) return byName;
  if (!isNum(s)) return null;
  const n = Number(s);
  if (quartz) return n >= 1 && n <= 7 ? n - 1 : null;
  return n >= 0 && n <= 7 ? n % 7 : null;
}

export function cronWords(expr) {
  const f = (expr || '').trim().split(/\s+/);
  let sec, min, hour, dom, mon, dow, year;
  const quartz = f.length === 6 || f.length === 7;
  if (quartz) [sec, min, hour, dom, mon, dow, year] = f;
  else if (f.length === 5) { sec = '0'; [min, hour, dom, mon, dow] = f; }
  else return null;
  if (year !== undefined && year !== '*') return null;
  if (mon !== '*') return null;
  const zh = lang() === 'zh';
  const at = () => (isNum(sec) && Number(sec) !== 0
    ? `${pad(hour)}:${pad(min)}:${pad(sec)}`
    : `${pad(hour)}:${pad(min)}`);
  const everyDay = any(dom) && any(dow);
  if (everyDay) {
    if (sec === '*' && min === '*' && hour === '*') return zh ? '每秒' : 'every second';
    const s = step(sec);
    if (s && min === '*' && hour === '*') return zh ? `每 ${s} 秒` : `every ${s} seconds`;
    if (isNum(sec)) {
      const m = step(min);
      if (m && hour === '*') return zh ? `每 ${m} 分钟` : `every ${m} minutes`;
      if (min === '*' && hour === '*') return zh ? '每分钟' : 'every minute';
      if (isNum(min) && hour === '*') return zh ? `每小时第 ${Number(min)} 分` : `every hour at minute ${Number(min)}`;
      const hs = step(hour);
      if (isNum(min) && hs) return zh ? `每 ${hs} 小时，第 ${Number(min)} 分` : `every ${hs} hours at minute ${Number(min)}`;
      if (isNum(min) && isNum(hour)) return zh ? `每天 ${at()}` : `every day at ${at()}`;
    }
    return null;
  }
  if (!isNum(sec) || !isNum(min) || !isNum(hour)) return null;
  if (any(dom)) {
    const d = weekday(dow, quartz);
    if (d === null) return null;
    return zh ? `每${DAYS.zh[d]} ${at()}` : `every ${DAYS.en[d]} at ${at()}`;
  }
  if (any(dow) && isNum(dom)) return zh ? `每月 ${Number(dom)} 日 ${at()}` : `on day ${Number(dom)} of every month at ${at()}`;
  if (any(dow) && dom === 'L') return zh ? `每月最后一天 ${at()}` : `on the last day of every month at ${at()}`;
  return null;
}
