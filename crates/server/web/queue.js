// The queue view: sorted (deadline soonest first, or age), filtered by a
// search, drawn a page at a time so a thousand items draw at once, with
// selection and bulk decisions, keyboard shortcuts, and an undo window on
// every approve and deny (the decision is sent when the window closes, or
// at once with "Send now").

import { h } from './dom.js';
import { actionCard, grantRequestCard, displayOf, hidesValues, cannotDecide } from './cards.js';
import { planCard, stepText, pickedSteps } from './plans.js';
import { undecidedCard } from './sessions.js';

/** Cards drawn at first, and added by "show more". */
export const PAGE = 50;
/** How long a decision can be undone before it is sent, in ms. */
export const UNDO_MS = 5000;
/** How long a card the page focused by itself (the focused one left the
 * queue, or the queue opened) takes no decision key, in ms: long enough to
 * see what now has the focus. */
export const SETTLE_MS = 1000;

/** Orders queue items: 'deadline' (soonest first; none last), 'newest', 'oldest'. */
export function sorter(order) {
  const t = (iso) => (iso ? Date.parse(iso) : Infinity);
  // Times parsed once per item (ts, dl), not once per comparison.
  const at = (x) => x.ts ?? (x.ts = t(x.at));
  const dl = (x) => x.dl ?? (x.dl = t(x.deadline));
  const byId = (x, y) => (x.id < y.id ? -1 : x.id > y.id ? 1 : 0);
  if (order === 'newest') return (x, y) => at(y) - at(x) || byId(y, x);
  if (order === 'oldest') return (x, y) => at(x) - at(y) || byId(x, y);
  return (x, y) => (dl(x) - dl(y)) || (at(x) - at(y)) || byId(x, y);
}

/** What the filter searches in an item, by the item's object: worked out
 * once, not per item per keystroke (an item's display may hold thousands
 * of fields). A changed item is a new object. */
const searched = new WeakMap();

function searchText(item) {
  const o = item.a || item.r || item.p || item.u.data || {};
  let s = searched.get(o);
  if (!s) {
    s = {
      fields: { agent: o.agent, tool: o.tool || o.handler, handler: o.handler || '' },
      hay: [o.agent, o.tool, o.handler, o.action, o.permission, o.action_string, o.reason,
        item.a ? displayOf(item.a).title : '', item.p ? item.p.steps.map(stepText).join('\n') : '', item.kind].filter(Boolean).join('\n').toLowerCase(),
    };
    searched.set(o, s);
  }
  return s;
}

/** Whether `item` matches every word of `query`; `agent:x`, `tool:x`,
 * `handler:x` match that field only. */
export function matches(item, query) {
  const words = String(query || '').toLowerCase().split(/\s+/).filter(Boolean);
  if (!words.length) return true;
  const { fields, hay } = searchText(item);
  return words.every((w) => {
    const m = w.match(/^(agent|tool|handler):(.*)$/);
    if (m) return String(fields[m[1]] || '').toLowerCase().includes(m[2]);
    return hay.includes(w);
  });
}

/**
 * The queue. `app` gives: state ({actions, requests, gone}), ctx (the
 * cards' callbacks), api, enc, fail, notice, queueChanged, isQueue(),
 * runs(action) (what decides what it runs), revealCollapsed(id) (opens a
 * card's hidden values; whether there was one).
 */
