// The queue's cards: what an action will do, in a plain sentence first (the
// handler's display, or its params as labelled fields), the command once,
// the policy's reason and the rule that asked, a risk badge; and a grant
// request's card. Shared with the action page: displayOf, fieldList,
// paramsDisclosure.

import { enc } from './api.js';
import { h, countdown, when, masked, visible, guarded, keyMasked } from './dom.js';
import { maskSecrets } from './secrets.js';
import { riskOf, ruleText } from './risk.js';
import { editKeys, editOf, lineDiff } from './diff.js';

const json = (v) => JSON.stringify(v, null, 2);

/** Text longer than this (characters or lines) starts collapsed. */
const LONG_CHARS = 240;
const LONG_LINES = 5;
/** Fields drawn at first; the rest behind "N more fields": thousands of
 * keys would take the page tens of seconds to draw. */
export const FIELDS_SHOWN = 50;

/** The raw params (and, for a handler action, its action string), masked,
 * built only when the operator opens them; a secret-shaped value is one
 * more click away ("show secret"): the daemon masks the handler's display,
 * so this is where an operator reads the exact value. */
export function paramsDisclosure(action, { withString = false } = {}) {
  if (action.params === undefined) return null;
  const slot = h('div', { class: 'params-slot' });
  const details = h('details', { class: 'raw' }, h('summary', {}, 'Raw params'),
    withString ? h('p', { class: 'meta' }, guarded('code', { class: 'action-string vis' }, action.action_string)) : null,
    slot);
  details.addEventListener('toggle', () => {
    if (details.open && !slot.firstChild) {
      const draw = (t) => guarded('pre', { class: 'params' }, t, { breaks: false });
      slot.replaceChildren(...[].concat(keyMasked(draw, json(masked(action.params, '', { keys: false })), json(masked(action.params)))));
    }
  });
  return details;
}

/** What a card leads with: the handler's display, or a sentence. */
export function displayOf(action) {
  const d = action.display;
  if (d && typeof d === 'object' && d.title) {
    return {
      title: String(d.title),
      summary: d.summary ? String(d.summary) : null,
      fields: Array.isArray(d.fields) ? d.fields : [],
      own: true,
    };
  }
  if (action.handler) {
    // No display: the params, each as a labelled field.
    return { title: `${action.handler}: ${action.action || action.permission || 'action'}`, summary: null, fields: paramFields(action.params ?? {}), own: false };
  }
  // A decision-only action's params (the tool call's input, e.g. a file
  // write's content) as labelled fields; an edit's old and new text are
  // the diff instead (diffBlock).
  return { title: `Run with ${action.tool}`, summary: null, fields: inputFields(action.params), own: false };
}

/** A decision-only action's params as labelled fields, but for the old
 * and new text of an edit, which the card draws as a diff. */
function inputFields(params) {
  if (!params || typeof params !== 'object' || Array.isArray(params)) return [];
  const diffed = editKeys(params) ?? [];
  return paramFields(Object.fromEntries(Object.entries(params).filter(([k]) => !diffed.includes(k))));
}

/** Params as labelled fields: `value` as shown (masked by key name and
 * the daemon's `***`), `raw` behind "show value" (only the daemon's masks). */
export function paramFields(params) {
  const text = (v) => (typeof v === 'string' ? v : JSON.stringify(v));
  const field = (label, v, key) => ({ label, value: text(masked(v, key)), raw: text(masked(v, key, { keys: false })) });
  return params && typeof params === 'object' && !Array.isArray(params)
    ? Object.entries(params).map(([k, v]) => field(k, v, k))
    : [field('params', params, '')];
}

/** Whether `text` starts collapsed behind "show more". */
function isLong(text) {
  return text.length > LONG_CHARS || text.split('\n').length > LONG_LINES;
}

/** Whether a card of `action` would hide part of what runs until opened:
 * a long value collapsed (a field, the title or summary, the command, the
 * diff), or a value masked by its key name. For items never drawn (bulk
 * approve of a filter's matches). */
export function hidesValues(action) {
  const fields = [...displayOf(action).fields, ...(action.edited && action.approved_params ? paramFields(action.approved_params) : [])];
  const masks = fields.some((f) => {
    const shown = String(masked(f.value ?? ''));
    return isLong(shown) || isLong(String(f.raw ?? shown)) || (f.raw !== undefined && f.raw !== shown);
  });
  return masks || fields.length > FIELDS_SHOWN || longTexts(action).some(isLong) || isLongDiff(diffLines(action));
}

/** The card's texts drawn with longValue besides its fields: title,
 * summary, the command (a tool's; a handler's is in its fields) and what
 * an approver edited it into. */
function longTexts(action) {
  const d = displayOf(action);
  return [d.title, d.summary, action.handler ? null : action.action_string,
    action.edited && typeof action.approved_detail === 'string' ? `tool:${action.tool}:${action.approved_detail}` : null]
    .filter((t) => t !== null && t !== undefined).map(String);
}

