// The operator's page: sign-in, the live queue (actions and grant requests
// that wait for a human), grants, history and an action's timeline.
// Hash routes (#/queue, #/grants, #/history?…, #/actions/<id>) keep it one
// page served at `/`.

import { api, decide, enc, session } from './api.js';
import { EventFollower } from './stream.js';
import { h, countdown, guarded, lookalikes, visible, visibleText } from './dom.js';
import { renderGrants, renderHistory, renderAction } from './views.js';
import { addUndecided, renderSessions } from './sessions.js';
import { renderAgents } from './profile.js';
import { createQueue } from './queue.js';
import { MOST, covered, pendingActions, pendingPages } from './backlog.js';
import { maskSecrets } from './secrets.js';
import { openRemember } from './remember.js';
import { openEdit } from './edit.js';
import { announce, showNotifyState, toggleNotify } from './notify.js';

const $ = (id) => document.getElementById(id);

const state = {
  me: null,
  follower: null,
  actions: new Map(), // pending actions by id
  requests: new Map(), // pending grant requests by id
  plans: new Map(), // pending plans by id
  undecided: new Map(), // runs nobody decided (action.undecided events), one entry per agent, while the page is open
  gone: new Set(), // ids seen leaving the queue: a late list never brings them back
  arrivals: [], // sets of ids the stream brought while a list was loading
  backlog: null, // the last load when it was cut short at its bound (backlog.js)
  refilling: false,
  viewAbort: null,
};

// ---- errors and notices -------------------------------------------------

function fail(err) {
  console.warn(err);
  const text = err?.message || String(err);
  const item = h('div', { class: 'error' }, h('span', {}, text),
    h('button', { type: 'button', class: 'icon', 'aria-label': 'Dismiss', onclick: () => item.remove() }, '×'));
  $('errors').append(item);
}

function notice(text) {
  const item = h('div', { class: 'notice', role: 'status' }, text);
  $('errors').append(item);
  setTimeout(() => item.remove(), 4000);
}

// ---- sign-in ------------------------------------------------------------

async function signIn(key) {
  let me;
  try {
    me = await api('GET', '/v1/whoami', undefined, key);
  } catch (e) {
    if (e.status === 401) throw new Error('That key was not accepted: check it and try again.');
    throw e;
  }
  if (me.role !== 'operator' && me.role !== 'admin') {
    throw new Error(`That is an ${me.role} key; the queue needs an operator key.`);
  }
  session.key = key;
  state.me = me;
  $('whoami').textContent = `${me.name || me.key_id} (${me.role})`;
  $('sign-in').hidden = true;
  $('nav').hidden = false;
  $('session').hidden = false;
  $('view').hidden = false;
  startStream();
  route();
}

function signOut(message) {
  state.follower?.stop();
  state.follower = null;
  state.viewAbort?.abort();
  session.key = null;
  state.me = null;
  state.actions.clear();
  state.requests.clear();
  state.plans.clear();
  state.undecided.clear();
  state.gone.clear();
  queue.reset();
  $('nav').hidden = true;
  $('session').hidden = true;
  $('view').hidden = true;
  $('view').replaceChildren();
  $('sign-in').hidden = false;
  $('sign-in-error').textContent = message || '';
  $('key').value = '';
  $('key').focus();
  updateTitle();
}

// ---- the live queue -----------------------------------------------------

const SETTLED_REQUEST = new Set(['grant_request.approved', 'grant_request.denied', 'grant_request.expired']);

