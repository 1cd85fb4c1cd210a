// Signed decision receipts verified offline with Web Crypto, against the
// real daemon's receipts and key.
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { after, before, test } from 'node:test';
import { Client, InvalidReceipt, paramsDigest, verifyReceipt } from '../dist/index.js';
import { startDaemon } from './daemon.mjs';

let d;
before(async () => {
  d = await startDaemon();
});
after(async () => d && (await d.stop()));

test('a receipt verifies offline and fails when one byte changes', async () => {
  const a = await d.agent();
  const agent = new Client({ url: d.url, key: a.key });
  const op = new Client({ url: d.url, key: await d.key('operator') });
  const asked = await agent.request('bash', 'make deploy');
  assert.equal(asked.status, 'pending');
  await op.approve(asked.id, { note: 'ok' });

  const { receipt, claims: served } = await agent.receipt(asked.id);
  const jwk = await agent.receiptKey();
  const claims = await verifyReceipt(receipt, jwk);
  assert.deepEqual(claims, served);
  assert.equal(claims.action_id, asked.id);
  assert.equal(claims.action_string, 'tool:bash:make deploy');
  assert.equal(claims.outcome, 'allowed');
  assert.equal(claims.deciders.length, 1);

  const [h, c, s] = receipt.split('.');
  const flip = (part, i) => part.slice(0, i) + (part[i] === 'A' ? 'B' : 'A') + part.slice(i + 1);
  for (const bad of [`${h}.${flip(c, 5)}.${s}`, `${h}.${c}.${flip(s, 3)}`, `${flip(h, 2)}.${c}.${s}`, `${h}.${c}`, 'x']) {
    await assert.rejects(verifyReceipt(bad, jwk), InvalidReceipt, bad);
  }
  const other = generateKeyPairSync('ed25519').publicKey.export({ format: 'jwk' });
  await assert.rejects(verifyReceipt(receipt, other), /does not verify/);
  await assert.rejects(verifyReceipt(receipt, { kty: 'RSA', n: 'x', e: 'AQAB' }), /not an Ed25519 JWK/);
});

test('a receipt of another type, another version or named for another key is refused, signed or not', async () => {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const jwk = { ...publicKey.export({ format: 'jwk' }), kid: 'k1' };
  const { sign } = await import('node:crypto');
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const make = (header, claims) => {
    const signing = `${b64(header)}.${b64(claims)}`;
    return `${signing}.${sign(null, Buffer.from(signing), privateKey).toString('base64url')}`;
  };
  const header = { alg: 'EdDSA', typ: 'actiongate-receipt+jwt', kid: 'k1' };
  const claims = { v: 2, iss: 'actiongate', action_id: 'a', agent: 'x', action_string: 'tool:bash:ls', outcome: 'allowed' };
  assert.equal((await verifyReceipt(make(header, claims), jwk)).action_id, 'a');
  await assert.rejects(verifyReceipt(make({ ...header, typ: 'JWT' }, claims), jwk), /typ/);
  await assert.rejects(verifyReceipt(make({ ...header, kid: 'k2' }, claims), jwk), /not by k1/);
  await assert.rejects(verifyReceipt(make(header, { ...claims, v: 3 }), jwk), /version 3/);
});

test('a pending action has no receipt yet', async () => {
  const a = await d.agent();
  const agent = new Client({ url: d.url, key: a.key });
  const asked = await agent.request('bash', 'make release');
  await assert.rejects(agent.receipt(asked.id), (e) => e.status === 409);
});

test('paramsDigest is the keyed canonical digest the daemon and Python compute', async () => {
  // Keys sorted by code point (U+FF01 before U+1F600, unlike UTF-16 order).
  const params = { b: [1, { z: 'é', a: null }], a: 'x\n', '\u{1F600}': 1, '\uFF01': 2 };
  const key = 'homgyDaXdmFFKGf7fAxD-4SbJmveRMudv2Y2iUNJc10';
  assert.equal(await paramsDigest(params, key), 'hmac-sha256:366b48fb0baae9a152a7fa477eb448d371fe56ff2e49b344e8c54f7aea8be2be');
  await assert.rejects(paramsDigest(params, 'c2hvcnQ'), InvalidReceipt);
});
