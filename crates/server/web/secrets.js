// Secrets inside command text, masked for display: common token shapes
// (sk_live_…, ghp_…, xoxb-…, AKIA…, JWTs), `-u user:pass`, Authorization:
// headers, Bearer …, password=… (and other credential-named keys),
// --password … and scheme://user:pass@host. The same rules as the daemon's
// chat cards (crates/policy/src/secrets.rs); both are tested against one
// table, crates/policy/tests/secret_shapes.json. Masking is for display
// only: the raw text is what runs, and an operator can reveal it. A value
// holding a character a shell would not take literally (ACTIVE: a
// substitution, an expansion, a pipe, a redirection, a glob, an escape) is
// never masked, so a mask never hides what would run or how far a scope
// reaches; nor is one starting with `@` (curl's `-F token=@file` uploads
// that file: it names what runs, not a secret). Nor does a mask ever cover
// a line break (a shell runs each line: a mask over one could hide a
// command), so a private key written over several lines is shown whole.

/** What a masked secret is shown as. */
export const MASK = '••••';

// Each rule's one capture group is the secret; the rest only places it.
// A leading (?i) means case-insensitive (written as in the Rust copy).
const RULES = [
  String.raw`\b(?:sk|rk)_(?:live|test)_([A-Za-z0-9]{8,})`,
  String.raw`\bgh[pousr]_([A-Za-z0-9]{20,})`,
  String.raw`\bgithub_pat_([A-Za-z0-9_]{20,})`,
  String.raw`\bxox[abposr]-([A-Za-z0-9-]{10,})`,
  String.raw`\b(?:AKIA|ASIA)([0-9A-Z]{16})\b`,
  String.raw`\bglpat-([A-Za-z0-9_-]{20,})`,
  String.raw`\bsk-([A-Za-z0-9_-]{20,})`,
  String.raw`\bAIza([0-9A-Za-z_-]{35})`,
  String.raw`\bnpm_([A-Za-z0-9]{36})`,
  String.raw`\beyJ([A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})`,
  String.raw`(?:^|\s)(?:-u|--user)(?:\s+|=)?['\x22]?[^\s:'\x22]+:([^\s'\x22]+)`,
  String.raw`://[^\s:/@'\x22]+:([^\s@/'\x22#?]+)@`,
  String.raw`(?i)\bauthorization:\s*(?:(?:bearer|basic|token|bot|digest)\s+)?([^\s'\x22]+)`,
  String.raw`(?i)(?:-|[:'\x22=]\s*)bearer\s+([A-Za-z0-9._~+/=-]{8,})`,
  String.raw`(?i)\b(?:x-)?api-key:\s*([^\s'\x22]+)`,
  String.raw`(?i)\b[A-Za-z0-9_.-]*?(?:password|passwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key)[A-Za-z0-9_.-]*\s*=\s*['\x22]?([^\s'\x22&;]+)`,
  String.raw`(?i)--(?:password|passwd|token|secret|api-key|access-key)\s+([^\s'\x22-][^\s'\x22]*)`,
  String.raw`-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----([^\n\r\v\f\u0085\u2028\u2029]+?)(?:-----END|$)`,
].map((r) => (r.startsWith('(?i)') ? new RegExp(r.slice(4), 'gdiu') : new RegExp(r, 'gdu')));

/** Characters that make a value more than a literal (the daemon's `ACTIVE`). */
const ACTIVE = /[$`()|;&<>*?[\]{}\\]/;

/** What starts a new line (the daemon's `LINE_BREAKS`): never masked. */
const LINE_BREAK = /[\n\r\v\f\u0085\u2028\u2029]/;

/** Whether the secret at [s, e) found by match `m` may be masked: only
 * where a mask cannot hide what runs or where it goes (the daemon's
 * `maskable`). */
function maskable(text, m, s, e) {
  const secret = text.slice(s, e);
  const matched = m[0];
  const before = text.slice(0, m.index).slice(-1);
  const after = text.slice(e, e + 1);
  if (ACTIVE.test(secret) || secret.startsWith('@')) return false;
  if (LINE_BREAK.test(matched.replace(/^[\n\r\v\f\u0085\u2028\u2029]+/, ''))) return false;
  if (['/', '~/', './', '../'].some((p) => secret.startsWith(p))) return false;
  if ((before === '/' || before === '.') && after !== '@') return false;
  const eq = matched.indexOf('=');
  if (eq >= 0) {
    const name = (matched.slice(0, eq).trimEnd().match(/[A-Za-z0-9_]+$/) || [''])[0];
    if (name && (text.includes(`$${name}`) || text.includes(`\${${name}`))) return false;
  }
  return true;
}

/** [start, end) ranges of `text` that look like secrets, sorted and merged. */
export function secretRanges(text) {
  const found = [];
  const t = String(text);
  for (const re of RULES) {
    re.lastIndex = 0;
    for (const m of t.matchAll(re)) {
      const [s, e] = m.indices[1] || [0, 0];
      if (e > s && maskable(t, m, s, e)) found.push([s, e]);
    }
  }
  found.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const merged = [];
  for (const r of found) {
    const last = merged[merged.length - 1];
    if (last && r[0] <= last[1]) last[1] = Math.max(last[1], r[1]);
    else merged.push([...r]);
  }
  return merged;
}

/** `text` with every secret-looking part replaced by MASK. */
export function maskSecrets(text) {
  const s = String(text ?? '');
  let out = '';
  let at = 0;
  for (const [a, b] of secretRanges(s)) {
    out += s.slice(at, a) + MASK;
    at = b;
  }
  return out + s.slice(at);
}
