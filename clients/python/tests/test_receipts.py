"""Receipts from the real daemon verify offline with a few lines of Python,
and fail when one byte changes."""

from __future__ import annotations

import httpx
import pytest

from actiongate.receipts import InvalidReceipt, params_digest, verify_receipt


def test_a_receipt_verifies_offline_and_fails_when_one_byte_changes(daemon, agent_key) -> None:  # type: ignore[no-untyped-def]
    with httpx.Client(base_url=daemon.url, timeout=30) as http:
        jwk = http.get("/.well-known/actiongate-receipt-key").json()
        r = http.post(
            "/v1/actions",
            json={"tool": "echo", "detail": "hi"},
            headers={"authorization": f"Bearer {agent_key}"},
        )
        assert r.status_code == 201, r.text
        action = r.json()
        got = http.get(
            f"/v1/actions/{action['id']}/receipt",
            headers={"authorization": f"Bearer {agent_key}"},
        ).json()
    receipt = got["receipt"]
    claims = verify_receipt(receipt, jwk)
    assert claims["action_id"] == action["id"]
    assert claims["action_string"] == "tool:echo:hi"
    assert claims["outcome"] == "allowed"
    assert claims == got["claims"]
    for i in (0, len(receipt) // 2, len(receipt) - 2):
        if receipt[i] == ".":
            continue
        changed = receipt[:i] + ("B" if receipt[i] == "A" else "A") + receipt[i + 1 :]
        with pytest.raises(InvalidReceipt):
            verify_receipt(changed, jwk)


def test_params_digest_is_keyed_and_canonical() -> None:
    key = "homgyDaXdmFFKGf7fAxD-4SbJmveRMudv2Y2iUNJc10"
    assert params_digest({"b": 1, "a": [1, {"y": 2, "x": "é"}]}, key) == params_digest(
        {"a": [1, {"x": "é", "y": 2}], "b": 1}, key
    )
    # The same vector as the daemon's and the TypeScript client's tests.
    assert params_digest({"pin": "9305"}, key) == (
        "hmac-sha256:a1a6d3aa939c468da4f4c79e7de19fceb06ff0fed9e01513b4161810818af5da"
    )
    with pytest.raises(InvalidReceipt):
        params_digest({"a": 1}, "c2hvcnQ")


def test_another_type_version_or_key_name_is_refused_even_signed() -> None:
    import base64
    import json

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    key = Ed25519PrivateKey.generate()
    raw = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    jwk = {"kty": "OKP", "crv": "Ed25519", "x": base64.urlsafe_b64encode(raw).rstrip(b"=").decode(), "kid": "k1"}

    def b64(o: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(o).encode()).rstrip(b"=").decode()

    def make(header: dict, claims: dict) -> str:  # type: ignore[type-arg]
        signing = f"{b64(header)}.{b64(claims)}"
        sig = base64.urlsafe_b64encode(key.sign(signing.encode())).rstrip(b"=").decode()
        return f"{signing}.{sig}"

    header = {"alg": "EdDSA", "typ": "actiongate-receipt+jwt", "kid": "k1"}
    claims = {"v": 2, "iss": "actiongate", "action_id": "a", "outcome": "allowed"}
    assert verify_receipt(make(header, claims), jwk)["action_id"] == "a"
    for bad, why in (
        (make({**header, "typ": "JWT"}, claims), "typ"),
        (make({**header, "kid": "k2"}, claims), "not by k1"),
        (make(header, {**claims, "v": 3}), "version 3"),
    ):
        with pytest.raises(InvalidReceipt, match=why):
            verify_receipt(bad, jwk)