/** A value that may be long: wrapped, line breaks shown, and collapsed
 * behind "show more" when long. */
export function longValue(tag, attrs, text) {
  const s = String(text ?? '');
  const long = isLong(s);
  const shown = guarded(tag, { ...attrs, class: `${attrs.class || ''} vis${long ? ' collapsed' : ''}` }, s);
  if (!long) return shown;
  return [].concat(shown, moreButton(Array.isArray(shown) ? shown[0] : shown));
}

/** "show more" / "show less" for `el`, drawn with class `collapsed`.
 * Approve clicks every closed one first (app.js revealCollapsed). */
function moreButton(el) {
  const more = h('button', { type: 'button', class: 'more small', 'aria-expanded': 'false' }, 'show more');
  more.addEventListener('click', () => {
    const open = el.classList.toggle('collapsed') === false;
    more.setAttribute('aria-expanded', String(open));
    more.textContent = open ? 'show less' : 'show more';
  });
  return more;
}

/** Labelled fields (display fields or params), values masked; a value
 * masked by its key name (`raw` given) is one click away. Past
 * FIELDS_SHOWN, the rest behind "N more fields", drawn when opened (Approve
 * opens it first, as a collapsed value). */
export function fieldList(fields) {
  if (!fields.length) return null;
  const dl = h('dl', { class: 'fields' }, fields.slice(0, FIELDS_SHOWN).map(fieldItem));
  const rest = fields.slice(FIELDS_SHOWN);
  if (!rest.length) return dl;
  const more = h('button', { type: 'button', class: 'more-fields small', 'aria-expanded': 'false' }, `${rest.length} more fields`);
  more.addEventListener('click', () => {
    dl.append(...rest.flatMap(fieldItem));
    more.setAttribute('aria-expanded', 'true');
    more.hidden = true;
  });
  return [dl, more];
}

/** One field's label and value. */
function fieldItem(f) {
  const value = String(masked(f.value ?? ''));
  const parts = [].concat(keyMasked((t) => longValue('div', { class: 'value' }, t), String(f.raw ?? value), value));
  return [h('dt', {}, visible(String(f.label ?? ''))), h('dd', {}, parts)];
}

/** A diff longer than this (lines, or characters that wrap into more
 * lines) starts collapsed: drawn whole it would push the buttons far down,
 * and a box that scrolls could hold lines below its edge that Approve
 * never showed. */
const DIFF_LINES = 12;
const DIFF_CHARS = 1200;

/** A file edit's old and new text as diff lines, secrets masked; null
 * when the params hold no edit. */
function diffLines(action) {
  const edit = editOf(masked(action.params ?? null));
  return edit ? lineDiff(maskSecrets(edit[0]), maskSecrets(edit[1])) : null;
}

function isLongDiff(lines) {
  return Boolean(lines) && (lines.length > DIFF_LINES || lines.reduce((n, [, l]) => n + l.length + 2, 0) > DIFF_CHARS);
}

/** A file edit's old and new text as a line diff, secrets masked;
 * collapsed behind "show more" when long, as a long value is, so Approve
 * opens it whole first. */
export function diffBlock(action) {
  const lines = diffLines(action);
  if (!lines) return null;
  const long = isLongDiff(lines);
  const pre = h('pre', { class: `diff${long ? ' collapsed' : ''}`, 'aria-label': 'Changes: lines removed (-) and added (+)' },
    lines.map(([k, l]) => h('span', { class: k === '-' ? 'del' : k === '+' ? 'ins' : 'same' }, `${k} `, visible(l))));
  return long ? [pre, moreButton(pre)] : pre;
}

/** "Needs 2 approvals" before any, "1 of 2: ann" while they are
 * collected; "edited" once edited. */
export function approvalsLine(action) {
  const approvals = action.approvals || [];
  const needed = action.approvals_required || 1;
  if (!approvals.length && !action.edited && needed < 2) return null;
  const parts = [];
  if (approvals.length) {
    const who = approvals.map((a) => `${a.who} (${a.channel})`).join(', ');
    parts.push(`${approvals.length} of ${needed} approvals: ${who}`);
  } else if (needed > 1) {
    parts.push(`Needs ${needed} approvals from distinct people`);
  }
  if (action.edited) parts.push('edited before approving');
  return h('p', { class: 'approvals' }, parts.join(' · '));
}

/** Who may approve, from the approvals rules the action was asked under
 * (`decision.rule.approvals`): anyone else's Approve is refused (403), so
 * the card says so before they try. */
