"""Verify actiongate's signed decision receipts offline.

A receipt is a JWS in compact form signed with Ed25519 (``alg`` ``EdDSA``);
the daemon's public key is a JWK at ``/.well-known/actiongate-receipt-key``
(also printed by ``actiongate receipt key``). Needs the ``receipts`` extra
(``pip install 'actiongate[receipts]'``, which installs ``cryptography``)::

    claims = verify_receipt(receipt, jwk)   # raises InvalidReceipt if altered
    assert claims["outcome"] == "allowed" and claims["deciders"]
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any, Dict, Mapping

__all__ = ["InvalidReceipt", "verify_receipt", "params_digest"]


class InvalidReceipt(Exception):
    """The receipt is malformed, altered, or signed by another key."""


def _b64(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def verify_receipt(receipt: str, jwk: Mapping[str, Any]) -> Dict[str, Any]:
    """The claims of ``receipt`` if ``jwk`` (an Ed25519 JWK) signed exactly it."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    if jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
        raise InvalidReceipt("not an Ed25519 JWK")
    try:
        header_b64, claims_b64, sig_b64 = receipt.strip().split(".")
        header = json.loads(_b64(header_b64))
        key = Ed25519PublicKey.from_public_bytes(_b64(str(jwk["x"])))
        if header.get("alg") != "EdDSA":
            raise InvalidReceipt("alg is not EdDSA")
        if header.get("typ") != "actiongate-receipt+jwt":
            raise InvalidReceipt("typ is not actiongate-receipt+jwt")
        # Signed by another key than the one given (when both name theirs).
        kid = jwk.get("kid")
        if isinstance(header.get("kid"), str) and isinstance(kid, str) and header["kid"] != kid:
            raise InvalidReceipt(f"signed by key {header['kid']}, not by {kid}")
        # Re-encoding rejects a signature whose base64 has non-zero spare bits.
        sig = _b64(sig_b64)
        if base64.urlsafe_b64encode(sig).rstrip(b"=").decode() != sig_b64:
            raise InvalidReceipt("signature is not canonical base64url")
        key.verify(sig, f"{header_b64}.{claims_b64}".encode())
        claims: Dict[str, Any] = json.loads(_b64(claims_b64))
    except InvalidSignature as e:
        raise InvalidReceipt("signature does not verify") from e
    except (ValueError, KeyError, TypeError) as e:
        raise InvalidReceipt(f"malformed receipt: {e}") from e
    if claims.get("iss") != "actiongate":
        raise InvalidReceipt("not issued by actiongate")
    # A later version may mean its claims otherwise: not read as this one
    # (version 1, whose params digest is a plain one, is still read).
    if claims.get("v") not in (1, 2):
        raise InvalidReceipt(f"receipt version {claims.get('v')}, this reader knows 1-2")
    return claims


def params_digest(params: Any, key: str) -> str:
    """``hmac-sha256:<hex>`` of ``params`` in canonical JSON (sorted keys, no
    spaces) under ``key``, the receipt answer's ``params_key`` (base64url),
    as a receipt's ``params_digest`` binds a handler action's params. Keyed,
    so that whoever holds a receipt but may not see a sensitive param
    cannot try values against it."""
    try:
        raw = _b64(key)
    except ValueError as e:
        raise InvalidReceipt(f"params_key is not base64url: {e}") from e
    if len(raw) != 32:
        raise InvalidReceipt("params_key is not 32 bytes")
    text = json.dumps(params, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "hmac-sha256:" + hmac.new(raw, text.encode("utf-8"), hashlib.sha256).hexdigest()
