"""Throttling failed log-ins (per e-mail and per client IP) and sign-ups (per client IP).

The counters live in the API's rate limiter rather than in a table: they are short-lived,
must be shared by every worker exactly as the API's windows are (Redis when scaled out, one
atomic script), and a table would cost a database write per failed attempt. Only failures
are counted, so a person who types the right password is never slowed down by their own
successful log-ins. Unknown e-mails are counted like known ones: the throttle itself must
not tell which addresses have accounts.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass

from solarapi.ratelimit.base import RateLimiter, Window

LOGIN_PER_EMAIL = Window("login-email", 5, 15 * 60)
LOGIN_PER_IP = Window("login-ip", 30, 15 * 60)
SIGNUP_PER_IP = Window("signup-ip", 10, 60 * 60)


@dataclass(frozen=True, slots=True)
class Throttled:
    retry_after: int  # seconds

    @property
    def minutes(self) -> int:
        return max(1, -(-self.retry_after // 60))


def _email_bucket(secret: bytes, email: str) -> str:
    # Hashed so the limiter's store (Redis) holds no e-mail addresses.
    digest = hmac.new(secret, b"login:" + email.strip().lower().encode(), hashlib.sha256)
    return f"login-email:{digest.hexdigest()[:32]}"


class LoginThrottle:
    def __init__(self, limiter: RateLimiter, secret: bytes, clock: Callable[[], float]) -> None:
        # The app's injectable clock, the same one the API's windows use.
        self._limiter = limiter
        self._secret = secret
        self._clock = clock

    async def login_blocked(self, email: str, ip: str) -> Throttled | None:
        now = self._clock()
        for bucket, window in (
            (_email_bucket(self._secret, email), LOGIN_PER_EMAIL),
            (f"login-ip:{ip}", LOGIN_PER_IP),
        ):
            decision = await self._limiter.peek(bucket, (window,), now)
            if not decision.allowed:
                return Throttled(decision.retry_after)
        return None

    async def login_failed(self, email: str, ip: str) -> None:
        now = self._clock()
        await self._limiter.hit(_email_bucket(self._secret, email), (LOGIN_PER_EMAIL,), now)
        await self._limiter.hit(f"login-ip:{ip}", (LOGIN_PER_IP,), now)

    async def signup_attempt(self, ip: str) -> Throttled | None:
        """Count a sign-up attempt; Throttled once the IP has used its window."""
        now = self._clock()
        decision = await self._limiter.hit(f"signup-ip:{ip}", (SIGNUP_PER_IP,), now)
        return None if decision.allowed else Throttled(decision.retry_after)
