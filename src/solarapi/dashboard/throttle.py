"""Throttling log-ins (per client, and per account and client) and sign-ups (per client IP).

The counters live in the API's rate limiter rather than in a table: they are short-lived,
must be shared by every worker exactly as the API's windows are (Redis when scaled out, one
atomic script), and a table would cost a database write per attempt.

Attempts are counted *before* the password is checked, in one atomic check-and-count each:
a throttle that peeks, lets Argon2 run and counts afterwards let 40 of 40 concurrent wrong
passwords through (issue 28). A successful log-in raises the allowance of its counters by
one, so a person's own log-ins never use up the attempts.

Who can be locked out by whom:
- per client (IP), every account: 30 attempts per 15 minutes;
- per (account, client): 5 attempts per 15 minutes — the account's own lock, which only
  that client's failures can close: a stranger's wrong passwords elsewhere never refuse
  the real user (they did, renewable forever, when the counter was per e-mail alone);
- per account, every client: 20 attempts per 15 minutes. Past that the account is under
  attack from many places, and each client that has not tried it yet gets one attempt
  instead of five: the right password from a fresh client still works.
Unknown e-mails are counted like known ones: the throttle must not tell which exist.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass

from solarapi.ratelimit.base import RateLimiter, Window

LOGIN_PER_IP = Window("login-ip", 30, 15 * 60)
LOGIN_PER_ACCOUNT_CLIENT = Window("login-pair", 5, 15 * 60)
LOGIN_PER_ACCOUNT = Window("login-account", 20, 15 * 60)
# Attempts per (account, client) while the account is over LOGIN_PER_ACCOUNT.
LOGIN_PER_CLIENT_UNDER_ATTACK = 1
SIGNUP_PER_IP = Window("signup-ip", 10, 60 * 60)
# Counts successful log-ins, which raise the allowance of the windows above (no limit).
_SUCCESSES = Window("login-ok", 2**31, 15 * 60)


@dataclass(frozen=True, slots=True)
class Throttled:
    retry_after: int  # seconds

    @property
    def minutes(self) -> int:
        return max(1, -(-self.retry_after // 60))


def _account_key(secret: bytes, email: str) -> str:
    # Hashed so the limiter's store (Redis) holds no e-mail addresses.
    digest = hmac.new(secret, b"login:" + email.strip().lower().encode(), hashlib.sha256)
    return digest.hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class LoginAttempt:
    """The counters one log-in attempt was counted in: `succeeded` raises their allowance."""

    ip_bucket: str
    pair_bucket: str


class LoginThrottle:
    def __init__(self, limiter: RateLimiter, secret: bytes, clock: Callable[[], float]) -> None:
        # The app's injectable clock, the same one the API's windows use.
        self._limiter = limiter
        self._secret = secret
        self._clock = clock

    async def _allowance(self, bucket: str, window: Window, now: float) -> Window:
        """`window` raised by the log-ins that succeeded under `bucket` in it."""
        done = await self._limiter.peek(f"{bucket}:ok", (_SUCCESSES,), now)
        return Window(window.name, window.limit + done.windows[0].used, window.seconds)

    async def login_attempt(self, email: str, ip: str) -> LoginAttempt | Throttled:
        """Count one attempt before the password is checked; Throttled if it may not run.
        Each count is one atomic check-and-count, so concurrent attempts cannot all pass."""
        now = self._clock()
        account = _account_key(self._secret, email)
        ip_bucket = f"login-ip:{ip}"
        pair_bucket = f"login-pair:{account}:{ip}"
        by_ip = await self._limiter.hit(
            ip_bucket, (await self._allowance(ip_bucket, LOGIN_PER_IP, now),), now
        )
        if not by_ip.allowed:
            return Throttled(by_ip.retry_after)
        by_account = await self._limiter.hit(f"login-account:{account}", (LOGIN_PER_ACCOUNT,), now)
        pair_window = LOGIN_PER_ACCOUNT_CLIENT
        if not by_account.allowed:
            pair_window = Window(
                pair_window.name, LOGIN_PER_CLIENT_UNDER_ATTACK, pair_window.seconds
            )
        by_pair = await self._limiter.hit(
            pair_bucket, (await self._allowance(pair_bucket, pair_window, now),), now
        )
        if not by_pair.allowed:
            return Throttled(by_pair.retry_after)
        return LoginAttempt(ip_bucket, pair_bucket)

    async def succeeded(self, attempt: LoginAttempt) -> None:
        now = self._clock()
        for bucket in (attempt.ip_bucket, attempt.pair_bucket):
            await self._limiter.hit(f"{bucket}:ok", (_SUCCESSES,), now)

    async def signup_attempt(self, ip: str) -> Throttled | None:
        """Count a sign-up attempt; Throttled once the IP has used its window."""
        now = self._clock()
        decision = await self._limiter.hit(f"signup-ip:{ip}", (SIGNUP_PER_IP,), now)
        return None if decision.allowed else Throttled(decision.retry_after)
