"""Verifying webhook deliveries (the Standard Webhooks scheme), with the standard library only.

    event = verify_webhook(request.body, request.headers, secret="whsec_…")

The signed content is `{webhook-id}.{webhook-timestamp}.{raw body}`, signed with HMAC-SHA256
under the base64-decoded part of the secret after `whsec_`; `webhook-signature` holds one or
more space-separated `v1,<base64>` signatures (two while a rotated secret overlaps the new one).
Pass the raw body bytes exactly as received: re-encoded JSON no longer verifies.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from collections.abc import Mapping

from solarapi_client._decode import decode
from solarapi_client.errors import WebhookVerificationError
from solarapi_client.models import Event

SECRET_PREFIX = "whsec_"  # noqa: S105 - a prefix, not a secret
# Deliveries older or newer than this are refused, so a captured request cannot be replayed.
DEFAULT_TOLERANCE_SECONDS = 5 * 60


def verify_webhook(
    body: bytes | str,
    headers: Mapping[str, str],
    secret: str,
    *,
    tolerance: float = DEFAULT_TOLERANCE_SECONDS,
    now: float | None = None,
) -> Event:
    """The delivered event, once its signature and timestamp check out; otherwise
    `WebhookVerificationError`."""
    payload = body.encode() if isinstance(body, str) else body
    lowered = {k.lower(): v for k, v in headers.items()}
    try:
        message_id = lowered["webhook-id"]
        timestamp_text = lowered["webhook-timestamp"]
        signatures = lowered["webhook-signature"]
    except KeyError as missing:
        raise WebhookVerificationError(f"missing header {missing.args[0]}") from None
    try:
        timestamp = int(timestamp_text)
    except ValueError:
        raise WebhookVerificationError("webhook-timestamp is not a whole number") from None
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance:
        raise WebhookVerificationError("webhook-timestamp is outside the tolerance")

    signed = f"{message_id}.{timestamp}.".encode() + payload
    expected = base64.b64encode(hmac.new(_key(secret), signed, hashlib.sha256).digest())
    for candidate in signatures.split():
        version, _, value = candidate.partition(",")
        if version == "v1" and hmac.compare_digest(value.encode(), expected):
            event = decode(Event, json.loads(payload))
            return event
    raise WebhookVerificationError("no signature matches the secret")


def _key(secret: str) -> bytes:
    encoded = secret[len(SECRET_PREFIX) :] if secret.startswith(SECRET_PREFIX) else secret
    try:
        return base64.b64decode(encoded, validate=True)
    except binascii.Error:
        raise WebhookVerificationError("the secret is not a whsec_ secret") from None