function onEvent(ev) {
  const d = ev.data || {};
  if (d.id) for (const s of state.arrivals) s.add(d.id);
  if ((ev.type === 'action.enqueued' || ev.type === 'action.approval' || ev.type === 'action.escalated') && d.status === 'pending') {
    // Approvals so far, or an escalation: the card shows the action as it is now.
    if (!state.gone.has(d.id) && !same(state.actions.get(d.id), d)) {
      if (!state.actions.has(d.id)) announce(`actiongate: ${d.agent} asks`, visibleText(maskSecrets(d.action_string || '')));
      state.actions.set(d.id, d);
    }
  } else if (ev.type.startsWith('action.') && ev.action_id && d.status && d.status !== 'pending') {
    state.gone.add(ev.action_id);
    state.actions.delete(ev.action_id);
  } else if (ev.type === 'grant_request.created' && d.status === 'pending') {
    if (!state.gone.has(d.id) && !same(state.requests.get(d.id), d)) {
      if (!state.requests.has(d.id)) announce(`actiongate: ${d.agent} asks for a permission`, `${d.handler} · ${d.permission}`);
      state.requests.set(d.id, d);
    }
  } else if (ev.type === 'action.undecided' && ev.id) {
    if (addUndecided(state.undecided, ev)) {
      announce(`actiongate: ${d.agent || ev.agent} ran something nobody decided`, visibleText(maskSecrets(d.action_string || '')));
    }
  } else if (ev.type === 'plan.requested' && d.status === 'pending') {
    if (!state.gone.has(d.id) && !state.plans.has(d.id)) {
      announce(`actiongate: ${d.agent} asks for a plan`, `${d.steps.length} steps`);
      state.plans.set(d.id, d);
    }
  } else if (/^plan\.(approved|denied|expired)$/.test(ev.type) && d.id) {
    state.gone.add(d.id);
    state.plans.delete(d.id);
  } else if (SETTLED_REQUEST.has(ev.type) && d.id) {
    state.gone.add(d.id);
    state.requests.delete(d.id);
  }
  queueChanged();
  if (ev.type.startsWith('grant.') && currentView() === 'grants') reloadGrantsSoon();
  for (const fn of viewListeners) {
    try { fn(ev); } catch (e) { fail(e); }
  }
}

/** A burst of grant events (an agent's session ending, a script making
 * hundreds) reloads the grants view once per moment, not once each. */
let grantsReload = null;
function reloadGrantsSoon() {
  if (grantsReload) return;
  grantsReload = setTimeout(() => {
    grantsReload = null;
    if (currentView() === 'grants') route();
  }, 300);
}

/** What the current view follows of the stream (History): dropped when
 * the view's signal aborts. */
const viewListeners = new Set();

/** What the current view does when the stream comes back after a break
 * (History reloads its first page, an action page its action): events may
 * have been missed. Dropped when the view's signal aborts. */
const resyncListeners = new Set();

/** After a break in the stream: the current view reloads from the list
 * endpoints, or (one that failed to draw while the daemon was away, so
 * follows nothing) draws again. */
function resyncView() {
  if (currentView() === 'queue') return;
  if (!resyncListeners.size) {
    route();
    return;
  }
  for (const fn of resyncListeners) {
    Promise.resolve().then(fn).catch(fail);
  }
}

/** Loads the pending lists; merged with what the stream already told us.
 * With `resync`, items the lists no longer hold (settled while the page
 * was not connected) leave the queue, unless the stream brought them in
 * while the lists were loading. */
async function loadQueue({ resync = false } = {}) {
  const arrived = new Set();
  state.arrivals.push(arrived);
  let load;
  let requestLoad;
  let planLoad;
  try {
    [load, requestLoad, planLoad] = await Promise.all([
      pendingActions(),
      pendingPages('/v1/grant-requests', 500),
      pendingPages('/v1/plans', 200),
    ]);
  } finally {
    state.arrivals.splice(state.arrivals.indexOf(arrived), 1);
  }
  const actions = load.items;
  const requests = requestLoad.items;
  const plans = planLoad.items;
  state.backlog = load.complete ? null : load;
  if (resync) {
    // An item the load did not reach (past `last`) may still wait. Plans
    // are listed by when they were made, not by id: past a load cut
    // short, none is known to be settled.
    const listed = new Set([...actions, ...requests, ...plans].map((x) => x.id));
    const loads = new Map([[state.actions, load], [state.requests, requestLoad], [state.plans, planLoad]]);
    for (const [map, from] of loads) {
      for (const id of [...map.keys()]) {
        const seen = map === state.plans ? from.complete : covered(from, id);
        if (!listed.has(id) && !arrived.has(id) && seen) map.delete(id);
      }
    }
  }
  // An item already shown keeps its object (and so its card) unless what
  // the card shows of it changed.
  for (const a of actions) if (!state.gone.has(a.id) && a.status === 'pending' && !same(state.actions.get(a.id), a)) state.actions.set(a.id, a);
  for (const r of requests) if (!state.gone.has(r.id) && r.status === 'pending' && !same(state.requests.get(r.id), r)) state.requests.set(r.id, r);
  for (const p of plans) if (!state.gone.has(p.id) && p.status === 'pending' && !state.plans.has(p.id)) state.plans.set(p.id, p);
  queueChanged();
}

