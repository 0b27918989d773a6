"""Webhook secrets and Standard Webhooks signatures.

An endpoint's secret is `whsec_` + base64 of HMAC-SHA256(server secret, "webhook-secret:" +
salt). Only the random salt is stored, so the signing secret can be recomputed for every
delivery, yet a copy of the database without the server secret cannot forge deliveries.
(Changing the server secret therefore changes every webhook secret, as it already
invalidates every API key.)

Signatures are made by the `standardwebhooks` reference library itself, so they are exactly
what receivers' verifiers expect: `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`,
several separated by spaces while a rotated-out secret is still honoured.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from datetime import datetime

from standardwebhooks import Webhook

SECRET_PREFIX = "whsec_"  # noqa: S105 - a prefix, not a secret


def new_salt() -> str:
    return secrets.token_urlsafe(24)


def derive_secret(server_secret: bytes, salt: str) -> str:
    raw = hmac.new(server_secret, b"webhook-secret:" + salt.encode("ascii"), hashlib.sha256)
    return SECRET_PREFIX + base64.b64encode(raw.digest()).decode("ascii")


def signature_header(
    secrets_in_use: list[str], message_id: str, timestamp: datetime, body: str
) -> str:
    """The `webhook-signature` value: one `v1,…` signature per secret, newest first."""
    signatures: list[str] = []
    for secret in secrets_in_use:
        signature: str = Webhook(secret).sign(msg_id=message_id, timestamp=timestamp, data=body)
        signatures.append(signature)
    return " ".join(signatures)
