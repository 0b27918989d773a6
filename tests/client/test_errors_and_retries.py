"""Typed errors, rate-limit retries and retries after broken connections, all against the real
server (the broken connections come from a proxy in front of it, see proxy.py)."""

from __future__ import annotations

import contextlib
import logging
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from solarapi_client import (
    AsyncClient,
    AuthenticationError,
    Client,
    ConnectionError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    RetryPolicy,
    RetryWait,
    ServiceUnavailableError,
    SolarApiError,
    ValidationError,
)
from tests.client.conftest import Served, unreachable_database_env
from tests.client.proxy import flaky_proxy
from tests.support import Tenant
from tests.support import served as served_process

ROOF = {"latitude": 52.0, "longitude": 5.0, "timezone": "Europe/Amsterdam"}


def test_errors_carry_code_message_status_and_request_id(
    client: Client, served: Served, pro: Tenant
) -> None:
    with pytest.raises(NotFoundError) as missing:
        client.systems.get("sys_does_not_exist")
    error = missing.value
    assert (error.status, error.code) == (404, "not_found")
    assert error.request_id is not None
    assert error.request_id.startswith("req_")
    assert error.message == error.body["error"]
    assert error.request_id in str(error)

    with pytest.raises(ValidationError) as invalid:
        client.readings.get("sys_x", interval="2x")  # type: ignore[arg-type]
    assert (invalid.value.status, invalid.value.code) == (400, "validation")
    assert "'2x'" in invalid.value.message

    with Client(api_key=pro.live, base_url=served.base_url) as read_only:
        with pytest.raises(PermissionDeniedError) as forbidden:
            read_only.systems.create(name="x", capacity_kwp=1.0, location=ROOF)
        assert forbidden.value.code == "forbidden"
        assert "Enterprise" in forbidden.value.message

    typo = pro.live[:-1] + ("A" if pro.live[-1] != "A" else "B")
    with Client(api_key=typo, base_url=served.base_url) as wrong:
        with pytest.raises(AuthenticationError) as unauthorized:
            wrong.account.get()
        assert (unauthorized.value.status, unauthorized.value.code) == (401, "unauthorized")


def test_a_naive_datetime_is_refused_before_sending(client: Client) -> None:
    with pytest.raises(ValueError, match="no time zone"):
        client.readings.get("sys_x", start=datetime(2025, 6, 1))


def _exhaust_minute_window(served: Served, key: str) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=served.base_url, headers=headers, timeout=30) as http:
        while http.get("/api/v1/account").status_code != 429:
            pass


def test_429_waits_what_the_api_asks_then_raises(served: Served, pro: Tenant) -> None:
    _exhaust_minute_window(served, pro.live)
    answers: list[httpx.Response] = []
    waits: list[float] = []

    def keep(response: httpx.Response) -> None:
        answers.append(response)

    http = httpx.Client(timeout=30, event_hooks={"response": [keep]})
    with Client(
        api_key=pro.live, base_url=served.base_url, http_client=http, max_retries=2,
        sleep=waits.append,
    ) as api:  # fmt: skip
        refused: RateLimitError | None = None
        try:
            api.account.get()
        except RateLimitError as error:
            refused = error
    if refused is not None:
        # Still inside the minute: three refusals, the last one raised.
        assert [a.status_code for a in answers] == [429, 429, 429]
        assert refused.retry_after == float(answers[-1].headers["retry-after"])
        assert refused.code == "rate_limit"
    else:
        # The minute turned while retrying: the last answer is the success.
        assert answers[-1].status_code == 200
    # Every wait is the Retry-After of the refusal before it, never a guess.
    refusals = [a for a in answers if a.status_code == 429]
    assert waits == [float(a.headers["retry-after"]) for a in refusals[: len(waits)]]
    assert len(waits) == len(answers) - 1


def test_a_wait_longer_than_max_wait_is_raised_at_once(served: Served, pro: Tenant) -> None:
    _exhaust_minute_window(served, pro.live)
    waits: list[float] = []
    with (
        Client(
            api_key=pro.live,
            base_url=served.base_url,
            retry=RetryPolicy(max_wait=0.5),
            sleep=waits.append,
        ) as api,
        pytest.raises(RateLimitError) as refused,
    ):
        api.account.get()
    assert waits == []
    assert refused.value.retry_after is not None
    assert refused.value.retry_after >= 1


# The rate limiter is the same on both databases and this test waits up to a minute: SQLite only
# (chosen, not skipped, so no skipped test stands in the report).
@pytest.mark.slow
@pytest.mark.parametrize("client_settings", ["sqlite"], indirect=True)
def test_a_429_is_waited_out_for_real(served: Served, pro: Tenant) -> None:
    _exhaust_minute_window(served, pro.live)
    with Client(api_key=pro.live, base_url=served.base_url) as api:
        account = api.account.get()  # sleeps until the minute window resets
    assert account.usage.minute == 1


def test_a_get_is_retried_after_a_connection_reset(served: Served, enterprise: Tenant) -> None:
    waits: list[float] = []
    with (
        flaky_proxy(served.base_url, "before", drops=2) as proxy,
        Client(api_key=enterprise.live, base_url=proxy.url, sleep=waits.append) as api,
    ):
        assert api.account.get().id == enterprise.account_id
    assert len(proxy.requests) == 3
    assert len(waits) == 2