/** Whether two versions of a pending item show alike. */
function same(old, now) {
  if (!old) return false;
  return old.status === now.status && old.deadline === now.deadline && Boolean(old.edited) === Boolean(now.edited)
    && old.approved_detail === now.approved_detail
    && JSON.stringify(old.approved_params ?? null) === JSON.stringify(now.approved_params ?? null)
    && JSON.stringify(old.approvals || []) === JSON.stringify(now.approvals || []);
}

/** HH:MM:SS, local. */
function clock(d) {
  return d.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });
}

function startStream() {
  state.follower?.stop();
  let downSince = null;
  const follower = new EventFollower({
    key: session.key,
    types: 'action.*,grant_request.*,grant.*,plan.*',
    onEvent,
    onOpen: async (first) => {
      // Every (re)connection resynchronises the queue from the list
      // endpoint: the stream holds what happens from now on. So does the
      // view shown (History, an action) after a break.
      await loadQueue({ resync: true }).catch(fail);
      if (!first) resyncView();
    },
    onReset: () => {
      state.actions.clear();
      state.requests.clear();
      state.plans.clear();
      loadQueue().catch(fail);
      resyncView();
    },
    onState: (s, why) => {
      const el = $('stream-state');
      el.dataset.state = s;
      el.dataset.staleMs = String(follower.staleMs);
      if (s === 'live') {
        downSince = null;
        el.textContent = 'live';
        el.title = 'Receiving events as they happen';
      } else {
        downSince = downSince || new Date();
        el.textContent = `reconnecting since ${clock(downSince)}`;
        el.title = `${why || 'not connected'} (since ${downSince.toISOString()})`;
      }
    },
    onFatal: (e) => signOut(e.message),
  });
  state.follower = follower;
  follower.start();
}

function pendingCount() {
  return state.actions.size + state.requests.size + state.plans.size;
}

function updateTitle() {
  const n = state.me ? pendingCount() : 0;
  // A load cut short: more wait than the page holds.
  const shown = state.me && state.backlog ? `${n}+` : String(n);
  document.title = n ? `(${shown}) actiongate` : 'actiongate';
  $('pending-count').textContent = shown;
  // Worked down below the load's bound: read on from where it stopped.
  const last = state.backlog?.last;
  if (last && !state.refilling && [...state.actions.keys()].filter((id) => id <= last).length < MOST - 200) {
    state.refilling = true;
    setTimeout(() => loadQueue().catch(fail).finally(() => { state.refilling = false; }), 500);
  }
}

let drawPending = false;

/** The title at once; the queue redrawn once per frame however many
 * events arrived in it. */
function queueChanged() {
  updateTitle();
  if (currentView() !== 'queue' || drawPending) return;
  drawPending = true;
  requestAnimationFrame(() => {
    drawPending = false;
    if (state.me && currentView() === 'queue') renderQueue();
  });
}

function renderQueue() {
  queue.render();
}

// ---- decisions ----------------------------------------------------------

/** What the toast names: the action string, secrets masked, one line. */
function named(action) {
  const runs = typeof action.approved_detail === 'string' ? `tool:${action.tool}:${action.approved_detail}` : action.action_string;
  const t = visibleText(maskSecrets(runs));
  return t.length > 80 ? `${t.slice(0, 79)}…` : t;
}

