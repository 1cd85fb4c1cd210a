// The page's pure parts in node: the SSE parser (chunks split anywhere,
// CRLF, comments, multi-line data), the masking rule and the queue's order.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readSse, staleMs } from '../../crates/server/web/stream.js';
import { lookalikes, masked, MASK, newestFirst, visibleText, sensitiveKey } from '../../crates/server/web/dom.js';
import { maskForEdit, unmaskEdit } from '../../crates/server/web/edit.js';
import { maskSecrets } from '../../crates/server/web/secrets.js';
import { readFileSync } from 'node:fs';
import { api, ApiError, limits } from '../../crates/server/web/api.js';

test('hidden characters are shown as the CLI shows them', () => {
  assert.equal(visibleText('cat README.md\nrm -rf ~/projects'), 'cat README.md⏎rm -rf ~/projects');
  assert.equal(visibleText('ls\r\tx'), 'ls␍⇥x');
  assert.equal(visibleText('echo \u202emr'), 'echo ⟨U+202E⟩mr');
  assert.equal(visibleText('r\u200bm\ufeff\u001b[2J'), 'r⟨U+200B⟩m⟨U+FEFF⟩⟨U+001B⟩[2J');
  assert.equal(visibleText('tag\u{e0041}'), 'tag⟨U+E0041⟩');
  assert.equal(visibleText('ls -la ~/src | grep é → 日本'), 'ls -la ~/src | grep é → 日本');
});

test('letters that pass for Latin ones in a Latin word are found, with their script', () => {
  const found = (t) => [...lookalikes(t)].map(([i, m]) => [[...t][i], m.script, m.among]);
  // "paypal" with a Cyrillic а, and a host all in Cyrillic look-alikes but
  // in one word with the Latin scheme and TLD.
  assert.deepEqual(found('curl https://p\u0430ypal.com/login'), [['\u0430', 'Cyrillic', 'Latin']]);
  assert.deepEqual(found('curl https://\u0440\u0430\u0443\u0440\u0430\u04cf.com').map((x) => x[1]), Array(6).fill('Cyrillic'));
  // A Greek omicron in a path, a Cherokee letter in a flag.
  assert.deepEqual(found('rm -rf /srv/l\u03bfgs'), [['\u03bf', 'Greek', 'Latin']]);
  assert.deepEqual(found('git push --f\u13a5rce'), [['\u13a5', 'Cherokee', 'Latin']]);
  // Without Latin, the word's most common script is kept.
  assert.deepEqual(found('\u0444\u0430\u0439\u03bb'), [['\u03bb', 'Greek', 'Cyrillic']]);
  assert.equal(lookalikes('Ωmega').size, 1);
  // Words in one script each, digits and marks, and Japanese (Han with kana) are plain.
  // Scripts no one takes for Latin, mixed with it, are plain too.
  for (const plain of ['ls -la ~/src | grep é', 'удалить файл /tmp/x', 'echo 日本語のテキスト', 'naïve café x2', 'a\u0301b 123', 'cat レポート.txt', 'mv a\u05d0 x']) {
    assert.equal(lookalikes(plain).size, 0, plain);
  }
  // Indexes are in code points: a letter after an astral character.
  const astral = '\u{1f600}p\u0430y';
  assert.deepEqual([...lookalikes(astral).keys()], [2]);
});

test('a word wholly of letters drawn like Latin ones, among Latin words, is found (as the daemon finds it)', () => {
  const found = (t) => [...lookalikes(t)].map(([i, m]) => [[...t][i], m.script, m.among, m.whole]);
  // A program named with Cyrillic dze, dze, shha reads as `ssh`.
  assert.deepEqual(found('\u0455\u0455\u04bb root@db.internal'), [
    ['\u0455', 'Cyrillic', 'Latin', true],
    ['\u0455', 'Cyrillic', 'Latin', true],
    ['\u04bb', 'Cyrillic', 'Latin', true],
  ]);
  assert.equal(lookalikes('cat \u039f\u039a.txt').size, 2);
  assert.equal(lookalikes('rm -rf /tmp/x \u0441\u043e\u0440').size, 3);
  // A Russian word among Latin ones, or Russian with no Latin: plain.
  assert.equal(lookalikes('git commit -m \u0444\u0438\u043a\u0441').size, 0);
  assert.equal(lookalikes('\u0441\u043e\u0440 \u0443\u0445\u043e').size, 0);
  // A mixed word's letters are not "whole".
  assert.equal(lookalikes('p\u0430ypal').get(1).whole, false);
});

function body(chunks) {
  const enc = new TextEncoder();
  return new ReadableStream({
    start(c) {
      for (const ch of chunks) c.enqueue(enc.encode(ch));
      c.close();
    },
  });
}

