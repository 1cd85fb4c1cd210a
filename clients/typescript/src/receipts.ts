/**
 * Verify actiongate's signed decision receipts offline (docs/receipts.md).
 *
 * A receipt is a JWS in compact form signed with Ed25519 (`alg` `EdDSA`);
 * the daemon's public key is a JWK at `/.well-known/actiongate-receipt-key`
 * (also printed by `actiongate receipt key`). Web Crypto does the work, so
 * this runs in Node 20+ and in browsers that have Ed25519:
 *
 * ```ts
 * const claims = await verifyReceipt(receipt, jwk); // throws InvalidReceipt
 * if (claims.outcome !== 'allowed' || claims.deciders.length === 0) throw ...;
 * if (claims.params_digest !== (await paramsDigest(params, params_key))) throw ...;
 * ```
 */

/** The receipt is malformed, altered, or signed by another key. */
export class InvalidReceipt extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidReceipt';
  }
}

/** Who decided, as a receipt names them. */
export interface ReceiptDecider {
  id: string;
  via: string;
}

/** What a receipt binds. */
export interface ReceiptClaims {
  v: number;
  iss: 'actiongate';
  action_id: string;
  agent: string;
  action_string: string;
  handler?: string;
  action?: string;
  params_digest?: string;
  outcome: 'allowed' | 'denied' | 'expired' | 'cancelled';
  decided_by: string;
  deciders: ReceiptDecider[];
  decided_at: string;
  iat: number;
}

const B64URL = /^[A-Za-z0-9_-]*$/;

function fromB64url(part: string, what: string): Uint8Array<ArrayBuffer> {
  if (!B64URL.test(part)) throw new InvalidReceipt(`malformed receipt: ${what} is not base64url`);
  const bin = atob(part.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (part.length % 4)) % 4));
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

function toB64url(bytes: Uint8Array<ArrayBuffer>): string {
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function json(bytes: Uint8Array, what: string): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
    if (v && typeof v === 'object' && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch {
    // reported below
  }
  throw new InvalidReceipt(`malformed receipt: ${what} is not a JSON object`);
}

/** The claims of `receipt` if `jwk` (the daemon's Ed25519 JWK) signed exactly it. */
export async function verifyReceipt(receipt: string, jwk: JsonWebKey): Promise<ReceiptClaims> {
  if (jwk.kty !== 'OKP' || jwk.crv !== 'Ed25519' || typeof jwk.x !== 'string') {
    throw new InvalidReceipt('not an Ed25519 JWK');
  }
  const parts = receipt.trim().split('.');
  if (parts.length !== 3) throw new InvalidReceipt('malformed receipt: not a compact JWS');
  const [headerB64, claimsB64, sigB64] = parts as [string, string, string];
  const header = json(fromB64url(headerB64, 'the header'), 'the header');
  if (header['alg'] !== 'EdDSA') throw new InvalidReceipt('alg is not EdDSA');
  if (header['typ'] !== 'actiongate-receipt+jwt') throw new InvalidReceipt('typ is not actiongate-receipt+jwt');
  // Signed by another key than the one given (when both name theirs).
  const kid = (jwk as { kid?: unknown }).kid;
  if (typeof header['kid'] === 'string' && typeof kid === 'string' && header['kid'] !== kid) {
    throw new InvalidReceipt(`signed by key ${header['kid']}, not by ${kid}`);
  }
  const sig = fromB64url(sigB64, 'the signature');
  // Re-encoding rejects a signature whose base64 has non-zero spare bits.
  if (toB64url(sig) !== sigB64) throw new InvalidReceipt('signature is not canonical base64url');
  let key: CryptoKey;
  try {
    key = await crypto.subtle.importKey('jwk', { kty: 'OKP', crv: 'Ed25519', x: jwk.x }, { name: 'Ed25519' }, false, ['verify']);
  } catch (e) {
    throw new InvalidReceipt(`not an Ed25519 JWK: ${(e as Error).message}`);
  }
  const signed = new TextEncoder().encode(`${headerB64}.${claimsB64}`);
  if (!(await crypto.subtle.verify({ name: 'Ed25519' }, key, sig, signed))) {
    throw new InvalidReceipt('signature does not verify');
  }
  const claims = json(fromB64url(claimsB64, 'the claims'), 'the claims');
  if (claims['iss'] !== 'actiongate') throw new InvalidReceipt('not issued by actiongate');
  // A later version may mean its claims otherwise: not read as this one
  // (version 1, whose params digest is a plain one, is still read).
  if (claims['v'] !== 1 && claims['v'] !== 2) throw new InvalidReceipt(`receipt version ${String(claims['v'])}, this reader knows 1-2`);
  return claims as unknown as ReceiptClaims;
}

/** Code point order, as the daemon sorts object keys (not UTF-16 order). */
function byCodePoint(a: string, b: string): number {
  const x = Array.from(a);
  const y = Array.from(b);
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = (x[i] as string).codePointAt(0)! - (y[i] as string).codePointAt(0)!;
    if (d !== 0) return d;
  }
  return x.length - y.length;
}

function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .sort(byCodePoint)
      .map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}

/**
 * `hmac-sha256:<hex>` of `params` in canonical JSON (object keys sorted by
 * code point at every level, no whitespace) under `key`, the receipt
 * answer's `params_key` (base64url): what a receipt's `params_digest`
 * binds a handler action's params with. Keyed, so that whoever holds a
 * receipt but may not see a sensitive param cannot try values against it.
 */
export async function paramsDigest(params: unknown, key: string): Promise<string> {
  const raw = fromB64url(key, 'params_key');
  if (raw.length !== 32) throw new InvalidReceipt('params_key is not 32 bytes');
  const hmac = await crypto.subtle.importKey('raw', raw, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  const mac = new Uint8Array(await crypto.subtle.sign('HMAC', hmac, new TextEncoder().encode(canonical(params))));
  return `hmac-sha256:${Array.from(mac, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}
