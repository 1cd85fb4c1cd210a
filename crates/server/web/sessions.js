// Sessions (docs/sessions.md): the list (agent, runtime, status, last seen,
// counts of its actions, tainted by what), one session's actions, and
// "End session" (revokes its grants). Also the warning card of a run
// nobody decided (`action.undecided`), which has no buttons.

import { api, enc } from './api.js';
import { h, when, guarded, visible } from './dom.js';
import { maskSecrets } from './secrets.js';
import { displayOf } from './cards.js';

/** Who ended a session: idle past the timeout, or a key (you, for yours). */
function endedBy(s, ctx) {
  if (!s.ended_by) return '';
  if (s.ended_by === 'idle') return ', idle';
  const me = ctx.me && ctx.me();
  return me && s.ended_by === `key:${me.key_id}` ? ', by you' : `, by ${s.ended_by}`;
}

/** "3 total: 2 completed, 1 denied". */
export function countsText(counts) {
  const c = counts || {};
  const parts = Object.entries(c).filter(([k, v]) => k !== 'total' && v).map(([k, v]) => `${v} ${k}`);
  return `${c.total ?? 0} total${parts.length ? `: ${parts.join(', ')}` : ''}`;
}

function taintText(s) {
  if (!s.tainted_by) return 'no';
  return s.taint_action ? `by ${s.tainted_by}: ${s.taint_action}` : `by ${s.tainted_by}`;
}

function endButton(s, ctx) {
  if (s.status !== 'active') return null;
  return h('button', { type: 'button', class: 'danger small end-session', 'aria-label': `End session ${s.id}`, onclick: async (e) => {
    const b = e.currentTarget;
    b.disabled = true;
    try {
      await api('POST', `/v1/sessions/${enc(s.id)}/end`);
      ctx.notice(`Session ${s.id} ended: its grants are revoked.`);
      await ctx.refresh();
    } catch (err) { ctx.fail(err); b.disabled = false; }
  } }, 'End session');
}

function sessionRow(s, ctx) {
  return h('tr', { dataset: { id: s.id } },
    h('td', { 'data-label': 'Session' }, h('a', { href: `#/sessions?id=${enc(s.id)}`, class: 'vis' }, visible(s.id)),
      s.runtime ? h('div', { class: 'muted' }, visible(s.runtime)) : null),
    h('td', { 'data-label': 'Agent' }, s.agent),
    h('td', { 'data-label': 'Status' }, h('span', { class: `badge s-${s.status}` }, s.status)),
    h('td', { 'data-label': 'Last seen' }, when(s.last_seen)),
    h('td', { 'data-label': 'Actions' }, countsText(s.actions)),
    h('td', { 'data-label': 'Tainted', class: 'vis' }, visible(maskSecrets(taintText(s)))),
    h('td', {}, endButton(s, ctx)));
}

/** Sessions on one page of the list (newest begun first); More reads the next. */
const PAGE = 100;

/** `#/sessions` lists sessions, newest first, filtered by status and agent,
 * a page at a time; `#/sessions?id=S` shows one and its actions. */
export async function renderSessions(root, ctx, params, signal) {
  const id = params.get('id');
  if (id) return renderSession(root, ctx, id, signal);
  const status = params.get('status') || '';
  const agent = params.get('agent') || '';
  const form = h('form', { class: 'filters', id: 'sessions-filters' },
    h('label', {}, 'Status ', h('select', { name: 'status' },
      h('option', { value: '' }, 'any'),
      ['active', 'ended'].map((s) => h('option', { value: s, selected: s === status }, s)))),
    h('label', {}, 'Agent ', h('input', { name: 'agent', value: agent, placeholder: 'any', size: 12 })),
    h('button', { type: 'submit' }, 'Filter'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v) q.set(k, v);
    location.hash = `#/sessions?${q}`;
  });
  const fetchPage = (after) => {
    const q = new URLSearchParams({ limit: String(PAGE) });
    if (status) q.set('status', status);
    if (agent) q.set('agent', agent);
    // Placed by when the last one began too: found if it is deleted meanwhile.
    if (after) { q.set('after', after.id); q.set('began', after.first_seen); }
    return api('GET', `/v1/sessions?${q}`);
  };
  const list = await fetchPage(null);
  if (signal.aborted) return;
  const tbody = h('tbody', {}, list.map((s) => sessionRow(s, ctx)));
  let last = list.length ? list[list.length - 1] : null;
  const more = h('button', { type: 'button', id: 'sessions-more', hidden: list.length < PAGE }, 'More');
  more.addEventListener('click', async () => {
    more.disabled = true;
    try {
      const page = await fetchPage(last);
      if (signal.aborted) return;
      tbody.append(...page.map((s) => sessionRow(s, ctx)));
      if (page.length) last = page[page.length - 1];
      more.hidden = page.length < PAGE;
    } catch (err) { ctx.fail(err); }
    more.disabled = false;
  });
  const filtered = status || agent;
  root.replaceChildren(
    h('h1', {}, 'Sessions'),
    form,
    list.length
      ? h('table', { class: 'grid', id: 'sessions-table', 'data-filter': `${status}/${agent}` },
        h('thead', {}, h('tr', {}, ['Session', 'Agent', 'Status', 'Last seen', 'Actions', 'Tainted', ''].map((t) => h('th', { scope: 'col' }, t)))),
        tbody)
      : h('p', { class: 'empty' }, filtered ? 'No sessions match the filter.' : 'No sessions yet.'),
    more);
}