async function parse(chunks) {
  const out = [];
  await readSse(body(chunks), (m) => out.push(m));
  return out;
}

test('messages split across chunks at any byte parse the same', async () => {
  const text = 'retry: 2000\n\n: heartbeat\n\nid: 7\nevent: action.enqueued\ndata: {"a":1}\n\nid: 8\r\nevent: action.approved\r\ndata: line one\r\ndata: line two\r\n\r\n';
  const whole = await parse([text]);
  assert.deepEqual(whole, [
    { id: '7', event: 'action.enqueued', data: '{"a":1}' },
    { id: '8', event: 'action.approved', data: 'line one\nline two' },
  ]);
  for (let cut = 1; cut < text.length; cut++) {
    assert.deepEqual(await parse([text.slice(0, cut), text.slice(cut)]), whole, `split at ${cut}`);
  }
  // One byte at a time, too.
  assert.deepEqual(await parse([...text]), whole);
});

test('a message cut off before its blank line is not delivered', async () => {
  assert.deepEqual(await parse(['id: 9\nevent: x\ndata: {}\n']), []);
});

test('sensitive values are masked by key name at any depth, and the daemon\'s *** too', () => {
  const params = {
    to: 'bob@example.com',
    API_KEY: 'k',
    nested: { password: 'p', list: [{ authToken: 't' }, 'plain'] },
    client_secret: 's',
    masked_by_schema: '***',
    count: 3,
  };
  assert.deepEqual(masked(params), {
    to: 'bob@example.com',
    API_KEY: MASK,
    nested: { password: MASK, list: [{ authToken: MASK }, 'plain'] },
    client_secret: MASK,
    masked_by_schema: MASK,
    count: 3,
  });
  // The original is untouched.
  assert.equal(params.nested.password, 'p');
});

test('a value is masked by a credential word as a whole segment of its key name, never inside a word', () => {
  for (const k of ['password', 'db_pass', 'DB_PASSWD', 'passphrase', 'client_secret', 'authToken', 'refresh-tokens',
    'X-Api-Key', 'apiKey', 'APIKEY', 'authorization', 'auth_header', 'aws.credentials', 'private_key', 'privateKey', 'cookie', 'Set Cookie']) {
    assert.ok(sensitiveKey(k), `${k} is not masked`);
  }
  // An agent names its params: a word that merely holds one is shown.
  for (const k of ['bypass_protection', 'bypass', 'session', 'session_id', 'passenger', 'compass', 'tokenizer',
    'secretary', 'api', 'key', 'keys', 'cookiecutter', 'passthrough', 'author']) {
    assert.ok(!sensitiveKey(k), `${k} is masked`);
  }
  assert.deepEqual(masked({ bypass_protection: true, session: 'prod-db-root', db_pass: 'x' }),
    { bypass_protection: true, session: 'prod-db-root', db_pass: MASK });
  // Without the key rule, only the daemon's masks.
  assert.deepEqual(masked({ db_pass: 'x', pin: '***' }, '', { keys: false }), { db_pass: 'x', pin: MASK });
});

test('Edit & approve shows masked values as *** and puts back the agent\'s value for a *** sent back', () => {
  const params = { repo: 'web', db_password: 'p1', nested: { list: [{ token: 't1' }] }, pin: '***' };
  const { shown, kept } = maskForEdit(params);
  assert.deepEqual(shown, { repo: 'web', db_password: '***', nested: { list: [{ token: '***' }] }, pin: '***' });
  assert.ok(!JSON.stringify(shown).includes('p1') && !JSON.stringify(shown).includes('t1'));
  // Left as ***: the agent's values (the daemon's own *** it restores itself).
  assert.deepEqual(unmaskEdit(structuredClone(shown), kept), params);
  // Typed again: the new value.
  const typed = unmaskEdit({ ...structuredClone(shown), repo: 'api', db_password: 'new' }, kept);
  assert.equal(typed.db_password, 'new');
  assert.equal(typed.repo, 'api');
  assert.equal(typed.nested.list[0].token, 't1');
  // A key removed stays removed; a *** moved elsewhere is not filled from another key.
  const moved = unmaskEdit({ repo: '***' }, kept);
  assert.deepEqual(moved, { repo: '***' });
});

