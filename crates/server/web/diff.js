// A line diff of a file edit's old and new text (params such as
// old_string/new_string), for the card: what the edit removes and adds.
// Pure, so it is tested in node (tests/web/units.test.mjs).

/** Pairs of param names that carry an edit's old and new text. */
const PAIRS = [['old_string', 'new_string'], ['old_text', 'new_text'], ['old_content', 'new_content'], ['old', 'new']];

/** The names of the params that carry an edit's [old, new] texts, or null. */
export function editKeys(params) {
  if (!params || typeof params !== 'object') return null;
  return PAIRS.find(([o, n]) => typeof params[o] === 'string' && typeof params[n] === 'string') ?? null;
}

/** The [old, new] texts of an edit in `params`, or null. */
export function editOf(params) {
  const keys = editKeys(params);
  return keys ? [params[keys[0]], params[keys[1]]] : null;
}

/** Longest texts diffed line by line; past it, all old lines then all new. */
const MAX_LINES = 400;

/** `[[' ' | '-' | '+', line], …]`: a shortest line diff of `a` to `b`. */
export function lineDiff(a, b) {
  const x = a.split('\n');
  const y = b.split('\n');
  if (x.length > MAX_LINES || y.length > MAX_LINES) {
    return [...x.map((l) => ['-', l]), ...y.map((l) => ['+', l])];
  }
  // lcs[i][j]: the longest common subsequence of x[i..] and y[j..].
  const lcs = Array.from({ length: x.length + 1 }, () => new Array(y.length + 1).fill(0));
  for (let i = x.length - 1; i >= 0; i--) {
    for (let j = y.length - 1; j >= 0; j--) {
      lcs[i][j] = x[i] === y[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  const out = [];
  let i = 0;
  let j = 0;
  while (i < x.length && j < y.length) {
    if (x[i] === y[j]) { out.push([' ', x[i]]); i++; j++; }
    else if (lcs[i + 1][j] >= lcs[i][j + 1]) out.push(['-', x[i++]]);
    else out.push(['+', y[j++]]);
  }
  while (i < x.length) out.push(['-', x[i++]]);
  while (j < y.length) out.push(['+', y[j++]]);
  return out;
}
