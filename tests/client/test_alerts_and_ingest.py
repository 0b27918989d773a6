"""Alerts, ingest tokens, a data logger's `IngestClient` and the liveness probe through the SDK,
against the real server (on SQLite and PostgreSQL): filters and pages of alerts, an alert
resolved by a new reading, a logger's upload, its retries (429 from the token's own window,
503, a lost answer) and a revoked token; the async client the same way."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from solarapi.ingest.tokens import generate_token
from solarapi_client import (
    AsyncClient,
    AsyncIngestClient,
    AuthenticationError,
    Client,
    IngestClient,
    NotFoundError,
    RateLimitError,
    ServiceUnavailableError,
    SolarApiError,
)
from solarapi_client.models import Alert, ModelParameters, Monitoring, System
from tests.client.conftest import Served, unreachable_database_env
from tests.client.proxy import flaky_proxy
from tests.support import Tenant
from tests.support import served as served_process

ROOF = {"latitude": 52.38, "longitude": 4.64, "timezone": "Europe/Amsterdam"}
LONG_AGO = datetime(2025, 5, 1, 12, tzinfo=UTC)


# Polling, not sleeping a fixed time: the alert rules run as a job after each upload.
POLL_SECONDS = 0.5
DEADLINE_SECONDS = 60.0


def _until(what: str, found: Callable[[], Alert | None]) -> Alert:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while time.monotonic() < deadline:
        alert = found()
        if alert is not None:
            return alert
        time.sleep(POLL_SECONDS)
    raise AssertionError(f"{what} within {DEADLINE_SECONDS} s")


def _first_alert(client: Client, system_id: str) -> Alert:
    return _until(
        f"no alert for {system_id}",
        lambda: next(iter(client.alerts.list(system_id=system_id).first_page().data), None),
    )


def _resolved(client: Client, alert_id: str) -> Alert:
    def found() -> Alert | None:
        alert = client.alerts.get(alert_id)
        return alert if alert.status == "resolved" else None

    return _until(f"{alert_id} not resolved", found)


def _last_ended_quarter_hour() -> datetime:
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    return now - timedelta(minutes=now.minute % 15 + 15)


def test_alerts_filter_page_and_resolve(client: Client) -> None:
    # Systems whose only reading is long past: each upload's evaluation opens system.offline.
    systems: list[System] = []
    for i in range(3):
        systems.append(client.systems.create(name=f"Quiet {i}", capacity_kwp=4.0, location=ROOF))
        client.readings.upload(systems[-1].id, [{"timestamp": LONG_AGO, "energy_wh": 300.0}])
    opened = [(system, _first_alert(client, system.id)) for system in systems]
    assert {alert.type for _, alert in opened} == {"system.offline"}
    ids = {alert.id for _, alert in opened}

    pages = list(client.alerts.list(page_size=2).pages())
    assert [len(page.data) for page in pages] == [2, 1]
    assert pages[0].pagination.total == 3
    listed = [alert.id for page in pages for alert in page.data]
    assert set(listed) == ids
    # Newest first. The server orders by the stored instant (then id); the answer shows it to
    # the second, so two alerts opened within one second by concurrent evaluations may list in
    # either id order: only the shown times are compared (a tie broken by id here once listed
    # them the other way round).
    opened_at = {alert.id: alert.opened_at for _, alert in opened}
    shown = [opened_at[alert_id] for alert_id in listed]
    assert shown == sorted(shown, reverse=True)
    assert {a.id for a in client.alerts.list(status="open", type="system.offline")} == ids
    assert list(client.alerts.list(status="resolved")) == []
    assert list(client.alerts.list(type="system.zero_production")) == []
    system, alert = opened[1]
    assert [a.id for a in client.alerts.list(system_id=system.id)] == [alert.id]
    with pytest.raises(NotFoundError):
        client.alerts.get("alr_does_not_exist")

    # A new reading resolves the system's offline alert (evaluated after that upload).
    client.readings.upload(
        system.id, [{"timestamp": _last_ended_quarter_hour(), "energy_wh": 120.0}]
    )
    resolved = _resolved(client, alert.id)
    assert resolved.resolved_at is not None
    assert resolved.resolved_at >= resolved.opened_at
    assert resolved.opened_at == alert.opened_at
    assert [a.id for a in client.alerts.list(status="resolved")] == [alert.id]
    assert {a.id for a in client.alerts.list(status="open")} == ids - {alert.id}


def test_monitoring_and_model_are_typed_fields_of_create_and_update(client: Client) -> None:
    system = client.systems.create(
        name="Tuned roof",
        capacity_kwp=4.0,
        location=ROOF,
        model=ModelParameters(gamma_pdc_pct_per_c=-0.3, losses_pct=10.0, inverter_efficiency=0.97),
        monitoring=Monitoring(enabled=True, offline_after_hours=6, underperformance_threshold=0.7),
    )
    assert system.model == ModelParameters(-0.3, 10.0, 0.97)
    assert system.monitoring == Monitoring(True, 6, 0.7)
    # A mapping changes only its keys; None resets every model parameter.
    changed = client.systems.update(system.id, monitoring={"offline_after_hours": 24}, model=None)
    assert changed.monitoring == Monitoring(True, 24, 0.7)
    assert changed.model == ModelParameters(-0.37, 14.0, 0.96)
    assert client.systems.get(system.id) == changed


def test_a_logger_uploads_with_its_token_from_the_environment(
    served: Served, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    system = client.systems.create(name="Logged roof", capacity_kwp=4.0, location=ROOF)
    other = client.systems.create(name="Other roof", capacity_kwp=4.0, location=ROOF)
    token = client.ingest_tokens.create(system.id, name="roof logger")
    assert token.token is not None
    monkeypatch.setenv("SOLARAPI_INGEST_TOKEN", token.token)
    monkeypatch.setenv("SOLARAPI_BASE_URL", served.base_url)
    quarter_hours = [
        {"timestamp": LONG_AGO + timedelta(minutes=15 * i), "energy_wh": 100.0 + i}
        for i in range(4)
    ]
    with IngestClient() as logger:
        assert repr(logger) == f"IngestClient(base_url={served.base_url!r})"
        assert token.token not in repr(logger)
        result = logger.upload(quarter_hours)
    assert (result.received, result.inserted, result.updated) == (4, 4, 0)
    # The token's system got them, and only it.
    series = client.readings.get(
        system.id, start=LONG_AGO, end=LONG_AGO + timedelta(hours=1), interval="15m"
    )
    assert [bucket.energy_wh for bucket in series.data] == [100.0, 101.0, 102.0, 103.0]
    assert client.systems.summary(other.id).energy_lifetime_wh is None
    (listed,) = client.ingest_tokens.list(system.id)
    assert listed.last_used_at is not None
    assert client.ingest_tokens.list(other.id) == []


def test_a_revoked_token_is_refused(served: Served, client: Client) -> None:
    system = client.systems.create(name="Revoked", capacity_kwp=4.0, location=ROOF)
    token = client.ingest_tokens.create(system.id, name="old logger")
    assert token.token is not None
    client.ingest_tokens.revoke(system.id, token.id)
    with (
        IngestClient(token=token.token, base_url=served.base_url) as logger,
        pytest.raises(AuthenticationError) as refused,
    ):
        logger.upload([{"timestamp": LONG_AGO, "energy_wh": 1.0}])
    assert (refused.value.status, refused.value.code) == (401, "unauthorized")
    with pytest.raises(NotFoundError):
        client.ingest_tokens.revoke(system.id, "itk_does_not_exist")


def _exhaust_token_window(served: Served, token: str) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=served.base_url, headers=headers, timeout=30) as http:
        # An empty batch is refused (400) after it was counted: the window fills cheaply.
        while http.post("/api/v1/ingest/readings", json={"readings": []}).status_code != 429:
            pass


def test_the_ingest_client_waits_what_the_tokens_429_asks(served: Served, client: Client) -> None:
    system = client.systems.create(name="Chatty logger", capacity_kwp=4.0, location=ROOF)
    token = client.ingest_tokens.create(system.id, name="chatty").token
    assert token is not None
    _exhaust_token_window(served, token)
    answers: list[httpx.Response] = []
    waits: list[float] = []
    http = httpx.Client(timeout=30, event_hooks={"response": [answers.append]})
    refused: RateLimitError | None = None
    with IngestClient(
        token=token, base_url=served.base_url, http_client=http, max_retries=2, sleep=waits.append
    ) as logger:
        try:
            logger.upload([{"timestamp": LONG_AGO, "energy_wh": 5.0}])
        except RateLimitError as error:
            refused = error
    if refused is not None:
        # Still inside the token's minute: three refusals, the last one raised.
        assert [a.status_code for a in answers] == [429, 429, 429]
        assert refused.retry_after == float(answers[-1].headers["retry-after"])
    else:
        assert answers[-1].status_code == 200  # the minute turned while retrying
    refusals = [a for a in answers if a.status_code == 429]
    assert waits == [float(a.headers["retry-after"]) for a in refusals[: len(waits)]]
    assert len(waits) == len(answers) - 1
    # The account's own window is untouched by the token's requests.
    assert client.account.get().usage.minute < 20


def test_a_lost_ingest_answer_is_sent_again(served: Served, client: Client) -> None:
    system = client.systems.create(name="Lost answer logger", capacity_kwp=4.0, location=ROOF)
    token = client.ingest_tokens.create(system.id, name="flaky network").token
    assert token is not None
    waits: list[float] = []
    with (
        flaky_proxy(served.base_url, "after", drops=1) as proxy,
        IngestClient(token=token, base_url=proxy.url, sleep=waits.append) as logger,
    ):
        result = logger.upload([{"timestamp": LONG_AGO, "energy_wh": 7.5}])
    assert len(proxy.requests) == 2
    assert len(waits) == 1
    # The retry carried the first attempt's Idempotency-Key: the first answer is replayed
    # (the reading inserted once), and the upload raised one readings.uploaded, not two.
    key = proxy.headers_of(0)["idempotency-key"]
    assert key
    assert proxy.headers_of(1)["idempotency-key"] == key
    assert (result.received, result.inserted, result.updated) == (1, 1, 0)
    uploads = client.events.list(type="readings.uploaded")
    assert [event.data["system_id"] for event in uploads].count(system.id) == 1
    series = client.readings.get(
        system.id, start=LONG_AGO, end=LONG_AGO + timedelta(minutes=15), interval="15m"
    )
    assert [bucket.energy_wh for bucket in series.data] == [7.5]


def test_503_is_retried_for_a_logger_and_liveness_still_answers(tmp_path: Path) -> None:
    env = unreachable_database_env(tmp_path)
    answers: list[httpx.Response] = []
    waits: list[float] = []
    http = httpx.Client(timeout=30, event_hooks={"response": [answers.append]})
    with served_process(env) as server:
        with (
            IngestClient(token=generate_token(), base_url=server.base, http_client=http,
                         max_retries=2, sleep=waits.append) as logger,
            pytest.raises(ServiceUnavailableError) as unavailable,
        ):  # fmt: skip
            logger.upload([{"timestamp": LONG_AGO, "energy_wh": 1.0}])
        # The process serves requests: the liveness probe says so, readiness does not. Its 503
        # carries the health body, returned as the answer (not raised, not retried).
        health_answers: list[httpx.Response] = []
        health_http = httpx.Client(timeout=30, event_hooks={"response": [health_answers.append]})
        with Client(
            api_key="pk_live_" + "a" * 38, base_url=server.base, http_client=health_http
        ) as api:
            assert api.liveness().status == "ok"
            not_ready = api.health()
        assert not_ready.status == "unavailable"
        assert not_ready.checks.database == "unavailable"
        assert not_ready.tzdata
        assert [a.status_code for a in health_answers] == [200, 503]  # liveness, health once
    assert [a.status_code for a in answers] == [503, 503, 503]
    assert waits == [float(a.headers["retry-after"]) for a in answers[:2]]
    assert unavailable.value.code == "unavailable"


@pytest.mark.parametrize(
    "token",
    ["ik_…", "ik_" + "a" * 37, " ik_" + "a" * 38, "ik_" + "a" * 37 + "é", "pk_live_" + "a" * 38],
)
def test_a_malformed_token_is_refused_at_construction(token: str) -> None:
    for logger_class in (IngestClient, AsyncIngestClient):
        with pytest.raises(SolarApiError, match="malformed ingest token") as refused:
            logger_class(token=token, base_url="http://h")
        assert token not in str(refused.value) or len(token) <= 7
    with pytest.raises(SolarApiError, match="ingest token: it only uploads"):
        Client(api_key="ik_" + "a" * 38, base_url="http://h")


def test_without_a_token_the_ingest_client_says_where_to_put_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SOLARAPI_INGEST_TOKEN", raising=False)
    with pytest.raises(SolarApiError, match="SOLARAPI_INGEST_TOKEN"):
        IngestClient()


async def test_the_async_clients_read_alerts_and_upload_as_a_logger(
    served: Served, enterprise: Tenant
) -> None:
    async with AsyncClient(api_key=enterprise.live, base_url=served.base_url) as api:
        assert (await api.liveness()).status == "ok"
        system = await api.systems.create(name="Async logger", capacity_kwp=2.0, location=ROOF)
        token = await api.ingest_tokens.create(system.id, name="async logger")
        assert token.token is not None
        async with AsyncIngestClient(token=token.token, base_url=served.base_url) as logger:
            result = await logger.upload([{"timestamp": LONG_AGO, "energy_wh": 9.0}])
        assert result.inserted == 1
        # The logger's upload is the system's only, and long past: system.offline opens.
        deadline = time.monotonic() + DEADLINE_SECONDS
        alerts: list[Alert] = []
        while not alerts and time.monotonic() < deadline:
            alerts = await api.alerts.list(system_id=system.id).to_list()
            if not alerts:
                await asyncio.sleep(POLL_SECONDS)
        assert [alert.type for alert in alerts] == ["system.offline"]
        assert await api.alerts.get(alerts[0].id) == alerts[0]
        listed = await api.ingest_tokens.list(system.id)
        assert [t.id for t in listed] == [token.id]
        await api.ingest_tokens.revoke(system.id, token.id)
        assert await api.ingest_tokens.list(system.id) == []
