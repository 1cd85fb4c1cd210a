// Small DOM helpers. Text from the API only ever goes in as text nodes
// (never innerHTML), so nothing an agent sends can become markup.

import { maskSecrets } from './secrets.js';

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

// Characters a browser would hide, or that reorder the text around them:
// controls (C0, DEL, C1), format characters (bidi marks, embeddings,
// overrides and isolates, zero-width spaces and joiners, the BOM, soft
// hyphen, tags), line/paragraph separators, variation selectors, the
// fillers and the unassigned specials U+FFF0–U+FFF8 that render as
// nothing. The same set as the daemon's `is_hidden` (crates/api/src/text.rs),
// which the CLI and the chats use.
const HIDDEN = /[\u0000-\u001f\u007f-\u009f\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u08e2\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u206f\u2800\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\u{110bd}\u{110cd}\u{13430}-\u{1343f}\u{1bca0}-\u{1bca3}\u{1d173}-\u{1d17a}\u{e0000}-\u{e0fff}]/u;

/** How one hidden character is shown: ⏎ (LF), ␍ (CR), ⇥ (tab), ⟨U+202E⟩. */
function mark(c) {
  if (c === '\n') return '⏎';
  if (c === '\r') return '␍';
  if (c === '\t') return '⇥';
  return `⟨U+${c.codePointAt(0).toString(16).toUpperCase().padStart(4, '0')}⟩`;
}

/** `text` on one line with every hidden character shown (for attributes). */
export function visibleText(text) {
  let out = '';
  for (const c of String(text ?? '')) out += HIDDEN.test(c) ? mark(c) : c;
  return out;
}

// Scripts with letters drawn like Latin ones (Unicode's confusables list
// pairs most of their letters with Latin or with each other): only their
// letters are marked. A Japanese file name with `.txt`, or Hebrew next to a
// Latin flag, mixes scripts no one would take for each other. The daemon's
// `lookalikes` (crates/api/src/text.rs), which the CLI and the chats use,
// follows the same rule.
const LOOK_ALIKE = ['Cyrillic', 'Greek', 'Armenian', 'Cherokee', 'Coptic', 'Lisu', 'Canadian_Aboriginal',
  'Tifinagh', 'Old_Italic', 'Runic', 'Gothic', 'Deseret', 'Osage'];
// Told apart as well, so a word of one of them is one script; Japanese and
// Korean write Han with their own scripts, so those count as one. A letter
// of none of these is "another script".
const SCRIPTS = ['Latin', ...LOOK_ALIKE, 'Han', 'Hiragana', 'Katakana', 'Hangul', 'Bopomofo', 'Arabic', 'Hebrew',
  'Georgian', 'Thai', 'Devanagari'].map((name) => [name, new RegExp(`\\p{Script=${name}}`, 'u')]);