/** What of an action decides what runs: two versions alike here run alike. */
function runs(a) {
  return JSON.stringify([a.action_string, a.detail ?? null, a.params ?? null, Boolean(a.edited), a.approved_detail ?? null, a.approved_params ?? null]);
}

/** Whether the action as it is now runs something other than `shown`
 * (edited by someone else since it was drawn). */
function changedSince(shown) {
  const now = state.actions.get(shown.id);
  return Boolean(now) && now !== shown && runs(now) !== runs(shown);
}

/** Sends one approval of `action` as it was shown; a card that needs more
 * approvals stays. */
async function sendApprove(action) {
  if (changedSince(action)) {
    throw new Error(`Not approved: ${named(action)} was edited by someone else while you decided; read it again.`);
  }
  // The daemon refuses it too if an edit lands after this check.
  const after = await decide(`/v1/actions/${enc(action.id)}/approve`, { seen: action.edited ? 'edited' : 'asked' });
  if (after && after.status === 'pending') {
    state.actions.set(action.id, after);
    notice(`Approval recorded: ${(after.approvals || []).length} of ${after.approvals_required || 1}.`);
    return;
  }
  removeAction(action.id);
}

/** Opens the fields of the queue card of `id` not drawn yet, every value
 * masked by its key name (the agent names its params: a name must not
 * hide what runs), then every collapsed one (a long value, title, summary,
 * command or diff: each has its "show more"); whether there was one. */
function revealCollapsed(id) {
  const el = document.querySelector(`#queue > .card[data-id="${CSS.escape(id)}"]`);
  if (!el) return false;
  // Fields not drawn yet first: they may hold masked or long values.
  const fields = [...el.querySelectorAll('button.more-fields[aria-expanded="false"]')];
  for (const b of fields) b.click();
  const masks = [...el.querySelectorAll('button.reveal-key[aria-pressed="false"]')];
  for (const b of masks) b.click();
  // Opened only now: a value revealed above may be long.
  const more = [...el.querySelectorAll('button.more[aria-expanded="false"]')];
  for (const b of more) b.click();
  return fields.length + masks.length + more.length > 0;
}

/** Approve, after the undo window. A card with a value collapsed behind
 * "show more" (whose tail may be what matters) or masked by its key name
 * is first shown whole: the operator approves what they could read. */
function approve(action) {
  if (revealCollapsed(action.id)) {
    notice('Shown in full: read it all, then approve again.');
    return;
  }
  queue.hold([action.id], `Approved ${named(action)}`, () => sendApprove(action));
}

/** Sends `one(item)` for each item; the failures are reported together. */
async function each(items, one) {
  const failed = [];
  for (const it of items) {
    try { await one(it); } catch (e) { failed.push(`${it.id}: ${e.message || e}`); }
  }
  if (failed.length) throw new Error(`${failed.length} of ${items.length} failed: ${failed.join('; ')}`);
}

function approveMany(actions) {
  queue.hold(actions.map((a) => a.id), `Approved ${actions.length} items`, () => each(actions, sendApprove));
}

async function sendDeny(it, reason) {
  if (it.a) {
    await decide(`/v1/actions/${enc(it.id)}/deny`, reason ? { reason } : {});
    removeAction(it.id);
  } else {
    await decide(`/v1/grant-requests/${enc(it.id)}/deny`, reason ? { reason } : {});
    state.gone.add(it.id);
    state.requests.delete(it.id);
  }
}

function denyMany(items) {
  openDenyDialog(`${items.length} selected items`, async (reason) => {
    queue.clearSelection();
    queue.hold(items.map((i) => i.id), `Denied ${items.length} items`, () => each(items, (i) => sendDeny(i, reason)));
  });
}

