// A pending plan (docs/sessions.md, "Plans") as one queue card: its steps
// listed in the order they would run, secrets masked as on every card, each
// with a checkbox; "Approve all", "Approve checked" (`{"steps": [0, 2]}`)
// and "Deny".

import { h, masked, when, visible, keyMasked } from './dom.js';
import { maskSecrets } from './secrets.js';
import { longValue } from './cards.js';

/** One step as text: a tool step's detail, or a handler step's action and
 * params; with `keys`, params under credential-like key names masked. Raw
 * otherwise: the card masks secret shapes itself (`guarded`), with a
 * "show secret", and a mask must never stand in the text it reads. */
export function stepRaw(step, { keys = true } = {}) {
  if (step.handler) {
    const params = step.params && Object.keys(step.params).length ? ` ${JSON.stringify(masked(step.params, '', { keys }))}` : '';
    return `${step.handler}.${step.action}${params}`;
  }
  return `${step.tool}: ${step.detail}`;
}

/** One step as text, every mask applied (what the filter searches). */
export function stepText(step) {
  return maskSecrets(stepRaw(step));
}

/** Which steps are ticked on a plan card (indices from 0). */
export function pickedSteps(card) {
  return [...card.querySelectorAll('input.step-pick')].filter((b) => b.checked).map((b) => Number(b.dataset.step));
}

/** The steps an operator unticked, by plan id: a card drawn again (the
 * queue redrawn when their groups change, or left and opened again) keeps
 * them unticked, never ticks them back behind their back. */
const unticked = new Map();

/** A pending plan's card. `ctx.approvePlan(plan, steps|null)` and
 * `ctx.denyPlan(plan)` send the decision. */
export function planCard(plan, ctx) {
  const label = `t-${plan.id}`;
  const n = plan.steps.length;
  const steps = h('ol', { class: 'plan-steps', start: '0' },
    ...plan.steps.map((s, i) => {
      const id = `p-${plan.id}-${i}`;
      const off = unticked.get(plan.id);
      const box = h('input', { type: 'checkbox', class: 'step-pick', id, checked: !off?.has(i), dataset: { step: String(i) } });
      box.addEventListener('change', () => {
        const set = unticked.get(plan.id) || new Set();
        if (box.checked) set.delete(i); else set.add(i);
        if (set.size) unticked.set(plan.id, set); else unticked.delete(plan.id);
      });
      return h('li', {},
        box,
        // A long step collapses as any long value: Approve opens it first.
        h('label', { for: id }, keyMasked((t) => longValue('code', { class: 'action-string' }, t), stepRaw(s, { keys: false }), stepRaw(s))),
        // What approving the plan does not settle: an approvals rule's
        // step, or a guarded one in a tainted session.
        s.asks ? h('p', { class: 'muted asks vis' }, 'Asks when it runs: ', visible(maskSecrets(s.asks))) : null);
    }));
  const card = h('article', { class: 'card plan', tabindex: '-1', dataset: { id: plan.id, kind: 'plan' }, 'aria-labelledby': label },
    h('div', { class: 'card-head' },
      h('h3', { class: 'title', id: label }, `Plan of ${n} step${n === 1 ? '' : 's'}`),
      h('span', { class: 'badge kind' }, 'plan')),
    h('p', { class: 'meta' }, `agent ${plan.agent} · session `, visible(plan.session), ` · asked ${when(plan.created_at)} · id ${plan.id.slice(-6)}`),
    plan.reason ? h('p', { class: 'reason vis' }, h('span', { class: 'label' }, 'Agent\'s reason: '), visible(maskSecrets(plan.reason))) : null,
    steps,
    h('div', { class: 'buttons' },
      h('button', { type: 'button', class: 'primary approve', onclick: () => ctx.approvePlan(plan, null) }, 'Approve all'),
      h('button', { type: 'button', class: 'approve-some', onclick: () => {
        const picked = pickedSteps(card);
        if (!picked.length) { ctx.notice('Tick at least one step, or deny the plan.'); return; }
        ctx.approvePlan(plan, picked.length === n ? null : picked);
      } }, 'Approve checked'),
      h('button', { type: 'button', class: 'danger deny', onclick: () => ctx.denyPlan(plan) }, 'Deny')));
  return card;
}