const ONE_AS = { Hiragana: 'Han', Katakana: 'Han', Hangul: 'Han', Bopomofo: 'Han' };
const LETTER = /\p{L}/u;
const SPACE = /\s/u;
const NOT_ASCII = /[^\x00-\x7f]/;
// The letters of those scripts drawn like Latin letters or digits (each
// one's skeleton in Unicode's confusables, UTS #39, is ASCII): the
// daemon's `latin_lookalike_letters` (crates/api/src/text.rs), which a
// test compares with this.
const READS_AS_LATIN = new Set('\u{37f}\u{391}\u{392}\u{395}\u{396}\u{397}\u{399}\u{39a}\u{39c}\u{39d}\u{39f}\u{3a1}\u{3a4}\u{3a5}\u{3a7}\u{3b1}\u{3b3}\u{3b9}\u{3bd}\u{3bf}\u{3c1}\u{3c3}\u{3c5}\u{3d2}\u{3dc}\u{3e8}\u{3ec}\u{3ed}\u{3f1}\u{3f2}\u{3f3}\u{3f8}\u{3f9}\u{3fa}\u{405}\u{406}\u{408}\u{410}\u{412}\u{415}\u{417}\u{41a}\u{41c}\u{41d}\u{41e}\u{420}\u{421}\u{422}\u{423}\u{425}\u{42b}\u{42c}\u{42e}\u{430}\u{431}\u{433}\u{435}\u{43e}\u{440}\u{441}\u{443}\u{445}\u{448}\u{455}\u{456}\u{458}\u{461}\u{474}\u{475}\u{478}\u{479}\u{4ae}\u{4af}\u{4ba}\u{4bb}\u{4bd}\u{4c0}\u{4cf}\u{4d4}\u{4d5}\u{4e0}\u{501}\u{50c}\u{51a}\u{51b}\u{51c}\u{51d}\u{545}\u{54d}\u{54f}\u{555}\u{560}\u{561}\u{563}\u{566}\u{570}\u{575}\u{578}\u{57c}\u{57d}\u{581}\u{582}\u{584}\u{585}\u{13a0}\u{13a1}\u{13a2}\u{13a5}\u{13a9}\u{13aa}\u{13ab}\u{13ac}\u{13b3}\u{13b7}\u{13bb}\u{13bd}\u{13c0}\u{13c2}\u{13c3}\u{13ce}\u{13cf}\u{13d2}\u{13d4}\u{13d5}\u{13d9}\u{13da}\u{13de}\u{13df}\u{13e2}\u{13e6}\u{13e7}\u{13ee}\u{13f3}\u{13f4}\u{142f}\u{144c}\u{146d}\u{146f}\u{1472}\u{148d}\u{14aa}\u{14bf}\u{1541}\u{157c}\u{157d}\u{1587}\u{15af}\u{15b4}\u{15c5}\u{15de}\u{15ea}\u{15f0}\u{15f7}\u{1616}\u{16b7}\u{16c1}\u{16d0}\u{16d5}\u{16d6}\u{1c82}\u{1c83}\u{1c84}\u{1d26}\u{1fbe}\u{2c82}\u{2c85}\u{2c8c}\u{2c8d}\u{2c8e}\u{2c92}\u{2c93}\u{2c94}\u{2c98}\u{2c9a}\u{2c9c}\u{2c9e}\u{2c9f}\u{2ca2}\u{2ca3}\u{2ca4}\u{2ca5}\u{2ca6}\u{2ca8}\u{2ca9}\u{2cac}\u{2cbd}\u{2cc4}\u{2cca}\u{2ccb}\u{2ccc}\u{2cce}\u{2ccf}\u{2cd0}\u{2cd2}\u{2cd3}\u{2cdc}\u{2d38}\u{2d39}\u{2d4a}\u{2d4f}\u{2d54}\u{2d55}\u{2d5d}\u{a4d0}\u{a4d1}\u{a4d2}\u{a4d3}\u{a4d4}\u{a4d6}\u{a4d7}\u{a4d9}\u{a4da}\u{a4dc}\u{a4dd}\u{a4df}\u{a4e0}\u{a4e1}\u{a4e2}\u{a4e3}\u{a4e6}\u{a4e7}\u{a4ea}\u{a4eb}\u{a4ec}\u{a4ee}\u{a4f0}\u{a4f2}\u{a4f3}\u{a4f4}\u{a644}\u{a647}\u{a698}\u{a699}\u{ab75}\u{ab81}\u{ab83}\u{ab93}\u{ab9e}\u{aba4}\u{aba9}\u{abaa}\u{abaf}\u{abbe}\u{10301}\u{10302}\u{10309}\u{1030f}\u{10311}\u{10315}\u{10317}\u{1031a}\u{1031c}\u{10404}\u{10415}\u{1041b}\u{10420}\u{1042c}\u{1043d}\u{10448}\u{104b4}\u{104c2}\u{104ce}\u{104d2}\u{104ea}\u{104f6}\u{11abc}\u{11abe}');

function scriptOf(c) {
  if (!LETTER.test(c)) return null;
  for (const [name, re] of SCRIPTS) if (re.test(c)) return ONE_AS[name] || name;
  return 'another script';
}

