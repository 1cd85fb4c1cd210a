// Small DOM helpers. Text from the API only ever goes in as text nodes
// (never innerHTML), so nothing an agent sends can become markup.

/** Creates an element: h('button', {class: 'x', onclick: f}, 'text', child). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') {
      el.addEventListener(k.slice(2), v);
    } else if (k === 'class') {
      el.className = v;
    } else if (k === 'dataset') {
      Object.assign(el.dataset, v);
    } else if (v === true) {
      el.setAttribute(k, '');
    } else {
      el.setAttribute(k, String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** The gear icon, drawn as SVG (no icon font, no external file). */
export function gearIcon() {
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('viewBox', '0 0 24 24');
  svg.setAttribute('width', '18');
  svg.setAttribute('height', '18');
  svg.setAttribute('aria-hidden', 'true');
  const path = document.createElementNS(ns, 'path');
  path.setAttribute('fill', 'currentColor');
  path.setAttribute('d', 'M19.4 13a7.7 7.7 0 0 0 0-2l2.1-1.6-2-3.5-2.5 1a7.6 7.6 0 0 0-1.7-1L15 3.2h-4l-.4 2.7a7.6 7.6 0 0 0-1.7 1l-2.5-1-2 3.5L6.5 11a7.7 7.7 0 0 0 0 2l-2.1 1.6 2 3.5 2.5-1a7.6 7.6 0 0 0 1.7 1l.4 2.7h4l.4-2.7a7.6 7.6 0 0 0 1.7-1l2.5 1 2-3.5zM13 15.5a3.5 3.5 0 1 1 0-7 3.5 3.5 0 0 1 0 7z');
  path.setAttribute('transform', 'translate(-1 0)');
  svg.append(path);
  return svg;
}

/** "in 4m 12s" / "3m 5s ago". */
export function countdown(iso, now = Date.now()) {
  const ms = Date.parse(iso) - now;
  const s = Math.round(Math.abs(ms) / 1000);
  const parts = s >= 86400 ? [`${Math.floor(s / 86400)}d`, `${Math.floor((s % 86400) / 3600)}h`]
    : s >= 3600 ? [`${Math.floor(s / 3600)}h`, `${Math.floor((s % 3600) / 60)}m`]
    : s >= 60 ? [`${Math.floor(s / 60)}m`, `${s % 60}s`] : [`${s}s`];
  return ms >= 0 ? `in ${parts.join(' ')}` : `${parts.join(' ')} ago`;
}

/**
 * Orders `{id, at}` items newest first. `at` is RFC 3339 text, compared as
 * a time: the daemon writes a whole second without a fraction ("…:07Z"),
 * which as text sorts after "…:07.005Z". Within one millisecond the id
 * decides (UUIDv7 ids sort by creation).
 */
export function newestFirst(x, y) {
  const d = Date.parse(y.at) - Date.parse(x.at);
  if (d) return d;
  return x.id < y.id ? 1 : x.id > y.id ? -1 : 0;
}

/** A local, readable time. */
export function when(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  return d.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
}

// Keys whose values are never shown: credentials by name. The daemon has
// already replaced what the handler's schema marks `sensitive` by "***".
const SENSITIVE_KEY = /pass(word|wd|phrase)?|secret|token|api[_-]?key|apikey|authorization|auth[_-]?header|credential|private[_-]?key|cookie|session/i;
/** What a masked value is shown as. */
export const MASK = '••••';

/** A deep copy of `value` with sensitive values replaced by MASK. */
export function masked(value, key = '') {
  if (key && SENSITIVE_KEY.test(key)) return MASK;
  if (value === '***') return MASK;
  if (Array.isArray(value)) return value.map((v) => masked(v));
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, masked(v, k)]));
  }
  return value;
}