/** A session's actions read at a time (newest first); More reads on. */
const ACTIONS_PAGE = 200;

function sessionActionRow(a) {
  return h('tr', { dataset: { id: a.id } },
    h('td', { 'data-label': 'Action' }, h('a', { href: `#/actions/${enc(a.id)}`, class: 'vis' }, visible(maskSecrets(displayOf(a).title))),
      h('div', {}, guarded('code', { class: 'muted vis' }, a.action_string))),
    h('td', { 'data-label': 'Status' }, h('span', { class: `badge s-${a.status}` }, a.status)),
    h('td', { 'data-label': 'Requested' }, when(a.created_at)));
}

async function renderSession(root, ctx, id, signal) {
  const actionsPage = (cursor) => {
    const q = new URLSearchParams({ session: id, limit: String(ACTIONS_PAGE) });
    if (cursor) q.set('cursor', cursor);
    return api('GET', `/v1/actions?${q}`);
  };
  const [s, page] = await Promise.all([api('GET', `/v1/sessions/${enc(id)}`), actionsPage(null)]);
  if (signal.aborted) return;
  const tbody = h('tbody', {}, page.items.map(sessionActionRow));
  let cursor = page.next_cursor || null;
  const more = h('button', { type: 'button', id: 'session-actions-more', hidden: !cursor }, 'More');
  more.addEventListener('click', async () => {
    more.disabled = true;
    try {
      const next = await actionsPage(cursor);
      if (signal.aborted) return;
      tbody.append(...next.items.map(sessionActionRow));
      cursor = next.next_cursor || null;
      more.hidden = !cursor;
    } catch (err) { ctx.fail(err); }
    more.disabled = false;
  });
  root.replaceChildren(
    h('p', {}, h('a', { href: '#/sessions', class: 'link' }, '← Sessions')),
    h('h1', { class: 'vis' }, 'Session ', visible(s.id)),
    h('dl', { class: 'fields', id: 'session-fields' },
      h('dt', {}, 'Agent'), h('dd', {}, s.agent),
      h('dt', {}, 'Runtime'), h('dd', {}, visible(s.runtime || '—')),
      h('dt', {}, 'Status'), h('dd', {}, s.status, s.ended_at ? ` (${when(s.ended_at)}${endedBy(s, ctx)})` : ''),
      h('dt', {}, 'First seen'), h('dd', {}, when(s.first_seen)),
      h('dt', {}, 'Last seen'), h('dd', {}, when(s.last_seen)),
      h('dt', {}, 'Actions'), h('dd', {}, countsText(s.actions)),
      h('dt', {}, 'Tainted'), h('dd', { class: 'vis' }, visible(maskSecrets(taintText(s))))),
    h('div', { class: 'buttons' }, endButton(s, ctx)),
    h('h2', {}, 'Its actions'),
    page.items.length
      ? h('table', { class: 'grid', id: 'session-actions' },
        h('thead', {}, h('tr', {}, ['Action', 'Status', 'Requested'].map((t) => h('th', { scope: 'col' }, t)))),
        tbody)
      : h('p', { class: 'empty' }, 'No actions in this session.'),
    more);
}

/** Adds an `action.undecided` event to `byAgent`: one entry per agent,
 * the latest run shown with how many there were, so that one agent
 * reporting many runs cannot bury the queue. Whether it is the agent's
 * first (to announce). An event seen before changes nothing. */
export function addUndecided(byAgent, ev) {
  const key = `undecided:${(ev.data || {}).agent || ev.agent}`;
  const prev = byAgent.get(key);
  if (prev && prev.seen.has(ev.id)) return false;
  const seen = prev ? prev.seen : new Set();
  seen.add(ev.id);
  const latest = prev && prev.at > ev.at ? prev : ev;
  byAgent.set(key, { ...latest, id: key, seen });
  return !prev;
}

/** Runs the gate never decided, reported by a runtime for one agent (the
 * latest shown, with their count): a warning with no buttons (there is
 * nothing left to decide). */
export function undecidedCard(ev) {
  const d = ev.data || {};
  const n = ev.seen ? ev.seen.size : 1;
  const label = `t-${ev.id}`;
  return h('article', { class: 'card warning undecided', tabindex: '-1', dataset: { id: ev.id, kind: 'undecided' }, 'aria-labelledby': label },
    h('div', { class: 'card-head' },
      h('h3', { class: 'title', id: label }, n > 1 ? `${n} runs without a decision; the latest:` : 'Ran without a decision'),
      h('span', { class: 'badge kind' }, 'warning')),
    // Masked with no "show secret": this card has no buttons.
    h('div', { class: 'command' }, h('code', { class: 'action-string vis' }, visible(maskSecrets(d.action_string || `${d.tool}: ${d.detail}`)))),
    h('p', { class: 'meta' }, `agent ${d.agent || ev.agent}`, d.session ? [' · session ', visible(d.session)] : '',
      d.runtime ? [' · ', visible(d.runtime)] : '', ` · reported ${when(ev.at)}`),
    h('p', { class: 'muted' }, 'The runtime reported this run, and no allow or approval covers it.'));
}
