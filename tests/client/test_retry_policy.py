"""The retry decisions on their own (pure functions of an answer or an error): the waits the
headers ask for, and which failures are retried for which methods."""

from __future__ import annotations

import httpx
import pytest

from solarapi_client import RetryPolicy
from solarapi_client._core import requested_wait

NOW = 1_750_000_000.0


def test_retry_after_in_seconds_or_as_a_date_comes_first() -> None:
    both = httpx.Headers({"retry-after": "17", "x-ratelimit-reset": str(int(NOW) + 40)})
    assert requested_wait(429, both, NOW) == 17.0
    dated = httpx.Headers({"retry-after": "Sun, 15 Jun 2025 15:07:00 GMT"})
    # 2025-06-15T15:07:00Z is Unix 1,750,000,020: 30 s after the `now` given.
    assert requested_wait(503, dated, 1_750_000_020.0 - 30.0) == 30.0


def test_x_ratelimit_reset_is_the_fallback_for_a_429_only() -> None:
    reset = httpx.Headers({"x-ratelimit-reset": str(int(NOW) + 40)})
    assert requested_wait(429, reset, NOW) == 40.0
    assert requested_wait(503, reset, NOW) is None  # every answer carries the header
    assert requested_wait(429, httpx.Headers({"x-ratelimit-reset": str(int(NOW) - 5)}), NOW) == 0
    assert requested_wait(429, httpx.Headers(), NOW) is None


def _answer(status: int, **headers: str) -> httpx.Response:
    return httpx.Response(status, headers=headers)


def test_which_answers_are_retried_and_for_how_long() -> None:
    policy = RetryPolicy(max_retries=2, max_wait=60)
    assert policy.after_response(_answer(429, **{"retry-after": "3"}), attempt=0) == 3.0
    assert policy.after_response(_answer(503, **{"retry-after": "1"}), attempt=1) == 1.0
    assert policy.after_response(_answer(429, **{"retry-after": "3"}), attempt=2) is None
    assert policy.after_response(_answer(429, **{"retry-after": "3600"}), attempt=0) is None
    for status in (200, 400, 404, 409, 500):
        assert policy.after_response(_answer(status, **{"retry-after": "1"}), attempt=0) is None
    backoff = policy.after_response(_answer(503), attempt=1)
    assert backoff is not None
    assert 0.5 <= backoff <= 1.0  # 0.5 s × 2¹, jittered down by up to half


@pytest.mark.parametrize(
    ("method", "error", "retried"),
    [
        ("PATCH", httpx.ConnectError("refused"), True),  # never sent: safe for any method
        ("GET", httpx.ReadError("reset"), True),
        ("DELETE", httpx.RemoteProtocolError("gone"), True),
        ("POST", httpx.ReadError("reset"), True),  # carries its Idempotency-Key
        ("PATCH", httpx.ReadError("reset"), False),
        ("GET", httpx.ReadTimeout("slow"), False),  # a timeout is the caller's budget
    ],
)
def test_which_broken_connections_are_retried(method: str, error: Exception, retried: bool) -> None:
    request = httpx.Request(method, "http://api.example/api/v1/systems")
    policy = RetryPolicy(max_retries=1)
    assert (policy.after_error(request, error, attempt=0) is not None) is retried
    assert policy.after_error(request, error, attempt=1) is None