test('the queue is newest first by time, also across a whole second, and by id within a millisecond', () => {
  // As the daemon writes them: a whole second has no fraction.
  const items = [
    { id: '01a20d94-d378-7151-a590-7c8e01d164ca', at: '2026-11-24T12:43:07Z' },
    { id: '01a20d94-d37d-757b-add7-6cea0523cf99', at: '2026-11-24T12:43:07.005Z' },
    { id: '01a20d94-cf8f-7000-8000-000000000001', at: '2026-11-24T12:43:05.999Z' },
    { id: '01a20d94-d37d-757b-add7-6cea0523cfaa', at: '2026-11-24T12:43:07.005Z' },
  ];
  assert.deepEqual([...items].sort(newestFirst).map((i) => i.id), [
    '01a20d94-d37d-757b-add7-6cea0523cfaa',
    '01a20d94-d37d-757b-add7-6cea0523cf99',
    '01a20d94-d378-7151-a590-7c8e01d164ca',
    '01a20d94-cf8f-7000-8000-000000000001',
  ]);
});

test('secrets in command text are masked: the same table as the daemon\'s chat cards', () => {
  const cases = JSON.parse(readFileSync(new URL('../../crates/policy/tests/secret_shapes.json', import.meta.url), 'utf8'));
  assert.ok(cases.length > 20);
  for (const [input, want] of cases) assert.equal(maskSecrets(input), want, input);
  assert.equal(maskSecrets(''), '');
});

test('the risk badge: deletes high, writes and network medium, reads low; the rule in words', async () => {
  const { riskOf, ruleText } = await import('../../crates/server/web/risk.js');
  const r = (detail, extra = {}) => riskOf({ detail, decision: { reason: '' }, ...extra });
  assert.equal(r('rm -rf build').level, 'high');
  assert.equal(r('git reset --hard HEAD~3').level, 'high');
  assert.equal(r('psql -c "DROP TABLE users"').level, 'high');
  assert.deepEqual(r('curl https://example.com').findings, ['network']);
  assert.deepEqual(r('echo hi > notes.txt').findings, ['writes']);
  assert.equal(r('ls -la src').level, 'low');
  assert.equal(r('cat README.md 2>&1').level, 'low');
  assert.equal(r('x', { action: 'delete_file', permission: 'fs.write' }).level, 'high');
  assert.equal(r('x', { action: 'send', permission: 'mail.send' }).level, 'medium');
  assert.equal(r('ls', { decision: { reason: 'r', rule: { kind: 'pattern', list: 'deny', index: 0, pattern: 'x' } } }).level, 'high');
  // The daemon's findings win over the page's reading; old actions without them fall back.
  assert.deepEqual(r('kubectl apply -f x.yaml', { findings: ['writes'] }), { level: 'medium', findings: ['writes'], source: 'analyser' });
  assert.equal(r('kubectl apply -f x.yaml').level, 'low');
  assert.equal(r('kubectl apply -f x.yaml').source, 'page');
  assert.deepEqual(r('ls', { findings: ['deletes', 'runs_commands'] }).findings, ['deletes', 'runs commands']);
  assert.equal(r('rm -rf /', { findings: [] }).level, 'low');
  // A handler's hints only raise the level: destructive is high, open world at least medium.
  assert.deepEqual(r('x', { findings: ['writes'], hints: { destructive: true } }),
    { level: 'high', findings: ['writes', 'destructive (handler)'], source: 'analyser' });
  assert.deepEqual(r('x', { findings: [], hints: { open_world: true, destructive: false } }),
    { level: 'medium', findings: ['open world (handler)'], source: 'analyser' });
  assert.equal(r('x', { findings: ['deletes'], hints: { read_only: true } }).level, 'high');
  assert.equal(r('x', { findings: [], hints: { destructive: false } }).level, 'low');
  assert.equal(ruleText({ kind: 'pattern', list: 'ask', index: 2, pattern: '(?s).*' }), 'ask pattern #2 ((?s).*)');
  assert.equal(ruleText({ kind: 'grant', id: 'g1' }), 'grant g1');
  assert.equal(ruleText(null), null);
});

test('the queue sorts by deadline (soonest first, none last) or age, and filters by field or text', async () => {
  const { sorter, matches } = await import('../../crates/server/web/queue.js');
  const items = [
    { id: 'b', at: '2026-11-24T12:00:02Z', deadline: '2026-11-24T12:30:00Z', a: { agent: 'coder', tool: 'bash', action_string: 'tool:bash:ls' } },
    { id: 'a', at: '2026-11-24T12:00:01Z', deadline: '2026-11-24T12:20:00Z', a: { agent: 'deployer', tool: 'bash', action_string: 'tool:bash:make deploy' } },
    { id: 'c', at: '2026-11-24T12:00:03Z', deadline: null, r: { agent: 'coder', handler: 'fs', permission: 'fs.write' } },
  ];
  assert.deepEqual([...items].sort(sorter('deadline')).map((i) => i.id), ['a', 'b', 'c']);
  assert.deepEqual([...items].sort(sorter('newest')).map((i) => i.id), ['c', 'b', 'a']);
  assert.deepEqual([...items].sort(sorter('oldest')).map((i) => i.id), ['a', 'b', 'c']);
  assert.deepEqual(items.filter((i) => matches(i, 'agent:coder')).map((i) => i.id), ['b', 'c']);
  assert.deepEqual(items.filter((i) => matches(i, 'deploy')).map((i) => i.id), ['a']);
  assert.deepEqual(items.filter((i) => matches(i, 'handler:fs')).map((i) => i.id), ['c']);
  assert.deepEqual(items.filter((i) => matches(i, '')).length, 3);
});