export function createQueue(app) {
  const q = {
    order: 'deadline',
    query: '',
    limit: PAGE,
    selected: new Set(),
    ticked: new Map(), // id -> the item as it was when ticked: bulk approves that version
    held: new Map(), // id -> undo entry: hidden while its decision waits
    cards: new Map(), // id -> {obj, el}
    focusId: null,
    focusedOnce: false,
    // The card the page focused by itself, and when: the decision keys wait
    // SETTLE_MS on it unless the operator moves the focus themselves.
    auto: null,
    focusing: false, // while the page itself moves the focus
  };

  function items() {
    const all = [
      ...[...app.state.actions.values()].map((a) => ({ id: a.id, at: a.created_at, deadline: a.deadline, a, kind: 'action' })),
      ...[...app.state.requests.values()].map((r) => ({ id: r.id, at: r.created_at, deadline: r.deadline, r, kind: 'grant request' })),
      ...[...app.state.plans.values()].map((p) => ({ id: p.id, at: p.created_at, deadline: null, p, kind: 'plan' })),
      ...[...app.state.undecided.values()].map((u) => ({ id: u.id, at: u.at, deadline: null, u, kind: 'undecided' })),
    ].filter((i) => !q.held.has(i.id));
    return all.filter((i) => matches(i, q.query)).sort(sorter(q.order));
  }

  function cardFor(it) {
    const obj = it.a || it.r || it.p || it.u;
    const have = q.cards.get(it.id);
    if (have && have.obj === obj) return have.el;
    const el = it.a ? actionCard(it.a, app.ctx) : it.r ? grantRequestCard(it.r, app.ctx) : it.p ? planCard(it.p, app.ctx) : undecidedCard(it.u);
    // The item changed (an approval, an edit): its new card takes the old one's place.
    if (have?.el.isConnected) have.el.replaceWith(el);
    // A plan is decided on its own card (its steps ticked there): no bulk box.
    const box = el.querySelector('input.select');
    if (box) {
      box.checked = q.selected.has(it.id);
      box.addEventListener('change', () => {
        if (box.checked) {
          q.selected.add(it.id);
          q.ticked.set(it.id, obj);
          el.querySelector('.changed')?.remove();
        } else {
          q.selected.delete(it.id);
          q.ticked.delete(it.id);
        }
        bulkBar();
      });
    }
    el.addEventListener('focusin', () => {
      q.focusId = it.id;
      if (!q.focusing) q.auto = null;
    });
    // The operator's own click on the card the page focused says they
    // read it: the keys need not wait, unless the card is new enough to
    // have landed under the pointer as they clicked.
    el.addEventListener('pointerdown', () => {
      const drawn = q.cards.get(it.id)?.drawnAt ?? Date.now();
      if (q.auto?.id === it.id && Date.now() - drawn >= SETTLE_MS) q.auto = null;
    });
    q.cards.set(it.id, { obj, el, drawnAt: Date.now() });
    return el;
  }

  function toolbar() {
    const sort = h('select', { id: 'queue-sort', 'aria-label': 'Sort' },
      h('option', { value: 'deadline' }, 'Deadline, soonest first'),
      h('option', { value: 'newest' }, 'Newest first'),
      h('option', { value: 'oldest' }, 'Oldest first'));
    sort.value = q.order;
    sort.addEventListener('change', () => { q.order = sort.value; q.limit = PAGE; render(); });
    const search = h('input', { id: 'queue-search', type: 'search', 'aria-label': 'Filter the queue', placeholder: 'Filter: agent:x tool:x handler:x or any text  ( / )', value: q.query, spellcheck: 'false' });
    search.addEventListener('input', () => { q.query = search.value; q.limit = PAGE; render(); });
    search.addEventListener('keydown', (e) => {
      if (e.key === 'Escape' || e.key === 'Enter') { e.preventDefault(); focusAt(0); }
    });
    return h('div', { class: 'toolbar', id: 'queue-toolbar' },
      h('label', { class: 'search' }, search),
      h('label', { class: 'sort' }, 'Sort ', sort),
      h('button', { type: 'button', id: 'select-all', class: 'small', onclick: () => selectAllMatching() }, 'Select all matching'),
      h('button', { type: 'button', id: 'keys-help', class: 'small', title: 'Keyboard shortcuts', onclick: () => help() }, 'Keys (?)'));
  }

  function bulkBar() {
    const bar = document.getElementById('bulk');
    if (!bar) return;
    const n = q.selected.size;
    bar.hidden = n === 0;
    bar.replaceChildren(
      h('span', { id: 'bulk-count' }, `${n} selected`),
      h('button', { type: 'button', id: 'bulk-approve', class: 'primary small', onclick: () => bulkApprove() }, `Approve ${n}`),
      h('button', { type: 'button', id: 'bulk-deny', class: 'danger small', onclick: () => bulkDeny() }, `Deny ${n}…`),
      h('button', { type: 'button', id: 'bulk-clear', class: 'small', onclick: () => { clearSelection(); render(); } }, 'Clear selection'));
  }

  function clearSelection() {
    q.selected.clear();
    q.ticked.clear();
    for (const { el } of q.cards.values()) {
      const box = el.querySelector('input.select');
      if (box) box.checked = false;
    }
    bulkBar();
  }

  /** What a bulk decision may take: an action this caller can decide,
   * or a grant request (plans and undecided runs have their own cards). */
  function selectable(it) {
    return Boolean(it.r || (it.a && !cannotDecide(it.a, app.ctx.me())));
  }

  function selectAllMatching() {
    for (const it of items().filter(selectable)) {
      q.selected.add(it.id);
      if (!q.ticked.has(it.id)) q.ticked.set(it.id, it.a || it.r);
    }
    for (const [id, { el }] of q.cards) {
      const box = el.querySelector('input.select');
      if (box) box.checked = q.selected.has(id);
    }
    bulkBar();
  }

  function render() {
    const root = document.getElementById('view');
    let list = document.getElementById('queue');
    if (!list) {
      // Not aria-live: the countdowns tick every second; the count in the nav says what changed.
      list = h('div', { id: 'queue', class: 'queue' });
      root.replaceChildren(h('h1', {}, 'Waiting for you'), toolbar(),
        h('div', { id: 'bulk', class: 'bulk', role: 'region', 'aria-label': 'Selected items', hidden: true }),
        list, h('div', { id: 'queue-more' }));
      bulkBar();
    }
    const all = items();
    // Selections of items that left the queue are dropped.
    const present = new Set([...app.state.actions.keys(), ...app.state.requests.keys(), ...app.state.plans.keys(), ...app.state.undecided.keys()]);
    for (const id of q.selected) if (!present.has(id) || q.held.has(id)) q.selected.delete(id);
    for (const id of q.ticked.keys()) if (!q.selected.has(id)) q.ticked.delete(id);
    for (const id of q.cards.keys()) if (!present.has(id)) q.cards.delete(id);
    const shown = all.slice(0, q.limit);
    const want = new Set(shown.map((i) => i.id));
    const drawn = [...list.querySelectorAll(':scope > .card')];
    const had = q.focusId;
    // The focused card leaves: its neighbour where it was takes the focus,
    // not the first card (which an agent can make one it just sent).
    if (q.focusId && !want.has(q.focusId)) q.focusId = neighbour(drawn, q.focusId, want);
    for (const el of drawn) if (!want.has(el.dataset.id)) el.remove();
    let prev = null;
    for (const it of shown) {
      const el = cardFor(it);
      const next = prev ? prev.nextElementSibling : list.firstElementChild;
      if (next !== el) list.insertBefore(el, next);
      prev = el;
    }
    // Cards came, went or moved: noted for taps (the click guard below).
    const order = [...list.querySelectorAll(':scope > .card')].map((el) => el.dataset.id).join(' ');
    if (order !== drawn.map((el) => el.dataset.id).join(' ')) q.shiftedAt = performance.now();
    let empty = list.querySelector('.empty');
    const none = q.query ? 'Nothing matches the filter.' : 'Nothing is waiting for a decision.';
    if (!all.length && !empty) list.append(h('p', { class: 'empty' }, none));
    else if (all.length && empty) empty.remove();
    else if (empty) empty.textContent = none;
    const more = document.getElementById('queue-more');
    const left = all.length - shown.length;
    more.replaceChildren(left > 0
      ? h('button', { type: 'button', id: 'show-more', onclick: () => { q.limit += PAGE; render(); } }, `Show ${Math.min(PAGE, left)} more (${left} not shown)`)
      : [],
    app.state.backlog
      ? h('p', { id: 'backlog', class: 'muted' }, 'More actions wait than the page loads at once: it holds the longest waiting and the newest, and loads the rest as the queue goes down.')
      : []);
    bulkBar();
    // The first item is focused when the queue opens (not while typing elsewhere).
    const active = document.activeElement;
    const idle = !active || active === document.body || active.tagName === 'MAIN';
    if (shown.length && idle && !document.querySelector('dialog[open]')) {
      const keep = q.focusId && want.has(q.focusId) ? q.focusId : shown[0].id;
      autoFocus(keep, keep !== had);
    }
  }

  /** The card of `id` after `drawn` (in the order drawn) that stays in
   * `want`, or else the one before it; null when none. */
  function neighbour(drawn, id, want) {
    const i = drawn.findIndex((el) => el.dataset.id === id);
    if (i < 0) return null;
    const stays = (el) => want.has(el.dataset.id);
    return (drawn.slice(i + 1).find(stays) || drawn.slice(0, i).reverse().find(stays))?.dataset.id || null;
  }

  /** Focuses the card of `id` for the operator. When it is another card
   * than the focus was on (`moved`: the queue opened, or the focused card
   * left), or one drawn just now, the decision keys wait SETTLE_MS on it:
   * an agent can time what lands there. The card the operator's own
   * decision moved the focus on to is the one they had (focusAfter). */
  function autoFocus(id, moved) {
    const card = q.cards.get(id);
    if (!card) return;
    const fresh = Date.now() - card.drawnAt < SETTLE_MS;
    q.auto = moved || fresh ? { id, at: Date.now() } : q.auto;
    q.focusing = true;
    try {
      card.el.focus({ preventScroll: q.focusedOnce });
    } finally {
      q.focusing = false;
    }
    q.focusedOnce = true;
  }

  /** Whether a decision key must wait: the focused card `id` was focused
   * by the page, not the operator, less than SETTLE_MS ago. */
  function settling(id) {
    return Boolean(q.auto) && q.auto.id === id && Date.now() - q.auto.at < SETTLE_MS;
  }

  // ---- focus and keys -----------------------------------------------------

  function cardEls() {
    return [...document.querySelectorAll('#queue > .card')];
  }

  function focused() {
    const el = document.activeElement?.closest?.('#queue > .card');
    return el || null;
  }

  function focusAt(i) {
    const els = cardEls();
    if (!els.length) return;
    const el = els[Math.max(0, Math.min(i, els.length - 1))];
    el.focus();
    el.scrollIntoView({ block: 'nearest' });
  }

  function move(step) {
    const els = cardEls();
    const cur = focused();
    const i = cur ? els.indexOf(cur) : -1;
    if (step > 0 && i === els.length - 1 && document.getElementById('show-more')) {
      q.limit += PAGE;
      render();
    }
    focusAt(i < 0 ? 0 : i + step);
  }

  function itemOf(el) {
    if (!el) return null;
    const id = el.dataset.id;
    if (el.dataset.kind === 'plan') return { id, p: app.state.plans.get(id) };
    if (el.dataset.kind === 'undecided') return { id, u: app.state.undecided.get(id) };
    return el.dataset.kind === 'action'
      ? { id, a: app.state.actions.get(id) } : { id, r: app.state.requests.get(id) };
  }

  /** After `el` (or the cards of `ids`) leaves, focus goes to the card
   * that takes its place. */
  function focusAfter(el, ids = [el.dataset.id]) {
    const els = cardEls();
    const i = els.indexOf(el);
    const rest = (list) => list.find((x) => !ids.includes(x.dataset.id));
    q.focusId = (rest(els.slice(i + 1)) || rest(els.slice(0, i).reverse()))?.dataset.id || null;
  }

  function onKey(e) {
    if (!app.isQueue() || e.ctrlKey || e.metaKey || e.altKey) return;
    // A key held down repeats: one press, one decision. The repeats of a
    // held `a` would approve card after card, none of them read (and the
    // second press a collapsed card asks for would come unasked).
    if (e.repeat && (e.key === 'a' || e.key === 'd' || e.key === 'g' || e.key === 'x')) {
      e.preventDefault();
      return;
    }
    if (document.querySelector('dialog[open]')) return;
    const t = e.target;
    if (t && (t.tagName === 'INPUT' && t.type !== 'checkbox') ) return;
    if (t && (t.tagName === 'TEXTAREA' || t.tagName === 'SELECT' || t.isContentEditable)) return;
    const el = focused();
    const it = itemOf(el);
    const not = it?.a ? cannotDecide(it.a, app.ctx.me()) : null;
    if (not && (e.key === 'a' || e.key === 'g' || (e.key === 'd' && !not.denyOnly))) {
      e.preventDefault();
      app.ctx.notice(not.text);
      return;
    }
    if (it && (e.key === 'a' || e.key === 'd' || e.key === 'g') && settling(it.id)) {
      e.preventDefault();
      app.ctx.notice('The focus has just moved to this item by itself: read it, then press again.');
      return;
    }
    switch (e.key) {
      case 'j': move(1); break;
      case 'k': move(-1); break;
      case '/': document.getElementById('queue-search')?.focus(); break;
      case '?': help(); break;
      case 'x':
        if (!el) return;
        el.querySelector('input.select')?.click();
        break;
      case 'a':
        if (!it) return;
        if (it.a) app.ctx.approve(it.a);
        else if (it.r) app.ctx.openGrantRequest(it.r);
        else if (it.p) {
          // As "Approve checked": a step the operator unticked stays out.
          const picked = pickedSteps(el);
          if (!picked.length) app.ctx.notice('Tick at least one step, or deny the plan.');
          else app.ctx.approvePlan(it.p, picked.length === it.p.steps.length ? null : picked);
        }
        break;
      case 'd':
        if (!it) return;
        if (it.a) app.ctx.openDeny(it.a); else if (it.r) app.ctx.openDenyRequest(it.r);
        else if (it.p) app.ctx.denyPlan(it.p);
        break;
      case 'g':
        if (!it) return;
        if (it.a) app.ctx.openGrant(it.a); else if (it.r) app.ctx.openGrantRequest(it.r);
        break;
      default: return;
    }
    e.preventDefault();
  }

  function help() {
    const d = document.getElementById('help-dialog');
    if (d.open) d.close(); else d.showModal();
  }

  // ---- decisions with an undo window --------------------------------------

  /**
   * Hides `ids` from the queue and shows a toast naming `what`; `send()`
   * runs when the window closes (or at once with "Send now"); Undo brings
   * the items back and sends nothing.
   */
  function hold(ids, what, send) {
    const entry = { ids, done: false };
    for (const id of ids) q.held.set(id, entry);
    const el = focused() || (q.focusId && q.cards.get(q.focusId)?.el);
    if (el && ids.includes(el.dataset.id)) focusAfter(el, ids);
    app.queueChanged();
    const toasts = document.getElementById('toasts');
    const left = h('span', { class: 'left' }, `${Math.round(UNDO_MS / 1000)}s`);
    const release = () => { for (const id of ids) if (q.held.get(id) === entry) q.held.delete(id); };
    const finish = async () => {
      if (entry.done) return;
      entry.done = true;
      clearInterval(entry.tick);
      toast.remove();
      try {
        await send();
      } catch (err) {
        app.fail(err);
      } finally {
        release();
        app.queueChanged();
      }
    };
    const undo = h('button', { type: 'button', class: 'undo small' }, 'Undo');
    undo.addEventListener('click', () => {
      if (entry.done) return;
      entry.done = true;
      clearTimeout(entry.timer);
      clearInterval(entry.tick);
      toast.remove();
      release();
      app.queueChanged();
      app.notice(`Undone: ${what}`);
    });
    const now = h('button', { type: 'button', class: 'send-now small' }, 'Send now');
    now.addEventListener('click', () => { clearTimeout(entry.timer); finish(); });
    const toast = h('div', { class: 'toast', role: 'status' }, h('span', { class: 'what' }, what), left, undo, now);
    entry.toast = toast;
    toasts.append(toast);
    const until = Date.now() + UNDO_MS;
    entry.tick = setInterval(() => { left.textContent = `${Math.max(0, Math.ceil((until - Date.now()) / 1000))}s`; }, 250);
    entry.timer = setTimeout(finish, UNDO_MS);
    return entry;
  }

  /** The selected actions and grant requests, as they are now. */
  function selectedItems() {
    return [...q.selected].map((id) => ({ id, a: app.state.actions.get(id), r: app.state.requests.get(id) }))
      .filter((i) => i.a || i.r);
  }

  /** Unticks `ids` (their card marked with `why`, when drawn). */
  function untick(ids, why) {
    for (const id of ids) {
      q.selected.delete(id);
      q.ticked.delete(id);
    }
    render();
    for (const id of ids) {
      const el = q.cards.get(id)?.el;
      if (!el) continue;
      el.querySelector('input.select').checked = false;
      el.querySelector('.changed')?.remove();
      if (why) el.querySelector('.card-head').after(h('p', { class: 'changed', role: 'note' }, why));
    }
  }

  /**
   * Approves the ticked actions as they were when ticked. One changed
   * since (another approver edited it) is unticked and approved by nobody
   * here; one whose card hides a value (collapsed, or masked by its key
   * name) is opened first; either way nothing is approved yet and the
   * operator looks again, as single Approve does. One never drawn that
   * would hide a value is left out. Items never drawn are named first.
   */
  function bulkApprove() {
    const chosen = selectedItems();
    let actions = chosen.filter((i) => i.a).map((i) => ({ ...i, now: i.a, a: q.ticked.get(i.id) || i.a }));
    if (chosen.length > actions.length) app.notice('Grant requests are approved one at a time (their scope and expiry): they stay selected.');
    if (!actions.length) return;
    const changed = actions.filter((i) => app.runs(i.now) !== app.runs(i.a));
    if (changed.length) {
      untick(changed.map((i) => i.id), 'Changed since you ticked it (edited by another approver): read it again.');
      app.fail(new Error(`Nothing approved: ${changed.length} of the selected ${changed.length === 1 ? 'item was' : 'items were'} edited by someone else since you ticked ${changed.length === 1 ? 'it' : 'them'}, and ${changed.length === 1 ? 'is' : 'are'} unticked and marked. Read ${changed.length === 1 ? 'it' : 'them'} again, then approve.`));
      return;
    }
    const drawn = new Set(cardEls().map((el) => el.dataset.id));
    let opened = 0;
    for (const i of actions) if (drawn.has(i.id) && app.revealCollapsed(i.id)) opened += 1;
    if (opened) {
      app.notice(`Nothing approved: ${opened} of the selected ${opened === 1 ? 'item is' : 'items are'} now shown in full (a long or masked value): read ${opened === 1 ? 'it' : 'them'}, then approve again.`);
      return;
    }
    const hiding = actions.filter((i) => !drawn.has(i.id) && hidesValues(i.a));
    if (hiding.length) {
      untick(hiding.map((i) => i.id), '');
      app.fail(new Error(`Left out: ${hiding.length} selected ${hiding.length === 1 ? 'item' : 'items'} not drawn on the page ${hiding.length === 1 ? 'holds' : 'hold'} a long or masked value nobody has read; unticked. Open ${hiding.length === 1 ? 'it' : 'them'} to approve.`));
      actions = actions.filter((i) => !hiding.includes(i));
      if (!actions.length) return;
    }
    const go = () => {
      for (const i of actions) {
        q.selected.delete(i.id);
        q.ticked.delete(i.id);
      }
      app.approveMany(actions.map((i) => i.a));
    };
    // Items selected by the filter but never drawn are named before they
    // are approved: nobody approves what they have not been shown.
    const unseen = actions.filter((i) => !drawn.has(i.id)).length;
    if (unseen) confirmBulk(actions.map((i) => i.a), unseen, go);
    else go();
  }

  /** Asks before approving `actions`, `unseen` of them not drawn: how
   * many of each agent and tool (or handler action). */
  function confirmBulk(actions, unseen, go) {
    const kinds = new Map();
    for (const a of actions) {
      const k = `${a.agent} · ${a.handler ? `${a.handler} ${a.action}` : a.tool}`;
      kinds.set(k, (kinds.get(k) || 0) + 1);
    }
    const rows = [...kinds].sort((x, y) => y[1] - x[1] || (x[0] < y[0] ? -1 : 1));
    const dlg = h('dialog', { id: 'bulk-dialog', 'aria-labelledby': 'bulk-title' },
      h('form', { method: 'dialog' },
        h('h2', { id: 'bulk-title' }, `Approve ${actions.length} items?`),
        h('p', { class: 'muted' }, `${unseen} of them are not drawn on the page (they match the filter). By agent and tool:`),
        h('ul', { id: 'bulk-kinds' }, ...rows.slice(0, 12).map(([k, n]) => h('li', {}, `${n} × ${k}`)),
          rows.length > 12 ? h('li', {}, `and ${rows.length - 12} more`) : []),
        h('div', { class: 'buttons' },
          h('button', { type: 'button', id: 'bulk-cancel', onclick: () => dlg.close() }, 'Cancel'),
          h('button', { type: 'submit', id: 'bulk-confirm', class: 'primary', value: 'confirm' }, `Approve ${actions.length}`))));
    dlg.addEventListener('close', () => {
      if (dlg.returnValue === 'confirm') go();
      dlg.remove();
    });
    document.body.append(dlg);
    dlg.showModal();
  }

  function bulkDeny() {
    const chosen = selectedItems();
    if (!chosen.length) return;
    app.denyMany(chosen);
  }

  document.addEventListener('keydown', onKey);

  // ---- clicks on a card that moved under a still pointer --------------------
  //
  // The queue changes while the operator reads it: a new item on top, one
  // withdrawn above. A click aimed at one card's Approve must not land on
  // another that slid under the pointer (an agent can time such a shift).
  // The card under the pointer is noted on every real move; a click whose
  // card is not that one, with the pointer where it was, decides nothing.
  const pointer = { x: NaN, y: NaN, card: null };
  // A tap (a touch has no moves before it) cannot say what the finger
  // aimed at: one landing within a second of cards coming or going
  // (`q.shiftedAt`, noted by `render`'s observer) decides nothing either.
  const SHIFT_GRACE_MS = 1000;
  document.addEventListener('pointermove', (e) => {
    // A browser may send a move of its own after a layout change, at the
    // same place: only a real move says what the operator points at.
    if (e.clientX === pointer.x && e.clientY === pointer.y) return;
    pointer.x = e.clientX;
    pointer.y = e.clientY;
    pointer.card = e.target?.closest?.('#queue > .card') || null;
  }, { capture: true, passive: true });
  document.addEventListener('click', (e) => {
    // detail 0: from the keyboard, which acts on the focused card.
    if (!e.detail || !app.isQueue()) return;
    const card = e.target?.closest?.('#queue > .card');
    if (!card || !e.target.closest('button, input, a')) return;
    // (A click's coordinates may be rounded where a move's are not.)
    const still = Math.abs(e.clientX - pointer.x) < 1 && Math.abs(e.clientY - pointer.y) < 1;
    if (card === pointer.card) return;
    if (!still && performance.now() - (q.shiftedAt ?? -Infinity) >= SHIFT_GRACE_MS) return;
    e.preventDefault();
    e.stopImmediatePropagation();
    app.notice('The queue moved under the pointer: nothing was decided. Point at it again.');
  }, { capture: true });

  return {
    render,
    hold,
    reset() {
      // Signed out: a decision still in its undo window is dropped, not
      // sent later with whatever key is signed in by then.
      for (const entry of new Set(q.held.values())) {
        entry.done = true;
        clearTimeout(entry.timer);
        clearInterval(entry.tick);
        entry.toast?.remove();
      }
      q.selected.clear();
      q.ticked.clear();
      q.held.clear();
      q.cards.clear();
      q.focusId = null;
      q.focusedOnce = false;
      q.auto = null;
      q.limit = PAGE;
    },
    clearSelection,
    /** Cards are drawn again (who the caller is changed: what it may
     * decide with them). */
    redraw() { q.cards.clear(); },
  };
}
