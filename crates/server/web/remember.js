// "Approve and remember": the grant dialog for a pending action, in plain
// words first (exactly this command; this program with any arguments; for
// this session; for the next N), the regex only under "Advanced", and a
// preview of the pending actions the grant would also approve.

import { h, visibleText, guarded } from './dom.js';
import { maskSecrets } from './secrets.js';

const $ = (id) => document.getElementById(id);

/** `s` as a regex that matches exactly it. */
export function escapeRegex(s) {
  return String(s).replace(/[\\^$.*+?()[\]{}|]/g, '\\$&');
}

/** The plain choices for a decision-only action's detail: [label,
 * pattern]. With `input` (the action carries params: a file's content, an
 * edit), the grant matches the detail alone, and says so: it would allow
 * any input to it, not only what was shown. */
export function patternChoices(detail, input = false) {
  const exact = escapeRegex(detail);
  const out = [[input ? 'this target with any input (not only the content shown)' : 'exactly this command', exact]];
  const program = String(detail).trim().split(/\s+/)[0];
  if (program && program !== String(detail).trim() && !/[\n;&|`$<>]/.test(program)) {
    out.push([`${program} with any arguments`, `${escapeRegex(program)}( .*)?`]);
  }
  return out;
}

/** Whether `value` matches glob `g` (`*` matches anything). */
function globMatch(g, value) {
  if (typeof g !== 'string') return JSON.stringify(g) === JSON.stringify(value);
  const re = new RegExp(`^${g.split('*').map(escapeRegex).join('.*')}$`, 's');
  return re.test(String(value ?? ''));
}

/** The pending actions (other than `action`) a grant would cover. */
export function covered(action, grant, pending) {
  return pending.filter((p) => {
    if (p.id === action.id) return false;
    if (grant.agent !== '*' && p.agent !== action.agent) return false;
    if (grant.session && p.session !== grant.session) return false;
    if (action.permission) {
      if (p.handler !== action.handler || p.permission !== action.permission) return false;
      return Object.entries(grant.scope || {}).every(([k, g]) => globMatch(g, p.scope?.[k]));
    }
    if (p.tool !== action.tool || p.handler) return false;
    try { return new RegExp(`^(?:${grant.pattern})$`, 's').test(p.detail); } catch { return false; }
  });
}

/**
 * Opens the dialog for `action`. `app`: setSubmit(fn), scopeInputs(scope)
 * -> read(), expiryValue(), api, enc, removeAction(id), notice(text),
 * changedSince(action) (edited by someone else since drawn),
 * pending() -> the pending actions.
 */
export function openRemember(action, app) {
  const dialog = $('grant-dialog');
  $('grant-title').textContent = 'Approve and remember';
  $('grant-what').replaceChildren(action.permission
    ? `${action.handler} · ${action.permission}, asked by ${action.agent}`
    : `tool ${action.tool}, asked by ${action.agent}`, ' for ',
  ...[].concat(guarded('code', { class: 'action-string vis' }, action.action_string)));
  const fs = $('grant-scope');
  let read;
  if (action.permission) {
    read = app.scopeInputs(action.scope);
  } else {
    const input = Boolean(action.params) && typeof action.params === 'object' && Object.keys(action.params).length > 0;
    const choices = patternChoices(action.detail, input);
    const pattern = h('input', { id: 'grant-pattern', value: choices[0][1], spellcheck: 'false' });
    const radios = choices.map(([label, p], i) => {
      const r = h('input', { type: 'radio', name: 'what', value: String(i), checked: i === 0 });
      r.addEventListener('change', () => { pattern.value = p; preview(); });
      return h('label', {}, r, ` ${label}`);
    });
    const custom = h('input', { type: 'radio', name: 'what', value: 'custom' });
    pattern.addEventListener('input', () => { custom.checked = true; preview(); });
    fs.replaceChildren(h('legend', {}, 'Allow'), ...radios,
      h('label', {}, custom, ' what the pattern under Advanced says'),
      h('details', { id: 'grant-advanced' }, h('summary', {}, 'Advanced'),
        h('div', { class: 'field' }, h('label', { for: 'grant-pattern' }, 'Detail pattern (full-match regex)'), pattern)));
    read = () => pattern.value;
  }
  // Limits in plain words: this session, the next N times.
  const limits = $('grant-limits');
  const sessionBox = h('input', { type: 'checkbox', id: 'grant-session', disabled: !action.session });
  const usesBox = h('input', { type: 'checkbox', id: 'grant-uses-on' });
  const uses = h('input', { type: 'number', id: 'grant-uses', min: '1', max: '10000', value: '5', 'aria-label': 'Number of times', class: 'uses' });
  uses.addEventListener('focus', () => { usesBox.checked = true; });
  limits.replaceChildren(h('legend', {}, 'Only'),
    h('label', {}, sessionBox, action.session ? ` for this session (${action.session})` : ' for this session (the agent named none)'),
    h('label', {}, usesBox, ' for the next ', uses, ' times'));
  $('grant-agent-this').textContent = `this agent (${action.agent})`;
  $('grant-agent').hidden = false;
  limits.hidden = false;
  dialog.querySelector('input[name=expires][value="1h"]').checked = true;
  dialog.querySelector('input[name=agent][value=this]').checked = true;
  $('grant-custom').value = '';
  $('grant-error').textContent = '';
  $('grant-confirm').textContent = 'Approve and remember';

  const build = () => {
    const remember = { expires: app.expiryValue() };
    if (action.permission) remember.scope = read();
    else remember.pattern = read();
    if (dialog.querySelector('input[name=agent]:checked').value === '*') remember.agent = '*';
    if (sessionBox.checked && action.session) remember.session = action.session;
    if (usesBox.checked) {
      const n = Number(uses.value);
      if (!Number.isInteger(n) || n < 1 || n > 10000) throw new Error('The number of times is a whole number from 1 to 10000.');
      remember.uses = n;
    }
    return remember;
  };
  const preview = () => {
    let list = [];
    try {
      const g = build();
      list = covered(action, g, app.pending());
    } catch { list = []; }
    $('grant-preview').replaceChildren(
      h('strong', { id: 'grant-covers' }, list.length === 1 ? 'This grant would also approve 1 pending item' : `This grant would also approve ${list.length} pending items`),
      ...(list.length ? [h('ul', {}, list.slice(0, 5).map((p) => h('li', {}, h('code', { class: 'vis' }, visibleText(maskSecrets(p.action_string))))))] : []),
      ...(list.length > 5 ? [h('p', { class: 'hint' }, `and ${list.length - 5} more`)] : []));
  };
  $('grant-preview').hidden = false;
  dialog.oninput = preview;
  dialog.onchange = preview;
  preview();
  app.setSubmit(async () => {
    if (app.changedSince(action)) throw new Error('It was edited by someone else since this dialog opened: close it and read it again.');
    const remember = build();
    await app.api('POST', `/v1/actions/${app.enc(action.id)}/approve`, { remember });
    app.removeAction(action.id);
    app.notice('Granted; the action runs, and so does every pending action the grant covers.');
  });
  dialog.showModal();
}
