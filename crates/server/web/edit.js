// "Edit & approve": a handler action's params as JSON, or a decision-only
// action's detail, in a text field to change before approving. Values the
// page masks by key name and those the daemon masks (the handler's
// `sensitive` params, already "***") are "***" there; sent back as "***",
// each keeps the agent's value (the page puts back the ones it masked, the
// daemon its own: docs/teams.md). In a detail, secret-shaped parts are
// numbered tokens put back the same way.

import { guarded, lookalikes, sensitiveKey, visible, visibleText } from './dom.js';
import { MASK, secretRanges } from './secrets.js';

const $ = (id) => document.getElementById(id);

/** What a value not shown in the text field reads as. */
export const KEPT = '***';

/**
 * `params` as the text field shows them: a value under a credential-like
 * key name as "***" (the daemon's "***" stay). `kept` lists the [path,
 * value] pairs the page masked, to put back with `unmaskEdit`.
 */
export function maskForEdit(params) {
  const kept = [];
  const walk = (v, path, key) => {
    if (key && sensitiveKey(key) && v !== KEPT) {
      kept.push([path, v]);
      return KEPT;
    }
    if (Array.isArray(v)) return v.map((x, i) => walk(x, [...path, i], ''));
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x, [...path, k], k)]));
    return v;
  };
  return { shown: walk(params, [], ''), kept };
}

/** `edited` (parsed from the text field) with each value the page masked
 * and that was sent back as "***" put back to the value it stood for. */
export function unmaskEdit(edited, kept) {
  for (const [path, value] of kept) {
    let at = edited;
    for (const k of path.slice(0, -1)) at = at && typeof at === 'object' ? at[k] : undefined;
    const last = path[path.length - 1];
    if (at && typeof at === 'object' && Object.hasOwn(at, last) && at[last] === KEPT) at[last] = value;
  }
  return edited;
}

/** A decision-only action's detail as the text field shows it: each
 * secret-shaped part (secrets.js) as `••••1`, `••••2`, …; `kept` maps each
 * such token back to what it stands for (`unmaskDetail`). A detail that
 * already holds the mask characters is shown as it is: a token would be
 * ambiguous. */
export function maskDetail(detail) {
  const text = String(detail ?? '');
  if (text.includes(MASK)) return { shown: text, kept: [] };
  const kept = [];
  let shown = '';
  let at = 0;
  for (const [a, b] of secretRanges(text)) {
    const token = `${MASK}${kept.length + 1}`;
    kept.push([token, text.slice(a, b)]);
    shown += text.slice(at, a) + token;
    at = b;
  }
  return { shown: shown + text.slice(at), kept };
}

/** `edited` with each token of `maskDetail` put back, longest first (so
 * `••••12` is not read as `••••1` and a 2). */
export function unmaskDetail(edited, kept) {
  let out = edited;
  for (const [token, value] of [...kept].sort((x, y) => y[0].length - x[0].length)) out = out.split(token).join(value);
  return out;
}

/** Whether `text` holds a character a text field hides (line breaks and
 * tabs aside: they show), or a letter that passes for another script's. */
function holdsHidden(text) {
  return visibleText(text.replace(/[\n\t]/g, '')) !== text.replace(/[\n\t]/g, '') || lookalikes(text).size > 0;
}

/**
 * Opens the dialog for `action`. `app`: setSubmit(fn), api, enc,
 * settled(id, after) (the answer of the approval).
 */
export function openEdit(action, app) {
  const handler = Boolean(action.handler);
  $('edit-what').replaceChildren(...[].concat(guarded('code', { class: 'action-string vis' }, action.action_string)), ` (agent ${action.agent})`);
  $('edit-label').textContent = handler
    ? `Params to run (JSON). ${KEPT} stands for a value not shown (a param the handler marks sensitive, or one named like a credential): left as ${KEPT}, it keeps the agent's value; a sensitive param cannot be changed.`
    : `Detail to run. ${MASK}1, ${MASK}2, … stand for secret-looking parts not shown: left in place, each keeps the agent's text.`;
  // An action already edited by another approver is edited from that version.
  const { shown, kept } = handler ? maskForEdit(action.approved_params || action.params || {}) : maskDetail(action.approved_detail ?? action.detail);
  const text = $('edit-text');
  text.value = handler ? JSON.stringify(shown, null, 2) : shown;
  // A text field draws hidden characters as nothing (or obeys them): what
  // it holds is also spelled out with them named, as under the scope fields.
  const hint = $('edit-hidden');
  const showHidden = () => {
    const hidden = holdsHidden(text.value);
    hint.hidden = !hidden;
    hint.replaceChildren(...(hidden ? ['Holds hidden characters or letters of mixed scripts: ', visible(text.value, { breaks: false })] : []));
  };
  text.oninput = showHidden;
  showHidden();
  $('edit-error').textContent = '';
  app.setSubmit(async (value) => {
    let body;
    if (handler) {
      try { body = { params: unmaskEdit(JSON.parse(value), kept) }; } catch (e) { throw new Error(`Not JSON: ${e.message}`); }
    } else {
      body = { detail: unmaskDetail(value, kept) };
    }
    const after = await app.api('POST', `/v1/actions/${app.enc(action.id)}/approve`, body);
    app.settled(action.id, after);
  });
  $('edit-dialog').showModal();
}