def test_a_post_whose_answer_was_lost_is_replayed_not_repeated(
    served: Served, enterprise: Tenant, client: Client
) -> None:
    with (
        flaky_proxy(served.base_url, "after", drops=1) as proxy,
        Client(api_key=enterprise.live, base_url=proxy.url, sleep=lambda _: None) as api,
    ):
        system = api.systems.create(name="Lost answer", capacity_kwp=3.0, location=ROOF)
    assert len(proxy.requests) == 2
    first, second = proxy.headers_of(0), proxy.headers_of(1)
    assert first["idempotency-key"] == second["idempotency-key"]
    assert [s.id for s in client.systems.list()] == [system.id]  # created once


def test_every_post_gets_its_own_idempotency_key(served: Served, enterprise: Tenant) -> None:
    with (
        flaky_proxy(served.base_url, "before", drops=0) as proxy,
        Client(api_key=enterprise.live, base_url=proxy.url) as api,
    ):
        api.systems.create(name="One", capacity_kwp=1.0, location=ROOF)
        api.systems.create(name="Two", capacity_kwp=1.0, location=ROOF, idempotency_key="mine-1")
        api.account.get()
    keys = [proxy.headers_of(i).get("idempotency-key") for i in range(3)]
    assert keys[0] is not None
    assert keys[1] == "mine-1"
    assert keys[2] is None  # a GET needs none


def test_a_patch_is_not_retried_after_a_connection_reset(
    served: Served, enterprise: Tenant, client: Client
) -> None:
    system = client.systems.create(name="Patched", capacity_kwp=2.0, location=ROOF)
    with (
        flaky_proxy(served.base_url, "before", drops=1) as proxy,
        Client(api_key=enterprise.live, base_url=proxy.url, sleep=lambda _: None) as api,
        pytest.raises(ConnectionError),
    ):
        api.systems.update(system.id, name="Changed?")
    assert len(proxy.requests) == 1
    assert client.systems.get(system.id).name == "Patched"


def test_503_is_retried_as_asked_then_raised(tmp_path: Path, pro: Tenant) -> None:
    env = unreachable_database_env(tmp_path)
    answers: list[httpx.Response] = []
    waits: list[float] = []
    http = httpx.Client(timeout=30, event_hooks={"response": [answers.append]})
    with (
        served_process(env) as server,
        Client(api_key=pro.live, base_url=server.base, http_client=http, max_retries=2,
               sleep=waits.append) as api,
        pytest.raises(ServiceUnavailableError) as unavailable,
    ):  # fmt: skip
        api.account.get()
    assert [a.status_code for a in answers] == [503, 503, 503]
    assert waits == [float(a.headers["retry-after"]) for a in answers[:2]]
    assert unavailable.value.code == "unavailable"
    assert unavailable.value.request_id == answers[-1].headers["x-request-id"]


async def test_the_async_client_retries_the_same_way(served: Served, enterprise: Tenant) -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    with flaky_proxy(served.base_url, "after", drops=1) as proxy:
        async with AsyncClient(api_key=enterprise.live, base_url=proxy.url, sleep=sleep) as api:
            system = await api.systems.create(name="Async lost", capacity_kwp=1.0, location=ROOF)
            with pytest.raises(NotFoundError) as missing:
                await api.systems.get("sys_nope")
    assert len(waits) == 1
    assert len(proxy.requests) == 3
    assert proxy.headers_of(0)["idempotency-key"] == proxy.headers_of(1)["idempotency-key"]
    assert missing.value.request_id is not None
    with Client(api_key=enterprise.live, base_url=served.base_url) as check:
        assert [s.id for s in check.systems.list()] == [system.id]


def test_the_key_is_never_in_a_clients_repr() -> None:
    key = "pk_live_" + "a" * 38
    sync, async_ = Client(api_key=key, base_url="http://h"), AsyncClient(api_key=key)
    assert repr(sync) == "Client(base_url='http://h')"
    assert key not in repr(async_)
    assert repr(async_).startswith("AsyncClient(")
    sync.close()


@pytest.mark.parametrize(
    "key",
    ["pk_live_…", "pk_live_" + "a" * 37, " pk_live_" + "a" * 38, "pk_prod_" + "a" * 38,
     "pk_live_" + "a" * 37 + "é", "sk_live_" + "a" * 38],
)  # fmt: skip
def test_a_malformed_key_is_refused_at_construction_with_the_sdks_message(key: str) -> None:
    for client_class in (Client, AsyncClient):
        with pytest.raises(SolarApiError, match="malformed API key") as refused:
            client_class(api_key=key, base_url="http://h")
        assert key not in str(refused.value) or len(key) <= 9
        if not key.isascii():
            assert "placeholder" in str(refused.value)


def test_a_429_wait_is_logged_and_told_to_the_hook(
    served: Served, pro: Tenant, caplog: pytest.LogCaptureFixture
) -> None:
    _exhaust_minute_window(served, pro.live)
    told: list[RetryWait] = []
    waits: list[float] = []
    policy = RetryPolicy(max_retries=1, on_wait=told.append)
    caplog.set_level(logging.INFO, logger="solarapi_client")
    with (
        Client(api_key=pro.live, base_url=served.base_url, retry=policy, sleep=waits.append) as api,
        contextlib.suppress(RateLimitError),
    ):
        api.account.get()
    # One wait (unless the minute turned before the first answer): told, logged, slept.
    assert [event.seconds for event in told] == waits
    for event in told:
        assert (event.status, event.attempt, event.method) == (429, 1, "GET")
        assert event.url.endswith("/api/v1/account")
    logged = [r.getMessage() for r in caplog.records if r.name == "solarapi_client"]
    assert len(logged) == len(told)
    assert all(message.startswith("HTTP 429: waiting ") for message in logged)