/**
 * Letters that could pass for others: in each word of `text` (what lies
 * between spaces, so a whole URL is one) that holds letters of more than
 * one script, the letters of a LOOK_ALIKE script other than the word's
 * Latin (or, without Latin, its most common) one; and, when the text holds
 * Latin letters, every letter of a word wholly in one LOOK_ALIKE script
 * whose letters are all READS_AS_LATIN (a program named `ѕѕһ` reads as
 * `ssh`). A Map from the letter's index in code points to `{ script,
 * among, whole }`: its script's name, the word's (for a whole word,
 * Latin, which it passes for), and whether the whole word is one. Other
 * words wholly in one script (Russian text) are not marked.
 */
export function lookalikes(text) {
  const out = new Map();
  // Plain ASCII, most of what is drawn, mixes nothing.
  if (!NOT_ASCII.test(String(text ?? ''))) return out;
  const chars = [...String(text ?? '')];
  const known = new Map();
  const latin = chars.some((c) => LETTER.test(c) && SCRIPTS[0][1].test(c));
  let start = 0;
  for (let i = 0; i <= chars.length; i++) {
    if (i < chars.length && !SPACE.test(chars[i])) continue;
    const scripts = [];
    const counts = new Map();
    for (let j = start; j < i; j++) {
      const c = chars[j];
      if (!known.has(c)) known.set(c, scriptOf(c));
      const s = known.get(c);
      scripts.push(s);
      if (s) counts.set(s, (counts.get(s) || 0) + 1);
    }
    if (counts.size > 1) {
      const keep = counts.has('Latin') ? 'Latin' : [...counts].sort((x, y) => y[1] - x[1])[0][0];
      scripts.forEach((s, k) => {
        if (s && s !== keep && LOOK_ALIKE.includes(s)) out.set(start + k, { script: s, among: keep, whole: false });
      });
    } else if (counts.size === 1 && latin) {
      const [only] = counts.keys();
      const passes = LOOK_ALIKE.includes(only) && scripts.every((s, k) => !s || READS_AS_LATIN.has(chars[start + k]));
      if (passes) {
        scripts.forEach((s, k) => {
          if (s) out.set(start + k, { script: s, among: 'Latin', whole: true });
        });
      }
    }
    start = i + 1;
  }
  return out;
}

function lookalikeMark(c, { script, among, whole }) {
  const span = document.createElement('span');
  span.className = 'mixed';
  const code = c.codePointAt(0).toString(16).toUpperCase().padStart(4, '0');
  span.title = whole
    ? `${script} letter U+${code} in a word of ${script} letters that all look like ${among} ones, among ${among} words: it may be read as one`
    : `${script} letter U+${code} in a word of ${among} letters: it may look like one of them`;
  span.textContent = c;
  return span;
}

/**
 * What the operator sees is what runs: `text` as nodes, every hidden
 * character shown as a `span.ctl` mark, each line feed as ⏎ followed by a
 * real line break (the element needs `white-space: pre-wrap`, class
 * `vis`), and each letter that mixes scripts in a word (`lookalikes`) in a
 * `span.mixed` naming its script. With `{ breaks: false }` line feeds stay
 * as they are (text that is already laid out, like pretty JSON).
 */
export function visible(text, { breaks = true } = {}) {
  const frag = document.createDocumentFragment();
  const mixed = lookalikes(text);
  let run = '';
  let i = -1;
  for (const c of String(text ?? '')) {
    i += 1;
    if (mixed.has(i)) {
      if (run) frag.append(document.createTextNode(run));
      run = '';
      frag.append(lookalikeMark(c, mixed.get(i)));
      continue;
    }
    if (!HIDDEN.test(c) || (c === '\n' && !breaks)) {
      run += c;
      continue;
    }
    if (run) frag.append(document.createTextNode(run));
    run = c === '\n' ? '\n' : '';
    const span = document.createElement('span');
    span.className = 'ctl';
    span.textContent = mark(c);
    frag.append(span);
    if (run) {
      frag.append(document.createTextNode(run));
      run = '';
    }
  }
  if (run) frag.append(document.createTextNode(run));
  return frag;
}

