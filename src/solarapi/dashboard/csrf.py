"""CSRF tokens: synchronizer tokens derived from what they are bound to.

A logged-in form's token is an HMAC of the session id under the server secret, so it is
bound to that session, needs no storage and dies with the session. Forms shown before log-in
(sign-up, log-in) are bound to a random pre-session cookie instead (signed double submit):
an attacker's page can make the browser send the cookie but can neither read it nor compute
the HMAC.
"""

from __future__ import annotations

import hashlib
import hmac


def csrf_token(secret: bytes, binding: str) -> str:
    return hmac.new(secret, b"csrf:" + binding.encode(), hashlib.sha256).hexdigest()


def csrf_valid(secret: bytes, binding: str, submitted: str | None) -> bool:
    if not submitted or not binding:
        return False
    return hmac.compare_digest(csrf_token(secret, binding), submitted)


def session_binding(session_id: str) -> str:
    return f"session:{session_id}"


def presession_binding(presession: str) -> str:
    return f"pre:{presession}"