test('a file edit shows as a line diff of its old and new text', async () => {
  const { editOf, lineDiff } = await import('../../crates/server/web/diff.js');
  assert.deepEqual(editOf({ filepath: 'a', old_string: 'x', new_string: 'y' }), ['x', 'y']);
  assert.equal(editOf({ content: 'x' }), null);
  assert.deepEqual(lineDiff('a\nb\nc', 'a\nB\nc\nd'), [[' ', 'a'], ['-', 'b'], ['+', 'B'], [' ', 'c'], ['+', 'd']]);
  assert.deepEqual(lineDiff('same', 'same'), [[' ', 'same']]);
});

test('a stream is dead after two missed heartbeats plus 10 s, of the heartbeat the daemon names', () => {
  assert.equal(staleMs('15000'), 40000);
  assert.equal(staleMs('4000'), 18000);
  assert.equal(staleMs('60000'), 130000);
  // No header, or a broken one: the default heartbeat.
  for (const v of [null, '', 'x', '0', '-5']) assert.equal(staleMs(v), 40000, String(v));
});

test('U+FFF0–U+FFF8, which draw as nothing, are named', () => {
  assert.equal(visibleText('a\ufff0b\ufff8c'), 'a⟨U+FFF0⟩b⟨U+FFF8⟩c');
});

test('bulk approve counts as hidden what a card collapses: a long diff, summary, title or command, and fields past the first 50', async () => {
  const { hidesValues } = await import('../../crates/server/web/cards.js');
  const tool = (params, detail = 'src/a.rs') => ({ tool: 'Edit', action_string: `tool:Edit:${detail}`, params });
  const lines = (n) => Array.from({ length: n }, (_, i) => `line ${i}`).join('\n');
  assert.equal(hidesValues(tool({ old_string: 'a', new_string: 'b' })), false);
  assert.equal(hidesValues(tool({ old_string: 'a', new_string: lines(40) })), true, 'a long diff');
  assert.equal(hidesValues(tool({}, 'x'.repeat(300))), true, 'a long command');
  const said = (display) => ({ handler: 'h', action: 'run', action_string: 'h.run', params: {}, display });
  assert.equal(hidesValues(said({ title: 'Run', summary: 'short' })), false);
  assert.equal(hidesValues(said({ title: 'Run', summary: 'words '.repeat(100) })), true, 'a long summary');
  assert.equal(hidesValues(said({ title: 'words '.repeat(100) })), true, 'a long title');
  const many = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, 'v']));
  assert.equal(hidesValues({ handler: 'h', action: 'run', action_string: 'h.run', params: many }), true, 'fields past the first 50');
});

test('remembering an action that carries an input says the grant allows any input to its target', async () => {
  const { patternChoices } = await import('../../crates/server/web/remember.js');
  assert.equal(patternChoices('make test')[0][0], 'exactly this command');
  const [[label, pattern]] = patternChoices('/p/.bash_aliases', true);
  assert.match(label, /any input/);
  assert.equal(pattern, '/p/\\.bash_aliases');
});

test('a call to a daemon that never answers fails within its bound, saying it may have been done', async () => {
  // A decision sent to a hung daemon vanished with no word (a review paused
  // the daemon right after Approve: nothing for 53 s).
  const saved = { fetch: globalThis.fetch, sessionStorage: globalThis.sessionStorage, ms: limits.callMs };
  globalThis.sessionStorage = { getItem: () => 'k', setItem() {}, removeItem() {} };
  globalThis.fetch = (_path, init) => new Promise((_resolve, reject) => {
    init.signal.addEventListener('abort', () => reject(init.signal.reason));
  });
  limits.callMs = 200;
  // AbortSignal.timeout's timer does not keep node's loop alive.
  const keep = setInterval(() => {}, 1000);
  try {
    const started = Date.now();
    await assert.rejects(api('POST', '/v1/actions/x/approve', {}), (e) => e instanceof ApiError && /did not answer/.test(e.message) && /may or may not/.test(e.message));
    assert.ok(Date.now() - started < 2000);
  } finally {
    globalThis.fetch = saved.fetch;
    globalThis.sessionStorage = saved.sessionStorage;
    limits.callMs = saved.ms;
    clearInterval(keep);
  }
});
