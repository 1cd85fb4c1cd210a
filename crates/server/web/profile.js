// Agents and their profiles (admin keys; docs/profiles.md): the list, and a
// profile editor that shows the what-if replay of the candidate
// (`POST /v1/agents/{id}/profile/replay`) before it may be saved
// (`PUT /v1/agents/{id}`). Save stays disabled until the text as it is now
// has been replayed; a profile whose examples fail is refused by the daemon
// (422) and the page names each failing example; one saved with warnings (a
// quorum no registered people could meet) shows them.

import { api, enc } from './api.js';
import { h, when, visible } from './dom.js';
import { maskSecrets } from './secrets.js';

function profileText(p) {
  if (p === null || p === undefined) return 'null';
  return JSON.stringify(p, null, 2);
}

/** The problem's field errors as list items (the failing examples). */
function problemList(err) {
  const errors = Array.isArray(err?.problem?.errors) ? err.problem.errors : [];
  if (!errors.length) return [h('li', {}, visible(maskSecrets(err?.message || String(err))))];
  return errors.map((e) => h('li', {}, h('code', {}, e.field), ': ', visible(maskSecrets(e.message))));
}

/** `#/agents` lists agents; `#/agents?id=A` edits one's profile. */
export async function renderAgents(root, ctx, params, signal) {
  const id = params.get('id');
  if (id) return renderEditor(root, ctx, id, signal);
  let list;
  try {
    list = await api('GET', '/v1/agents');
  } catch (e) {
    if (signal.aborted) return;
    if (e.status === 403) {
      root.replaceChildren(h('h1', {}, 'Agents'), h('p', { class: 'empty' }, 'Agents and profiles need an admin key: sign in with one to edit them.'));
      return;
    }
    throw e;
  }
  if (signal.aborted) return;
  const items = Array.isArray(list) ? list : list.items || [];
  root.replaceChildren(h('h1', {}, 'Agents'),
    items.length
      ? h('table', { class: 'grid', id: 'agents-table' },
        h('thead', {}, h('tr', {}, ['Agent', 'Profile', 'Updated'].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', {}, items.map((a) => h('tr', { dataset: { id: a.id } },
          h('td', { 'data-label': 'Agent' }, h('a', { href: `#/agents?id=${enc(a.id)}`, class: 'link' }, a.name ? `${a.name} (${a.id})` : a.id)),
          h('td', { 'data-label': 'Profile' }, a.profile === null || a.profile === undefined ? 'the default' : typeof a.profile === 'string' ? a.profile : 'custom'),
          h('td', { 'data-label': 'Updated' }, when(a.updated_at))))))
      : h('p', { class: 'empty' }, 'No agents yet.'));
}

async function renderEditor(root, ctx, id, signal) {
  const agent = await api('GET', `/v1/agents/${enc(id)}`);
  if (signal.aborted) return;
  const text = h('textarea', { id: 'profile-text', rows: '14', spellcheck: 'false', 'aria-describedby': 'profile-help' });
  text.value = profileText(agent.profile);
  const since = h('select', { id: 'replay-since' },
    ['7d', '30d', '90d'].map((s) => h('option', { value: s, selected: s === '30d' }, `the last ${s.replace('d', ' days')}`)));
  const result = h('div', { id: 'replay-result', role: 'status' });
  const errors = h('div', { id: 'profile-errors', role: 'alert' });
  const save = h('button', { type: 'button', class: 'primary', id: 'profile-save', disabled: true }, 'Save');
  const preview = h('button', { type: 'button', id: 'profile-preview' }, 'Replay before saving');
  // The text that was replayed: Save sends exactly that, and only that.
  let replayed = null;
  const parse = () => {
    try { return { ok: true, value: JSON.parse(text.value) }; } catch (e) { return { ok: false, why: e.message }; }
  };
  text.addEventListener('input', () => { replayed = null; save.disabled = true; });
  since.addEventListener('change', () => { replayed = null; save.disabled = true; });
  preview.addEventListener('click', async () => {
    errors.replaceChildren();
    const p = parse();
    if (!p.ok) { errors.replaceChildren(h('p', {}, `Not JSON: ${p.why}`)); return; }
    preview.disabled = true;
    const asked = text.value;
    try {
      const r = await api('POST', `/v1/agents/${enc(id)}/profile/replay`, { profile: p.value, since: since.value });
      result.replaceChildren(
        h('p', { id: 'replay-summary' }, r.changed ? r.summary : `No decision would change (${r.replayed} replayed).`),
        h('p', { class: 'muted' }, `${r.replayed} recorded actions since ${when(r.since)}; ${r.changed} would be decided otherwise.`),
        ...r.groups.map((g) => h('section', { class: 'replay-group', dataset: { from: g.from, to: g.to } },
          h('h3', {}, `${g.count} ${g.from} → ${g.to}`),
          h('ul', {}, g.examples.map((x) => h('li', {},
            h('a', { href: `#/actions/${enc(x.id)}`, class: 'link vis' }, visible(maskSecrets(x.action_string))),
            ` · ${when(x.created_at)}`))))));
      if (text.value === asked) { replayed = asked; save.disabled = false; }
    } catch (e) {
      errors.replaceChildren(h('p', {}, 'The replay was refused:'), h('ul', {}, problemList(e)));
    } finally {
      preview.disabled = false;
    }
  });
  save.addEventListener('click', async () => {
    if (replayed === null || replayed !== text.value) return;
    errors.replaceChildren();
    save.disabled = true;
    try {
      const saved = await api('PUT', `/v1/agents/${enc(id)}`, { name: agent.name ?? null, profile: JSON.parse(replayed) });
      ctx.notice(`Profile of ${id} saved.`);
      replayed = null;
      // Kept, but something in it cannot work yet (a quorum no registered
      // people could meet): say so where the editor is.
      const warnings = Array.isArray(saved?.warnings) ? saved.warnings : [];
      if (warnings.length) {
        errors.replaceChildren(h('p', {}, 'Saved, but it cannot work as things stand:'),
          h('ul', { id: 'profile-warnings' }, warnings.map((w) => h('li', {}, visible(w)))));
      }
    } catch (e) {
      // Refused (a 422 names every failing example): nothing was changed.
      errors.replaceChildren(h('p', {}, 'Not saved; nothing was changed:'), h('ul', {}, problemList(e)));
      save.disabled = false;
    }
  });
  root.replaceChildren(
    h('p', {}, h('a', { href: '#/agents', class: 'link' }, '← Agents')),
    h('h1', {}, `Profile of ${agent.name ? `${agent.name} (${agent.id})` : agent.id}`),
    h('p', { id: 'profile-help', class: 'muted' },
      'A preset name in quotes ("standard") or {"allow": [...], "ask": [...], "deny": [...], "examples": {...}}; null for the default. ',
      'Replay it over this agent\'s recorded actions first; Save sends the text that was replayed.'),
    h('label', { for: 'profile-text' }, 'Profile (JSON)'), text,
    h('div', { class: 'buttons' }, h('label', {}, 'Replay over ', since), preview, save),
    errors, result);
}
