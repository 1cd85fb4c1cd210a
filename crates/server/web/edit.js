// "Edit & approve": a handler action's params as JSON, or a decision-only
// action's detail, in a text field to change before approving. Values the
// page masks by key name and those the daemon masks (the handler's
// `sensitive` params, already "***") are "***" there; sent back as "***",
// each keeps the agent's value (the page puts back the ones it masked, the
// daemon its own: docs/teams.md).

import { guarded, sensitiveKey, visible, visibleText } from './dom.js';

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

/** Whether `text` holds a character a text field hides (line breaks and
 * tabs aside: they show). */
function holdsHidden(text) {
  return visibleText(text.replace(/[\n\t]/g, '')) !== text.replace(/[\n\t]/g, '');
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
    : 'Detail to run';
  // An action already edited by another approver is edited from that version.
  const { shown, kept } = handler ? maskForEdit(action.approved_params || action.params || {}) : { shown: null, kept: [] };
  const text = $('edit-text');
  text.value = handler ? JSON.stringify(shown, null, 2) : (action.approved_detail ?? action.detail);
  // A text field draws hidden characters as nothing (or obeys them): what
  // it holds is also spelled out with them named, as under the scope fields.
  const hint = $('edit-hidden');
  const showHidden = () => {
    const hidden = holdsHidden(text.value);
    hint.hidden = !hidden;
    hint.replaceChildren(...(hidden ? ['Holds hidden characters: ', visible(text.value, { breaks: false })] : []));
  };
  text.oninput = showHidden;
  showHidden();
  $('edit-error').textContent = '';
  app.setSubmit(async (value) => {
    let body;
    if (handler) {
      try { body = { params: unmaskEdit(JSON.parse(value), kept) }; } catch (e) { throw new Error(`Not JSON: ${e.message}`); }
    } else {
      body = { detail: value };
    }
    const after = await app.api('POST', `/v1/actions/${app.enc(action.id)}/approve`, body);
    app.settled(action.id, after);
  });
  $('edit-dialog').showModal();
}