/** A plan approved (every step, or `steps`) or denied, after the undo window. */
function approvePlan(plan, steps) {
  if (revealCollapsed(plan.id)) {
    notice('Shown in full: read it all, then approve again.');
    return;
  }
  const what = steps ? `Approved steps ${steps.join(', ')} of a plan of ${plan.steps.length}` : `Approved a plan of ${plan.steps.length} steps`;
  queue.hold([plan.id], what, async () => {
    const done = await decide(`/v1/plans/${enc(plan.id)}/approve`, steps ? { steps } : {});
    const asks = (done.steps || []).flatMap((s, i) => (s.asks ? [`step ${i}: ${maskSecrets(s.asks)}`] : []));
    if (asks.length) notice(`Not granted by the plan, still asked when run: ${asks.join('; ')}`);
    state.gone.add(plan.id);
    state.plans.delete(plan.id);
  });
}

function denyPlan(plan) {
  queue.hold([plan.id], `Denied a plan of ${plan.steps.length} steps`, async () => {
    await decide(`/v1/plans/${enc(plan.id)}/deny`, {});
    state.gone.add(plan.id);
    state.plans.delete(plan.id);
  });
}

function removeAction(id) {
  state.gone.add(id);
  state.actions.delete(id);
  queueChanged();
}

let dialogSubmit = null;

function setupDialogs() {
  // A dialog closed over the queue: the focus goes back to a card.
  for (const d of document.querySelectorAll('dialog')) {
    d.addEventListener('close', () => { if (state.me && currentView() === 'queue') renderQueue(); });
  }
  const grant = $('grant-dialog');
  $('grant-cancel').addEventListener('click', () => grant.close());
  $('grant-custom').addEventListener('focus', () => {
    grant.querySelector('input[name=expires][value=custom]').checked = true;
  });
  $('grant-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    $('grant-error').textContent = '';
    $('grant-confirm').disabled = true;
    try {
      await dialogSubmit();
      grant.close();
    } catch (err) {
      $('grant-error').textContent = err.message || String(err);
    } finally {
      $('grant-confirm').disabled = false;
    }
  });
  const edit = $('edit-dialog');
  $('edit-cancel').addEventListener('click', () => edit.close());
  $('edit-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    $('edit-error').textContent = '';
    $('edit-confirm').disabled = true;
    try {
      await dialogSubmit($('edit-text').value);
      edit.close();
    } catch (err) {
      $('edit-error').textContent = err.message || String(err);
    } finally {
      $('edit-confirm').disabled = false;
    }
  });
  const deny = $('deny-dialog');
  $('deny-cancel').addEventListener('click', () => deny.close());
  $('deny-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    $('deny-error').textContent = '';
    $('deny-confirm').disabled = true;
    try {
      await dialogSubmit($('deny-reason').value.trim());
      deny.close();
    } catch (err) {
      $('deny-error').textContent = err.message || String(err);
    } finally {
      $('deny-confirm').disabled = false;
    }
  });
}

function expiryValue() {
  const choice = $('grant-dialog').querySelector('input[name=expires]:checked').value;
  if (choice !== 'custom') return choice;
  const v = $('grant-custom').value.trim();
  if (!v) throw new Error('Enter a custom expiry, e.g. 30m, 2d or an RFC 3339 time.');
  return v;
}

/** Scope inputs, one per key; a value that was not a string is read as JSON. */
function scopeInputs(scope) {
  const fs = $('grant-scope');
  fs.replaceChildren(h('legend', {}, 'Scope'));
  const keys = Object.keys(scope || {});
  keys.forEach((k, i) => {
    const v = scope[k];
    const id = `scope-${i}`;
    const text = typeof v === 'string' ? v : JSON.stringify(v);
    // A text field draws hidden characters as nothing (or obeys them) and
    // a look-alike letter as the letter it copies: what the agent asked for
    // is also spelled out with them named.
    const hidden = visibleText(text) !== text || lookalikes(text).size > 0;
    fs.append(h('div', { class: 'field' },
      h('label', { for: id }, visible(k)),
      h('input', { id, name: k, value: text, dataset: { json: typeof v !== 'string' ? '1' : '' }, spellcheck: 'false', 'aria-describedby': hidden ? `${id}-hidden` : null }),
      hidden ? h('p', { class: 'hint vis', id: `${id}-hidden` }, 'Holds hidden characters or letters of mixed scripts: ', visible(text)) : null));
  });
  if (!keys.length) fs.append(h('p', { class: 'muted' }, 'This permission has no scope keys: it covers every use.'));
  fs.append(h('p', { class: 'hint' }, 'Globs allowed: * matches anything, e.g. src/*.'));
  return () => {
    const out = {};
    for (const input of fs.querySelectorAll('input')) {
      const raw = input.value;
      if (input.dataset.json) {
        try { out[input.name] = JSON.parse(raw); } catch { throw new Error(`${input.name}: not a JSON value`); }
      } else out[input.name] = raw;
    }
    return out;
  };
}