/**
 * Agent text that may hold secrets (a command, a title): shown made
 * visible with every secret-looking part masked; when something was
 * masked, a "show secret" button next to it puts the raw text in (and
 * takes it out again). Until that click the raw value is not in the page.
 * Returns the element, or [element, button].
 */
export function guarded(tag, attrs, text, opts) {
  const raw = String(text ?? '');
  const safe = maskSecrets(raw);
  const el = h(tag, attrs, visible(safe, opts));
  if (safe === raw) return el;
  el.dataset.masked = 'true';
  const btn = h('button', { type: 'button', class: 'reveal small', 'aria-pressed': 'false', title: 'Show the masked secret in this text' }, 'show secret');
  btn.addEventListener('click', (e) => {
    e.stopPropagation();
    const open = btn.getAttribute('aria-pressed') !== 'true';
    el.replaceChildren(visible(open ? raw : safe, opts));
    el.dataset.masked = String(!open);
    btn.setAttribute('aria-pressed', String(open));
    btn.textContent = open ? 'hide secret' : 'show secret';
  });
  return [el, btn];
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

// Keys whose values are not shown until asked: credentials by name, matched
// on whole segments of the key (split at `_`, `-`, `.`, spaces and
// camelCase), so `db_pass` and `authToken` are masked but `bypass` and
// `session` are not: an agent names its params, and a key rule that matched
// inside words would let it hide any value. The daemon has already replaced
// what the handler's schema marks `sensitive` by "***".
const SENSITIVE_WORDS = new Set(['password', 'passwords', 'passwd', 'passphrase', 'pass', 'secret', 'secrets',
  'token', 'tokens', 'apikey', 'authorization', 'authheader', 'credential', 'credentials', 'privatekey',
  'cookie', 'cookies', 'pwd', 'pin', 'auth', 'otp']);
const SENSITIVE_PAIRS = new Set(['api key', 'auth header', 'private key']);

/** The words of a key name: `X-Api-Key` -> x, api, key; `authToken` -> auth, token. */
function keyWords(key) {
  return String(key)
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter(Boolean);
}

/** Whether a param named `key` holds a credential, by its name. */
export function sensitiveKey(key) {
  const w = keyWords(key);
  return w.some((x, i) => SENSITIVE_WORDS.has(x) || SENSITIVE_PAIRS.has(`${x} ${w[i + 1]}`));
}

/** What a masked value is shown as. */
export const MASK = '••••';

/** A deep copy of `value` with the daemon's "***" shown as MASK and, with
 * `keys` (the default), values under sensitive key names replaced by MASK
 * too. */
export function masked(value, key = '', { keys = true } = {}) {
  if (keys && key && sensitiveKey(key)) return MASK;
  if (value === '***') return MASK;
  if (Array.isArray(value)) return value.map((v) => masked(v, '', { keys }));
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, masked(v, k, { keys })]));
  }
  return value;
}

/**
 * A value masked by its key name: drawn by `draw(shown)` (nodes) with a
 * "show value" button that draws `raw` instead (and "hide value" back).
 * Secret-shaped parts of `raw` stay masked by `guarded` behind their own
 * "show secret". Approve opens every such button first (app.js): the key
 * names are the agent's, so a mask by name must never hide what runs.
 * Returns `draw(raw)` when nothing was masked.
 */
export function keyMasked(draw, raw, shown) {
  if (raw === shown) return draw(raw);
  const holder = h('span', { class: 'keymask', dataset: { masked: 'true' } }, draw(shown));
  const btn = h('button', { type: 'button', class: 'reveal-key small', 'aria-pressed': 'false', title: 'Show the value hidden because of its key name' }, 'show value');
  btn.addEventListener('click', (e) => {
    e.stopPropagation();
    const open = btn.getAttribute('aria-pressed') !== 'true';
    holder.replaceChildren(...[].concat(draw(open ? raw : shown)));
    holder.dataset.masked = String(!open);
    btn.setAttribute('aria-pressed', String(open));
    btn.textContent = open ? 'hide value' : 'show value';
  });
  return [holder, btn];
}