export function approversLine(action) {
  const rules = action.decision?.rule?.approvals;
  const named = (Array.isArray(rules) ? rules : []).filter((r) => Array.isArray(r?.approvers) && r.approvers.length);
  if (!named.length) return null;
  return h('p', { class: 'approvers vis' }, h('span', { class: 'label' }, 'Only these may approve: '),
    named.map((r, i) => [i ? '; and of ' : '', visible(r.approvers.join(', ')),
      ` (approvals rule${Number.isInteger(r.index) ? ` #${r.index}` : ''}${r.pattern ? ` over ${r.pattern}` : ''})`]));
}

/** An approvers glob as the daemon matches it: `*` any run of
 * characters, `?` one, everything else itself. */
export function globMatch(glob, text) {
  const g = [...glob];
  const t = [...text];
  let gi = 0;
  let ti = 0;
  let star = null;
  while (ti < t.length) {
    if (gi < g.length && (g[gi] === '?' || (g[gi] !== '*' && g[gi] === t[ti]))) {
      gi += 1;
      ti += 1;
    } else if (gi < g.length && g[gi] === '*') {
      star = [gi, ti];
      gi += 1;
    } else if (star) {
      star = [star[0], star[1] + 1];
      [gi, ti] = [star[0] + 1, star[1]];
    } else {
      return false;
    }
  }
  return g.slice(gi).every((c) => c === '*');
}

/** Why `me` (from `GET /v1/whoami`) cannot decide `action`, or null when
 * it can as far as the page knows: outside the approvers of a rule it was
 * asked under (the daemon refuses approving and denying alike), or no
 * person where it needs several (only people count, so only Deny is left:
 * `denyOnly`), or already approved by this person. The daemon checks again
 * (with the profile as it is now): this only spares a refused click. */
export function cannotDecide(action, me) {
  if (!me) return null;
  const rules = Array.isArray(action.decision?.rule?.approvals) ? action.decision.rule.approvals : [];
  const names = Array.isArray(me.approver_names) ? me.approver_names : [me.name];
  const groups = Array.isArray(me.groups) ? me.groups : [];
  for (const r of rules) {
    const approvers = Array.isArray(r?.approvers) ? r.approvers : [];
    const among = !approvers.length || approvers.some((a) => (a.startsWith('group:')
      ? groups.includes(a.slice(6)) : names.some((n) => globMatch(a, n))));
    if (!among) {
      return { denyOnly: false, text: `You are not among its approvers (${approvers.join(', ')}): they decide it.` };
    }
  }
  const needed = action.approvals_required || 1;
  if (needed > 1 && !me.person) {
    return { denyOnly: true, text: `It needs ${needed} approvals from distinct people, and your key belongs to no person: only Deny is yours (an admin adds you with \`actiongate person add\`).` };
  }
  if (me.person && (action.approvals || []).some((a) => a.who === me.person)) {
    return { denyOnly: true, text: 'You have approved it: it waits for another person\'s approval.' };
  }
  return null;
}

/** The risk badge: high, medium or low, with what it found. */
export function riskBadge(action) {
  const r = riskOf(action);
  const label = r.findings.length ? `${r.level} risk: ${r.findings.join(', ')}` : `${r.level} risk`;
  return h('span', { class: `badge risk risk-${r.level}`, dataset: { risk: r.level, source: r.source }, title: label }, label);
}

/** The policy's reason and the rule that asked. */
export function policyLine(action) {
  const rule = ruleText(action.decision?.rule);
  return h('p', { class: 'policy' },
    h('span', { class: 'label' }, 'Policy: '), visible(maskSecrets(action.decision?.reason || '')),
    rule ? [h('span', { class: 'label' }, ' · rule: '), h('code', { class: 'rule vis' }, visible(rule))] : null);
}

/** "queued 2m ago · id 1a2b3c · session s1": what tells alike items apart. */
function tellApart(action) {
  return h('span', { class: 'tell' },
    h('span', { class: 'age', dataset: { since: action.created_at }, title: `${when(action.created_at)} (${action.created_at} UTC)` }, `queued ${countdown(action.created_at)}`),
    ` · id ${action.id.slice(-6)}`, action.session ? [' · session ', visible(action.session)] : null);
}

/** What an approver edited the action into, which is what runs once the
 * quorum is reached: shown before what was asked, so the next approver
 * reads what they approve. Null when it was not edited. */
export function editedBlock(action) {
  if (!action.edited) return null;
  const what = typeof action.approved_detail === 'string'
    ? h('div', { class: 'command' }, longValue('code', { class: 'action-string' }, `tool:${action.tool}:${action.approved_detail}`))
    : action.approved_params && typeof action.approved_params === 'object'
      ? fieldList(paramFields(action.approved_params))
      : null;
  return h('div', { class: 'edited' },
    h('p', { class: 'label' }, 'Edited by an approver: this is what runs if you approve'), what,
    h('p', { class: 'label' }, 'What the agent asked:'));
}

/** A pending action's card in the queue. */
export function actionCard(action, ctx) {
  const d = displayOf(action);
  const deadline = action.deadline
    ? h('span', { class: 'deadline', dataset: { deadline: action.deadline }, title: `${when(action.deadline)} (${action.deadline})` }, `expires ${countdown(action.deadline)}`)
    : null;
  const label = `t-${action.id}`;
  const not = cannotDecide(action, ctx.me?.());
  // One this caller cannot decide is left out of bulk decisions.
  const select = not ? null : h('input', { type: 'checkbox', class: 'select', 'aria-label': 'Select', dataset: { id: action.id } });
  return h('article', { class: 'card', tabindex: '-1', dataset: { id: action.id, kind: 'action' }, 'aria-labelledby': label },
    h('div', { class: 'card-head' },
      select,
      longValue('h3', { class: 'title', id: label }, d.title),
      riskBadge(action)),
    editedBlock(action),
    // A summary may be the agent's own words (a `{reason}` template):
    // collapsed when long, or it pushes what runs below the fold.
    d.summary ? longValue('p', { class: 'summary' }, d.summary) : null,
    // The command once: a tool's detail here; a handler's in its fields (the
    // exact action string is under "Raw params").
    action.handler ? null : h('div', { class: 'command' }, longValue('code', { class: 'action-string' }, action.action_string)),
    fieldList(d.fields),
    diffBlock(action),
    h('p', { class: 'meta' },
      h('span', { class: 'agent' }, `agent ${action.agent}`), ' · ', tellApart(action), deadline ? ' · ' : null, deadline),
    // The MCP proxy's question about a tool definition: its reason is the
    // definition approved, shown unmasked.
    action.reason && action.tool === 'mcp-pin' ? h('p', { class: 'reason vis' }, h('span', { class: 'label' }, 'Definition: '), visible(action.reason)) : null,
    action.reason && action.tool !== 'mcp-pin' ? h('p', { class: 'reason vis' }, h('span', { class: 'label' }, 'Agent\'s reason: '), visible(maskSecrets(action.reason))) : null,
    policyLine(action),
    approvalsLine(action),
    approversLine(action),
    paramsDisclosure(action, { withString: Boolean(action.handler) }),
    not ? h('p', { class: 'not-yours' }, not.text) : null,
    h('div', { class: 'buttons' },
      not ? null : [
        h('button', { type: 'button', class: 'primary approve', onclick: (e) => ctx.approve(action, e.currentTarget) }, 'Approve'),
        h('button', { type: 'button', class: 'remember', onclick: () => ctx.openGrant(action) }, 'Approve and remember…'),
        h('button', { type: 'button', onclick: () => ctx.openEdit(action) }, 'Edit & approve…')],
      !not || not.denyOnly ? h('button', { type: 'button', class: 'danger deny', onclick: () => ctx.openDeny(action) }, 'Deny…') : null,
      h('a', { href: `#/actions/${enc(action.id)}`, class: 'link' }, 'Details')));
}

/** A pending grant request's card (seed 004). */
export function grantRequestCard(gr, ctx) {
  const deadline = h('span', { class: 'deadline', dataset: { deadline: gr.deadline }, title: `${when(gr.deadline)} (${gr.deadline})` }, `expires ${countdown(gr.deadline)}`);
  // The scope is what would be granted, and the reason is the agent's own
  // words: both shown with their hidden characters named, secrets masked.
  const scope = !gr.scope || !Object.keys(gr.scope).length ? 'any scope'
    : Object.entries(gr.scope).map(([k, v]) => `${/^[\w.-]+$/.test(k) ? k : JSON.stringify(k)} = ${JSON.stringify(v)}`).join(', ');
  return h('article', { class: 'card request', tabindex: '-1', dataset: { id: gr.id, kind: 'grant-request' }, 'aria-labelledby': `t-${gr.id}` },
    h('div', { class: 'card-head' },
      h('input', { type: 'checkbox', class: 'select', 'aria-label': 'Select', dataset: { id: gr.id } }),
      h('h3', { class: 'title', id: `t-${gr.id}` }, `Permission ${gr.permission} on ${gr.handler}`),
      h('span', { class: 'badge kind' }, 'grant request')),
    h('p', { class: 'meta vis' }, `agent ${gr.agent} · scope `, visible(maskSecrets(scope)), ` · asks ${gr.expires || 'default expiry'} · `, deadline),
    gr.reason ? h('p', { class: 'reason vis' }, h('span', { class: 'label' }, 'Reason: '), visible(maskSecrets(gr.reason))) : null,
    h('div', { class: 'buttons' },
      h('button', { type: 'button', class: 'primary approve', onclick: () => ctx.openGrantRequest(gr) }, 'Approve…'),
      h('button', { type: 'button', class: 'danger deny', onclick: () => ctx.openDenyRequest(gr) }, 'Deny…')));
}