function openGrantRequest(gr) {
  const dialog = $('grant-dialog');
  $('grant-title').textContent = 'Approve grant request';
  $('grant-what').textContent = `${gr.handler} · ${gr.permission} for ${gr.agent}; may only be narrowed`;
  const read = scopeInputs(gr.scope);
  $('grant-agent').hidden = true;
  $('grant-limits').hidden = true;
  $('grant-preview').hidden = true;
  dialog.oninput = null;
  dialog.onchange = null;
  const asked = gr.expires || '1h';
  const preset = dialog.querySelector(`input[name=expires][value="${CSS.escape(asked)}"]`);
  if (preset) {
    preset.checked = true;
    $('grant-custom').value = '';
  } else {
    dialog.querySelector('input[name=expires][value=custom]').checked = true;
    $('grant-custom').value = asked;
  }
  $('grant-error').textContent = '';
  $('grant-confirm').textContent = 'Approve';
  dialogSubmit = async () => {
    const [scope, expires, path] = [read(), expiryValue(), `/v1/grant-requests/${enc(gr.id)}/approve`];
    // As asked, it is sent bare: the daemon knows that approval sent again.
    const asAsked = JSON.stringify(scope) === JSON.stringify(gr.scope) && expires === gr.expires;
    await (asAsked ? decide(path, {}) : api('POST', path, { scope, expires }));
    state.gone.add(gr.id);
    state.requests.delete(gr.id);
    queueChanged();
    notice('Grant request approved.');
  };
  dialog.showModal();
}

/** `what` is text or nodes (an action string made visible). */
function openDenyDialog(what, submit) {
  $('deny-what').replaceChildren(...[].concat(what));
  $('deny-reason').value = '';
  $('deny-error').textContent = '';
  dialogSubmit = submit;
  $('deny-dialog').showModal();
}

function openDeny(action) {
  const what = [...[].concat(guarded('code', { class: 'action-string vis' }, action.action_string)), ` (agent ${action.agent})`];
  openDenyDialog(what, async (reason) => {
    queue.hold([action.id], `Denied ${named(action)}`, () => sendDeny({ id: action.id, a: action }, reason));
  });
}

function openDenyRequest(gr) {
  openDenyDialog(`${gr.handler} · ${gr.permission} for ${gr.agent}`, async (reason) => {
    queue.hold([gr.id], `Denied grant request ${gr.handler} · ${gr.permission}`, () => sendDeny({ id: gr.id, r: gr }, reason));
  });
}

// ---- routing ------------------------------------------------------------

