// Rendering of the grants table, the history list and an action's page
// (the queue's cards are in cards.js). Every view shows API errors through `ctx.fail`.

import { api, apiPage, enc } from './api.js';
import { h, countdown, when, masked, visible, guarded } from './dom.js';
import { maskSecrets } from './secrets.js';
import { displayOf, fieldList, diffBlock, paramsDisclosure, riskBadge } from './cards.js';
import { ruleText } from './risk.js';
import { readSse } from './stream.js';

const json = (v) => JSON.stringify(v, null, 2);

/** Who decided, with the operator's own key shown as "you". */
function who(ctx, decidedBy) {
  const me = ctx.me();
  return me && decidedBy === `key:${me.key_id}` ? `you (${decidedBy})` : decidedBy;
}

function statusBadge(status) {
  return h('span', { class: `badge s-${status}` }, status);
}

function scopeText(scope) {
  if (!scope || !Object.keys(scope).length) return 'any scope';
  return Object.entries(scope).map(([k, v]) => `${k} = ${typeof v === 'string' ? v : JSON.stringify(v)}`).join(', ');
}

/** Who decided, and by which rule when the policy (or a grant) did. */
function decidedBy(ctx, a) {
  const rule = ruleText(a.decision?.rule);
  const by = a.decided_by ? who(ctx, a.decided_by) : null;
  if (!by && !rule) return '—';
  return h('span', { class: 'decided' }, by || 'not yet',
    rule && (!a.decided_by || a.decided_by === 'policy' || a.decided_by.startsWith('grant:'))
      ? [h('br'), h('span', { class: 'muted rule' }, `rule: ${rule}`)]
      : rule ? [h('br'), h('span', { class: 'muted rule' }, `asked by ${rule}`)] : null);
}

/** Most active grants the table shows (the newest). */
export const MOST_GRANTS = 5000;

/** The active grants, newest first, a page at a time: `{ list, complete }`.
 * A page cut short for its size (large scopes) links the next one. */
async function activeGrants(signal, pageSize = 500) {
  const list = [];
  // A view left (or reloaded) meanwhile reads no further pages.
  while (list.length < MOST_GRANTS && !signal.aborted) {
    const q = new URLSearchParams({ active: 'true', limit: String(pageSize) });
    if (list.length) q.set('after', list[list.length - 1].id);
    const { items: page, next } = await apiPage(`/v1/grants?${q}`);
    list.push(...page);
    if (!page.length || (page.length < pageSize && !next)) return { list, complete: true };
  }
  return { list, complete: false };
}

/** Active grants, with revoke. */
export async function renderGrants(root, ctx, signal) {
  const { list, complete } = await activeGrants(signal);
  // The operator went elsewhere while this loaded: leave their view alone.
  if (signal.aborted) return;
  const rows = list.map((g) => {
    const what = g.handler
      ? [h('strong', {}, `${g.handler} · ${g.permission}`), h('div', { class: 'muted vis' }, visible(maskSecrets(scopeText(g.scope))))]
      : [h('strong', {}, `tool ${g.tool}`), h('div', {}, h('code', { class: 'vis' }, visible(g.pattern)))];
    return h('tr', { dataset: { id: g.id } },
      h('td', { 'data-label': 'Permission' }, what),
      h('td', { 'data-label': 'Agent' }, g.agent || 'any agent'),
      h('td', { 'data-label': 'Expires' }, g.expires_at
        ? h('span', { dataset: { deadline: g.expires_at, prefix: '' }, title: when(g.expires_at) }, countdown(g.expires_at))
        : 'never'),
      h('td', { 'data-label': 'Granted' }, `${who(ctx, g.granted_by)}, ${when(g.granted_at)}`),
      h('td', {}, h('button', { type: 'button', class: 'danger small', 'aria-label': `Revoke grant ${g.id}`, onclick: async (e) => {
        e.currentTarget.disabled = true;
        try {
          await api('DELETE', `/v1/grants/${enc(g.id)}`);
          ctx.notice('Grant revoked.');
          await ctx.refresh();
        } catch (err) { ctx.fail(err); e.currentTarget.disabled = false; }
      } }, 'Revoke')));
  });
  root.replaceChildren(...[
    h('h1', {}, 'Active grants'),
    complete ? null : h('p', { class: 'muted', id: 'grants-cut' }, `The newest ${MOST_GRANTS} of more active grants.`),
    list.length
      ? h('table', { class: 'grid', id: 'grants-table' },
        h('thead', {}, h('tr', {}, ['Permission', 'Agent', 'Expires', 'Granted by', ''].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', {}, rows))
      : h('p', { class: 'empty' }, 'No active grants.'),
  ].filter(Boolean));
}

const STATUSES = ['pending', 'approved', 'running', 'completed', 'failed', 'denied', 'expired', 'cancelled'];

/** Settled (and other) actions with filters; `params` is the route's query. */
export async function renderHistory(root, ctx, params, signal) {
  const status = params.get('status') || '';
  const agent = params.get('agent') || '';
  const handler = params.get('handler') || '';
  const form = h('form', { class: 'filters', id: 'history-filters' },
    h('label', {}, 'Status ', h('select', { name: 'status' },
      h('option', { value: '' }, 'any'),
      STATUSES.map((s) => h('option', { value: s, selected: s === status }, s)))),
    h('label', {}, 'Agent ', h('input', { name: 'agent', value: agent, placeholder: 'any', size: 12 })),
    h('label', {}, 'Handler or tool ', h('input', { name: 'handler', value: handler, placeholder: 'any', size: 12 })),
    h('button', { type: 'submit' }, 'Filter'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v) q.set(k, v);
    location.hash = `#/history?${q}`;
  });
  const tbody = h('tbody');
  const more = h('button', { type: 'button', hidden: true }, 'More');
  root.replaceChildren(h('h1', {}, 'History'), form,
    h('table', { class: 'grid', id: 'history-table' },
      h('thead', {}, h('tr', {}, ['Action', 'Agent', 'Status', 'Requested', 'Decided by'].map((t) => h('th', { scope: 'col' }, t)))),
      tbody),
    more);
  let cursor = null;
  // Live: every action event updates its row in place, or adds a new
  // action that matches the filters at the top (newest first, as the list
  // endpoint orders them); a row whose action no longer matches leaves.
  // The scroll position stays on what the operator was reading.
  const matches = (a) => (!status || a.status === status) && (!agent || a.agent === agent)
    && (!handler || a.tool === handler);
  ctx.onEvent?.((ev) => {
    const a = ev.data;
    if (!ev.type?.startsWith('action.') || !a || typeof a !== 'object' || !a.id || !a.status) return;
    const old = [...tbody.children].find((tr) => tr.dataset.id === a.id);
    if (old) {
      if (matches(a)) old.replaceWith(historyRow(ctx, a));
      else old.remove();
      return;
    }
    if (!matches(a)) return;
    // Only newer than the newest row shown: older ones are the pages below.
    const first = tbody.querySelector('tr[data-id]');
    if (first && a.id < first.dataset.id) return;
    const y = window.scrollY;
    const before = document.documentElement.scrollHeight;
    tbody.querySelector('td.empty')?.parentElement.remove();
    tbody.prepend(historyRow(ctx, a));
    if (y > 0) window.scrollTo(0, y + document.documentElement.scrollHeight - before);
  }, signal);
  /** A page of the list endpoint under the filters, from `after`. */
  const fetchPage = (after) => {
    const q = new URLSearchParams({ limit: '50' });
    if (status) q.set('status', status);
    if (agent) q.set('agent', agent);
    if (handler) q.set('tool', handler);
    if (after) q.set('cursor', after);
    return api('GET', `/v1/actions?${q}`);
  };
  const load = async () => {
    const page = await fetchPage(cursor);
    if (signal.aborted) return;
    const shown = new Set([...tbody.children].map((tr) => tr.dataset.id));
    for (const a of page.items) if (!shown.has(a.id)) tbody.append(historyRow(ctx, a));
    if (!tbody.children.length) tbody.append(h('tr', {}, h('td', { colspan: 5, class: 'empty' }, 'No actions match.')));
    cursor = page.next_cursor || null;
    more.hidden = !cursor;
  };
  // After a break in the stream, events may have been missed: the first
  // page is read again and merged, keeping the pages below and the scroll.
  ctx.onResync?.(async () => {
    const page = await fetchPage(null);
    if (signal.aborted) return;
    mergeFirstPage(ctx, tbody, page.items);
    if (!cursor && page.next_cursor) {
      cursor = page.next_cursor;
      more.hidden = false;
    }
  }, signal);
  more.addEventListener('click', () => load().catch(ctx.fail));
  await load();
}

/**
 * Merges `items` (the list endpoint's first page, newest first) into the
 * rows shown: a row it holds is redrawn, a newer action is added at the
 * top, and a row inside its range that it no longer holds (it stopped
 * matching the filters) leaves. Rows older than the page stay.
 */
function mergeFirstPage(ctx, tbody, items) {
  const y = window.scrollY;
  const before = document.documentElement.scrollHeight;
  const fresh = new Map(items.map((a) => [a.id, a]));
  const oldest = items.length ? items[items.length - 1].id : null;
  for (const tr of [...tbody.querySelectorAll('tr[data-id]')]) {
    const a = fresh.get(tr.dataset.id);
    if (a) {
      tr.replaceWith(historyRow(ctx, a));
      fresh.delete(a.id);
    } else if (oldest === null || tr.dataset.id >= oldest) {
      tr.remove();
    }
  }
  // What is left was not shown: placed by id (newest first), before the
  // first row older than it.
  for (const a of fresh.values()) {
    const next = [...tbody.querySelectorAll('tr[data-id]')].find((tr) => tr.dataset.id < a.id);
    if (next) next.before(historyRow(ctx, a));
    else tbody.append(historyRow(ctx, a));
  }
  const rows = tbody.querySelectorAll('tr[data-id]').length;
  const empty = tbody.querySelector('td.empty')?.parentElement;
  if (rows && empty) empty.remove();
  if (!rows && !empty) tbody.append(h('tr', {}, h('td', { colspan: 5, class: 'empty' }, 'No actions match.')));
  if (y > 0) window.scrollTo(0, y + document.documentElement.scrollHeight - before);
}

/** One History row. */
function historyRow(ctx, a) {
  return h('tr', { dataset: { id: a.id } },
    h('td', { 'data-label': 'Action' }, h('a', { href: `#/actions/${enc(a.id)}`, class: 'vis' }, visible(maskSecrets(displayOf(a).title))),
      h('div', {}, guarded('code', { class: 'muted vis' }, a.action_string))),
    h('td', { 'data-label': 'Agent' }, a.agent),
    h('td', { 'data-label': 'Status' }, statusBadge(a.status)),
    h('td', { 'data-label': 'Requested' }, when(a.created_at)),
    h('td', { 'data-label': 'Decided by' }, decidedBy(ctx, a)));
}

function eventLine(ev, ctx) {
  const d = ev.data || {};
  switch (ev.type) {
    case 'action.enqueued': return d.decision?.reason || '';
    case 'permission.needed': return d.permission ? `needs ${d.permission} (${scopeText(d.scope)})` : '';
    case 'action.approved': return d.decided_by ? `by ${who(ctx, d.decided_by)}` : '';
    case 'action.denied': return [d.decided_by && `by ${who(ctx, d.decided_by)}`, d.decision_note && `“${d.decision_note}”`].filter(Boolean).join(' · ');
    case 'action.started': return d.attempts?.length ? `attempt ${d.attempts.length}` : '';
    case 'action.failed': return d.outcome?.error || '';
    default: return '';
  }
}

/** One action: details, dispatch attempts, and its live timeline of events. */
export async function renderAction(root, ctx, id, signal) {
  const a = await api('GET', `/v1/actions/${enc(id)}`);
  if (signal.aborted) return;
  const d = displayOf(a);
  const timeline = h('ol', { class: 'timeline', id: 'timeline' });
  const attempts = a.attempts?.length
    ? h('table', { class: 'grid', id: 'attempts' },
      h('thead', {}, h('tr', {}, ['#', 'Started', 'HTTP', 'Took', 'Error'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, a.attempts.map((t) => h('tr', {},
        h('td', { 'data-label': '#' }, String(t.n)),
        h('td', { 'data-label': 'Started' }, when(t.at)),
        h('td', { 'data-label': 'HTTP' }, t.status_code ?? '—'),
        h('td', { 'data-label': 'Took' }, `${t.duration_ms} ms`),
        h('td', { 'data-label': 'Error', class: 'vis' }, visible(maskSecrets(t.error || '')))))))
    : h('p', { class: 'muted' }, a.handler ? 'No dispatch attempts yet.' : 'Decision-only: the agent runs it itself.');
  const outcome = a.outcome
    ? h('details', { class: 'raw', open: true }, h('summary', {}, `Outcome: ${a.outcome.status}`),
      h('pre', { class: 'params' }, visible(maskSecrets(json(masked(a.outcome.result ?? a.outcome.error ?? null))), { breaks: false })))
    : null;
  root.replaceChildren(
    h('p', {}, h('a', { href: '#/history', class: 'link' }, '← History')),
    h('article', { class: 'card wide', dataset: { id: a.id } },
      h('div', { class: 'card-head' }, h('h1', { class: 'title vis' }, visible(maskSecrets(d.title))), riskBadge(a), statusBadge(a.status)),
      d.summary ? guarded('p', { class: 'summary vis' }, d.summary) : null,
      h('dl', { class: 'fields' },
        h('dt', {}, 'Action'), h('dd', {}, guarded('code', { class: 'action-string vis' }, a.action_string)),
        h('dt', {}, 'Agent'), h('dd', {}, a.agent),
        a.session ? [h('dt', {}, 'Session'), h('dd', {}, h('a', { href: `#/sessions?id=${enc(a.session)}`, class: 'link vis', id: 'action-session' }, visible(a.session)),
          a.runtime ? [' (', visible(a.runtime), ')'] : '')] : null,
        a.reason ? [h('dt', {}, 'Reason'), h('dd', {}, visible(maskSecrets(a.reason)))] : null,
        h('dt', {}, 'Policy'), h('dd', {}, `${a.decision.result}: `, visible(maskSecrets(a.decision.reason)),
          ruleText(a.decision.rule) ? [h('br'), h('span', { class: 'muted rule' }, `rule: ${ruleText(a.decision.rule)}`)] : null),
        h('dt', {}, 'Requested'), h('dd', {}, when(a.created_at)),
        a.decided_by ? [h('dt', {}, 'Decided'), h('dd', {}, `${who(ctx, a.decided_by)}, ${when(a.decided_at)}`)] : null,
        a.decision_note ? [h('dt', {}, 'Note'), h('dd', {}, visible(maskSecrets(a.decision_note)))] : null,
),
      fieldList(d.fields),
      diffBlock(a),
      paramsDisclosure(a),
      outcome),
    h('h2', {}, 'Timeline'), timeline,
    h('h2', {}, 'Dispatch attempts'), attempts);
  // After a break in the page's stream this stream broke too: the action
  // and its timeline are read again.
  ctx.onResync?.(() => ctx.rerender(), signal);
  // The action's own stream: its history, then live events until it settles.
  const resp = await fetch(`/v1/actions/${enc(id)}/events`, {
    headers: { authorization: `Bearer ${ctx.key()}`, accept: 'text/event-stream' }, signal, cache: 'no-store',
  });
  if (!resp.ok || !resp.body) throw new Error(`the timeline could not be read (HTTP ${resp.status})`);
  let settledSeen = false;
  await readSse(resp.body, (m) => {
    let ev;
    try { ev = JSON.parse(m.data); } catch { return; }
    timeline.append(h('li', { dataset: { type: ev.type } },
      h('time', { datetime: ev.at }, when(ev.at)), ' ',
      h('span', { class: `ev ev-${ev.type.replace(/\W/g, '-')}` }, ev.type), ' ',
      h('span', { class: 'muted vis' }, visible(maskSecrets(eventLine(ev, ctx))))));
    if (/^action\.(completed|failed|denied|expired|cancelled)$/.test(ev.type)) settledSeen = true;
  }, signal);
  // Once it settled, show the final state (outcome, attempts) too.
  if (settledSeen && !signal.aborted && a.status !== 'completed' && a.status !== 'failed'
    && a.status !== 'denied' && a.status !== 'expired' && a.status !== 'cancelled') {
    ctx.rerender();
  }
}