function currentView() {
  const m = location.hash.match(/^#\/([a-z]+)/);
  return m ? m[1] : 'queue';
}

const ctx = {
  openGrant: (action) => openRemember(action, remember), openGrantRequest, openDeny, openDenyRequest,
  openEdit: (action) => openEdit(action, editing), approve, approvePlan, denyPlan, fail, notice,
  key: () => session.key,
  me: () => state.me,
  refresh: () => route(),
  rerender: () => route(),
  onEvent: (fn, signal) => {
    viewListeners.add(fn);
    signal.addEventListener('abort', () => viewListeners.delete(fn), { once: true });
  },
  onResync: (fn, signal) => {
    resyncListeners.add(fn);
    signal.addEventListener('abort', () => resyncListeners.delete(fn), { once: true });
  },
};

/** Reads `whoami` again: an admin may have added the caller to a person or
 * a group since sign-in, which changes what its cards offer. */
async function refreshMe() {
  const key = session.key;
  try {
    const me = await api('GET', '/v1/whoami', undefined, key);
    if (session.key !== key || !state.me) return;
    if (JSON.stringify(me) !== JSON.stringify(state.me)) {
      state.me = me;
      queue.redraw();
    }
  } catch {
    // Kept as it was: the view below reports what is wrong.
  }
}

async function route() {
  if (!state.me) return;
  await refreshMe();
  if (!state.me) return;
  state.viewAbort?.abort();
  const abort = new AbortController();
  state.viewAbort = abort;
  const view = currentView();
  for (const a of document.querySelectorAll('#nav a')) {
    if (a.dataset.view === view || (view === 'actions' && a.dataset.view === 'history')) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  for (const n of document.querySelectorAll('#errors .notice')) n.remove();
  const root = $('view');
  const [, query = ''] = location.hash.split('?');
  try {
    if (view === 'grants') {
      await renderGrants(root, ctx, abort.signal);
    } else if (view === 'history') {
      await renderHistory(root, ctx, new URLSearchParams(query), abort.signal);
    } else if (view === 'agents') {
      await renderAgents(root, ctx, new URLSearchParams(query), abort.signal);
    } else if (view === 'sessions') {
      await renderSessions(root, ctx, new URLSearchParams(query), abort.signal);
    } else if (view === 'actions') {
      const id = decodeURIComponent(location.hash.slice('#/actions/'.length).split('?')[0]);
      await renderAction(root, ctx, id, abort.signal);
    } else {
      root.replaceChildren();
      renderQueue();
    }
  } catch (e) {
    if (!abort.signal.aborted) fail(e);
  }
}

/** What the "Approve and remember" dialog needs from here. */
const remember = {
  setSubmit: (fn) => { dialogSubmit = fn; },
  scopeInputs: (scope) => scopeInputs(scope),
  expiryValue: () => expiryValue(),
  api, enc, notice,
  removeAction: (id) => removeAction(id),
  changedSince: (action) => changedSince(action),
  pending: () => [...state.actions.values()],
};

/** What the "Edit & approve" dialog needs from here. */
const editing = {
  setSubmit: (fn) => { dialogSubmit = fn; },
  api, enc,
  settled: (id, after) => {
    if (after && after.status === 'pending') {
      state.actions.set(id, after);
      queueChanged();
    } else {
      removeAction(id);
    }
  },
};

const queue = createQueue({
  state, ctx, fail, notice, approveMany, denyMany, runs, revealCollapsed,
  queueChanged: () => queueChanged(),
  isQueue: () => Boolean(state.me) && currentView() === 'queue' && !$('view').hidden,
});

// ---- start --------------------------------------------------------------

function tick() {
  const now = Date.now();
  for (const el of document.querySelectorAll('[data-deadline]')) {
    const text = countdown(el.dataset.deadline, now);
    el.textContent = el.dataset.prefix === '' ? text : `expires ${text}`;
  }
  for (const el of document.querySelectorAll('[data-since]')) el.textContent = `queued ${countdown(el.dataset.since, now)}`;
}

function init() {
  setupDialogs();
  $('sign-in-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    $('sign-in-error').textContent = '';
    const key = $('key').value.trim();
    try {
      await signIn(key);
    } catch (err) {
      $('sign-in-error').textContent = err.message || String(err);
    }
  });
  $('sign-out').addEventListener('click', () => signOut());
  showNotifyState($('notify'));
  $('notify').addEventListener('click', () => toggleNotify($('notify')).catch(fail));
  window.addEventListener('hashchange', route);
  setInterval(tick, 1000);
  const saved = session.key;
  if (saved) {
    signIn(saved).catch((e) => signOut(e.message));
  } else {
    signOut();
  }
}

init();
