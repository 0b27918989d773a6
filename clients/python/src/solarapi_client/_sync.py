# Generated from _async.py by clients/python/scripts/generate_sync.py (make sdk-sync).
# Do not edit: change _async.py and generate again.
"""The clients and everything that waits on the network: the API client with its resources,
the data logger's ingest client, the pagers and the change feed.

`_async.py` is the one written by hand (`AsyncClient`, `AsyncIngestClient`, `AsyncPager`,
`AsyncChangeFeed`); `_sync.py` is generated from it by `clients/python/scripts/generate_sync.py`
(`make sdk-sync`): the same code without `async` and `await`, with `Client`, `IngestClient`,
`SyncPager` and `ChangeFeed`. Change `_async.py`, then regenerate; a test fails while the two
differ. Each method says once what it sends (a `Call`: method, path, query, body, answer
type); `_core.py` builds the request and reads the answer, with no I/O.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from time import monotonic
from types import TracebackType
from typing import Generic, Self, TypeVar

import httpx

from solarapi_client._core import (
    API_KEY,
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    INGEST_TOKEN,
    MAX_PAGE_SIZE,
    NOT_GIVEN,
    Call,
    Core,
    Day,
    Identified,
    IrradianceInput,
    LocationInput,
    ModelInput,
    MonitoringInput,
    NotGiven,
    OrientationInput,
    Page,
    ReadingInput,
    RetryPolicy,
    SyncFetch,
    SyncSleep,
    Timestamp,
    body,
    fleet_query,
    health_call,
    irradiance_body,
    many,
    nothing,
    one,
    paged,
    path_id,
    query,
    raw,
    readings_body,
)
from solarapi_client.errors import TimeoutError
from solarapi_client.fleet import (
    MAX_CHANGES_PAGE,
    MAX_FLEET_PAGE,
    Change,
    ChangePage,
    FleetPage,
    FleetReadings,
    FleetSummary,
    FleetValue,
    fitting_page,
    fleet_page,
    merge,
)
from solarapi_client.models import (
    Account,
    Alert,
    AlertStatus,
    AlertType,
    DataSource,
    Declaration,
    DeclarationStatus,
    DeclarationType,
    Delivery,
    Event,
    Health,
    IngestToken,
    Interval,
    IrradianceList,
    Liveness,
    MarketValueSeries,
    PerformanceInterval,
    PerformanceSeries,
    PriceInterval,
    PriceSeries,
    ReadingSeries,
    Report,
    ReportFormat,
    ReportStatus,
    ReportType,
    Summary,
    System,
    SystemStatus,
    Transition,
    UploadResult,
    Webhook,
    WebhookStatus,
    Zone,
)
from solarapi_client.ranges import as_datetime, next_cursor, piece_end

T = TypeVar("T")
F = TypeVar("F")
H = TypeVar("H", bound=Identified)


class _Connection:
    """What both clients share: the HTTP connection pool, the retry loop and closing."""

    def __init__(
        self,
        core: Core,
        timeout: float | httpx.Timeout,
        http_client: httpx.Client | None,
        sleep: SyncSleep,
    ) -> None:
        self._core = core
        self._http = http_client or httpx.Client(timeout=timeout)
        self._http.headers.update(core.headers)
        self._sleep = sleep

    def send(self, call: Call[T]) -> T:
        """Send one call, retried as the `RetryPolicy` says; its typed answer or an error."""
        request = self._core.build(self._http, call)
        attempt = 0
        while True:
            try:
                response = self._http.send(request)
            except httpx.TransportError as exc:
                delay = self._core.retry.after_error(request, exc, attempt)
                if delay is None:
                    raise self._core.transport_error(exc) from exc
            else:
                delay = (
                    None
                    if call.answers(response)
                    else self._core.retry.after_response(response, attempt)
                )
                if delay is None:
                    return self._core.result(call, response)
                response.close()
            self._sleep(delay)
            attempt += 1

    def __repr__(self) -> str:
        # Never the key or token: a client printed in a log must not leak it.
        return f"{type(self).__name__}(base_url={self._core.base_url!r})"

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class Client(_Connection):
    """The Solar Energy Platform API.

    `AsyncClient(api_key="pk_live_…", base_url="https://solar.example.com")` (or `Client`);
    both default to the `SOLARAPI_API_KEY` and `SOLARAPI_BASE_URL` environment variables.
    Use it as a context manager (`async with` for `AsyncClient`), or close it (`close()`,
    `await aclose()`), to release its connections.
    """

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        retry: RetryPolicy | None = None,
        http_client: httpx.Client | None = None,
        sleep: SyncSleep = time.sleep,
    ) -> None:
        credential = API_KEY.given_or_from_environment(api_key)
        core = Core(credential, base_url, retry or RetryPolicy(max_retries=max_retries))
        super().__init__(core, timeout, http_client, sleep)
        self.account = AccountResource(self)
        self.systems = Systems(self)
        self.readings = Readings(self)
        self.irradiance = Irradiance(self)
        self.portfolio = Portfolio(self)
        self.market_prices = MarketPrices(self)
        self.market_value = MarketValue(self)
        self.declarations = Declarations(self)
        self.reports = Reports(self)
        self.webhooks = Webhooks(self)
        self.events = Events(self)
        self.alerts = Alerts(self)
        self.ingest_tokens = IngestTokens(self)

    def pager(self, call_for_page: Callable[[int], Call[Page[H]]]) -> SyncPager[H]:
        return SyncPager(lambda number: self.send(call_for_page(number)))

    def health(self) -> Health:
        """The readiness check (`GET /health`): status, version, database and rate limiter.
        A server that cannot reach its database answers 503 with `status` "unavailable": that
        is returned, not raised or retried (the caller asked for the current state)."""
        return self.send(health_call())

    def liveness(self) -> Liveness:
        """The liveness check (`GET /health/live`): `status` is "ok" while the process serves
        requests, whatever the database says. Not counted in any rate limit."""
        return self.send(Call("GET", "/health/live", one(Liveness)))


class IngestClient(_Connection):
    """A data logger's client: it uploads the readings of one system with that system's ingest
    token (`ik_…`, from `client.ingest_tokens.create(...)` or the dashboard), the one thing a
    token may do, on any plan.

    `AsyncIngestClient(token="ik_…", base_url="https://solar.example.com")` (or
    `IngestClient`); both default to the `SOLARAPI_INGEST_TOKEN` and `SOLARAPI_BASE_URL`
    environment variables. A token has 60 requests a minute of its own: a 429 (or a 503) is
    waited out and sent again as for `Client`, under the same `RetryPolicy`.
    """

    def __init__(
        self,
        token: str | None = None,
        *,
        base_url: str | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        retry: RetryPolicy | None = None,
        http_client: httpx.Client | None = None,
        sleep: SyncSleep = time.sleep,
    ) -> None:
        credential = INGEST_TOKEN.given_or_from_environment(token)
        core = Core(credential, base_url, retry or RetryPolicy(max_retries=max_retries))
        super().__init__(core, timeout, http_client, sleep)

    def upload(self, readings: Iterable[ReadingInput]) -> UploadResult:
        """Store 1–10,000 quarter-hour readings of the token's system (all or nothing), as
        `client.readings.upload` does. Sending the same readings again stores nothing new
        (they replace themselves), so an upload whose answer was lost is sent again."""
        call = Call("POST", "/ingest/readings", one(UploadResult), json=readings_body(readings))
        return self.send(call)


class SyncPager(Generic[H]):
    """`for item in pager` (`async for` with `AsyncClient`) walks every page;
    `pager.pages()` yields the pages themselves."""

    def __init__(self, fetch: SyncFetch[int, Page[H]]) -> None:
        self._fetch = fetch

    def pages(self) -> Iterator[Page[H]]:
        number = 1
        while True:
            page = self._fetch(number)
            yield page
            if not page.pagination.has_more or not page.data:
                return
            number += 1

    def __iter__(self) -> Iterator[H]:
        seen: set[str] = set()
        for page in self.pages():
            for item in page.data:
                if item.id not in seen:
                    seen.add(item.id)
                    yield item

    def first_page(self) -> Page[H]:
        return self._fetch(1)

    def to_list(self) -> builtins.list[H]:
        return [item for item in self]


@dataclass
class ChangeFeed:
    """Iterate to get every change after `cursor`, page by page, until the feed has no more;
    `cursor` then holds the position to persist and pass next time. Rows come in commit
    order: apply each over any earlier row of the same (system_id, timestamp)."""

    fetch: SyncFetch[str | None, ChangePage]
    wait: SyncSleep
    cursor: str | None = None
    pages: int = field(default=0)

    def __iter__(self) -> Iterator[Change]:
        delay = 0.05
        while True:
            page = self.fetch(self.cursor)
            self.pages += 1
            for change in page.data:
                yield change
            # Persist only after the page's rows were handed out.
            self.cursor = page.next_cursor
            if not page.has_more:
                return
            if page.data:
                delay = 0.05
            else:
                # Newer changes are committed but wait behind an upload still in progress.
                self.wait(delay)
                delay = min(delay * 2, 2.0)


class _Resource:
    def __init__(self, client: Client) -> None:
        self._client = client


class AccountResource(_Resource):
    def get(self) -> Account:
        """The key in use: its account, plan, environment, limits and usage."""
        return self._client.send(Call("GET", "/account", one(Account)))


class Systems(_Resource):
    def list(
        self,
        *,
        status: SystemStatus | None = None,
        market_zone: str | None = None,
        page_size: int = MAX_PAGE_SIZE,
    ) -> SyncPager[System]:
        """Every system, oldest first, fetched page by page as you iterate."""
        return self._client.pager(
            lambda page: Call(
                "GET",
                "/systems",
                paged(System),
                query(page=page, limit=page_size, status=status, market_zone=market_zone),
            )
        )

    def get(self, system_id: str) -> System:
        return self._client.send(Call("GET", f"/systems/{path_id(system_id)}", one(System)))

    def create(
        self,
        *,
        name: str,
        capacity_kwp: float,
        location: LocationInput,
        inverter_capacity_kw: float | NotGiven | None = NOT_GIVEN,
        orientation: OrientationInput | NotGiven | None = NOT_GIVEN,
        market_zone: str | NotGiven | None = NOT_GIVEN,
        installed_on: Day | NotGiven | None = NOT_GIVEN,
        status: SystemStatus | NotGiven = NOT_GIVEN,
        data_source: DataSource | NotGiven = NOT_GIVEN,
        model: ModelInput | NotGiven | None = NOT_GIVEN,
        monitoring: MonitoringInput | NotGiven | None = NOT_GIVEN,
        idempotency_key: str | None = None,
    ) -> System:
        """A new system (Enterprise). `model` overrides performance-model parameters,
        `monitoring` the alert rules' settings; a field left out takes the API's default."""
        payload = body(
            name=name,
            capacity_kwp=capacity_kwp,
            location=location,
            inverter_capacity_kw=inverter_capacity_kw,
            orientation=orientation,
            market_zone=market_zone,
            installed_on=installed_on,
            status=status,
            data_source=data_source,
            model=model,
            monitoring=monitoring,
        )
        return self._client.send(
            Call("POST", "/systems", one(System), json=payload, idempotency_key=idempotency_key)
        )

    def update(
        self,
        system_id: str,
        *,
        name: str | NotGiven = NOT_GIVEN,
        capacity_kwp: float | NotGiven = NOT_GIVEN,
        inverter_capacity_kw: float | NotGiven | None = NOT_GIVEN,
        location: LocationInput | NotGiven = NOT_GIVEN,
        orientation: OrientationInput | NotGiven = NOT_GIVEN,
        market_zone: str | NotGiven | None = NOT_GIVEN,
        installed_on: Day | NotGiven | None = NOT_GIVEN,
        status: SystemStatus | NotGiven = NOT_GIVEN,
        model: ModelInput | NotGiven | None = NOT_GIVEN,
        monitoring: MonitoringInput | NotGiven = NOT_GIVEN,
    ) -> System:
        """Change the fields given (None sets an optional field to null; `model=None` resets
        every model parameter). In `location`, `orientation`, `model` and `monitoring` a
        mapping may hold only the keys to change."""
        payload = body(
            name=name,
            capacity_kwp=capacity_kwp,
            inverter_capacity_kw=inverter_capacity_kw,
            location=location,
            orientation=orientation,
            market_zone=market_zone,
            installed_on=installed_on,
            status=status,
            model=model,
            monitoring=monitoring,
        )
        path = f"/systems/{path_id(system_id)}"
        return self._client.send(Call("PATCH", path, one(System), json=payload))

    def delete(self, system_id: str) -> None:
        self._client.send(Call("DELETE", f"/systems/{path_id(system_id)}", nothing))

    def summary(self, system_id: str) -> Summary:
        path = f"/systems/{path_id(system_id)}/summary"
        return self._client.send(Call("GET", path, one(Summary)))

    def performance(
        self,
        system_id: str,
        *,
        start: Timestamp | None = None,
        end: Timestamp | None = None,
        interval: PerformanceInterval | None = None,
    ) -> PerformanceSeries:
        """Expected against actual per bucket of the system's local calendar (`1d` default,
        `1w`, `1M`): PR, temperature-corrected PR, EPI, quality flags; `meta.model` holds
        every parameter of the model."""
        path = f"/systems/{path_id(system_id)}/performance"
        params = query(from_=start, to=end, interval=interval)
        return self._client.send(Call("GET", path, one(PerformanceSeries), params))


class Irradiance(_Resource):
    def upload(
        self,
        system_id: str,
        readings: Iterable[IrradianceInput],
        *,
        idempotency_key: str | None = None,
    ) -> UploadResult:
        """Store 1–10,000 quarter-hours of plane-of-array irradiance (all or nothing)."""
        path = f"/systems/{path_id(system_id)}/irradiance"
        payload = irradiance_body(readings)
        return self._client.send(
            Call("POST", path, one(UploadResult), json=payload, idempotency_key=idempotency_key)
        )

    def get(
        self, system_id: str, *, start: Timestamp | None = None, end: Timestamp | None = None
    ) -> IrradianceList:
        """Stored sensor and satellite quarter-hours of [start, end) (at most 31 days)."""
        path = f"/systems/{path_id(system_id)}/irradiance"
        params = query(from_=start, to=end)
        return self._client.send(Call("GET", path, one(IrradianceList), params))


class Readings(_Resource):
    def get(
        self,
        system_id: str,
        *,
        start: Timestamp | None = None,
        end: Timestamp | None = None,
        interval: Interval | None = None,
    ) -> ReadingSeries:
        """Production in buckets from `start` (inclusive) to `end` (exclusive); the API's
        defaults are the last 24 hours in `1h` buckets."""
        path = f"/systems/{path_id(system_id)}/readings"
        params = query(from_=start, to=end, interval=interval)
        return self._client.send(Call("GET", path, one(ReadingSeries), params))

    def get_range(
        self, system_id: str, *, start: Timestamp, end: Timestamp, interval: Interval = "1h"
    ) -> Iterator[ReadingSeries]:
        """A range of any length, as consecutive series of at most 9,000 buckets each: every
        piece ends on a bucket boundary (the next starts there), so no bucket is in two pieces
        and the pieces' totals add up to the range's. Each piece is one request."""
        cursor, stop = as_datetime(start, "start"), as_datetime(end, "end")
        while cursor < stop:
            series = self.get(
                system_id, start=cursor, end=piece_end(cursor, stop, interval), interval=interval
            )
            yield series
            cursor = next_cursor(cursor, series.meta.to)

    def upload(
        self,
        system_id: str,
        readings: Iterable[ReadingInput],
        *,
        idempotency_key: str | None = None,
    ) -> UploadResult:
        """Store 1–10,000 quarter-hour readings at once (all or nothing)."""
        path = f"/systems/{path_id(system_id)}/readings"
        payload = readings_body(readings)
        return self._client.send(
            Call("POST", path, one(UploadResult), json=payload, idempotency_key=idempotency_key)
        )

    def changes(self, *, cursor: str | None = None, limit: int | None = None) -> ChangeFeed:
        """Every reading inserted or replaced after `cursor` (None: from the first stored
        one), in commit order, following the feed until it has no more. The returned
        iterator's `cursor` is the position to persist once you have applied the rows."""
        size = limit or MAX_CHANGES_PAGE
        return ChangeFeed(
            lambda position: self._client.send(
                Call(
                    "GET", "/readings/changes", one(ChangePage), query(cursor=position, limit=size)
                )
            ),
            self._client._sleep,
            cursor,
        )


class Portfolio(_Resource):
    """A fleet in one request per 1,000 systems: every page is fetched and merged."""

    def readings(
        self,
        *,
        start: Timestamp | None = None,
        end: Timestamp | None = None,
        interval: Interval | None = None,
        system_ids: Sequence[str] | None = None,
        status: SystemStatus | None = None,
        market_zone: str | None = None,
        page_size: int = MAX_FLEET_PAGE,
    ) -> FleetReadings:
        """Every matching system's readings (`to_dataframe()`: indexed by system_id, start)."""
        filters = fleet_query(system_ids, status, market_zone)
        page_size = fitting_page(page_size, start, end, interval)
        return self._every_page(
            lambda page: Call(
                "GET",
                "/portfolio/readings",
                fleet_page(FleetReadings),
                {
                    **query(page=page, limit=page_size, from_=start, to=end, interval=interval),
                    **filters,
                },
            )
        )

    def summary(
        self,
        *,
        system_ids: Sequence[str] | None = None,
        status: SystemStatus | None = None,
        market_zone: str | None = None,
        page_size: int = MAX_FLEET_PAGE,
    ) -> FleetSummary:
        """Every matching system's summary and the fleet's totals."""
        filters = fleet_query(system_ids, status, market_zone)
        return self._every_page(
            lambda page: Call(
                "GET",
                "/portfolio/summary",
                fleet_page(FleetSummary),
                {**query(page=page, limit=page_size), **filters},
            )
        )

    def market_value(
        self,
        *,
        start: Timestamp | None = None,
        end: Timestamp | None = None,
        interval: Interval | None = None,
        system_ids: Sequence[str] | None = None,
        status: SystemStatus | None = None,
        market_zone: str | None = None,
        page_size: int = MAX_FLEET_PAGE,
    ) -> FleetValue:
        """Every matching system's market value, with per-zone and fleet totals."""
        filters = fleet_query(system_ids, status, market_zone)
        page_size = fitting_page(page_size, start, end, interval)
        return self._every_page(
            lambda page: Call(
                "GET",
                "/portfolio/market-value",
                fleet_page(FleetValue),
                {
                    **query(page=page, limit=page_size, from_=start, to=end, interval=interval),
                    **filters,
                },
            )
        )

    def _every_page(self, calls: Callable[[int], Call[FleetPage[F]]]) -> F:
        number = 1
        page = self._client.send(calls(number))
        whole = page.body
        while page.pagination.has_more:
            number += 1
            page = self._client.send(calls(number))
            whole = merge(whole, page.body)
        return whole


class MarketPrices(_Resource):
    def zones(self) -> builtins.list[Zone]:
        return self._client.send(Call("GET", "/market-prices/zones", many(Zone)))

    def get(
        self,
        zone: str,
        *,
        start: Timestamp | None = None,
        end: Timestamp | None = None,
        interval: PriceInterval | None = None,
    ) -> PriceSeries:
        params = query(zone=zone, from_=start, to=end, interval=interval)
        return self._client.send(Call("GET", "/market-prices", one(PriceSeries), params))


class MarketValue(_Resource):
    def get(
        self,
        system_id: str,
        *,
        start: Timestamp | None = None,
        end: Timestamp | None = None,
        interval: Interval | None = None,
    ) -> MarketValueSeries:
        path = f"/systems/{path_id(system_id)}/market-value"
        params = query(from_=start, to=end, interval=interval)
        return self._client.send(Call("GET", path, one(MarketValueSeries), params))


class Declarations(_Resource):
    def list(
        self,
        *,
        system_id: str | None = None,
        status: DeclarationStatus | None = None,
        type: DeclarationType | None = None,
        page_size: int = MAX_PAGE_SIZE,
    ) -> SyncPager[Declaration]:
        """Every declaration, newest first."""
        return self._client.pager(
            lambda page: Call(
                "GET",
                "/declarations",
                paged(Declaration),
                query(page=page, limit=page_size, system_id=system_id, status=status, type=type),
            )
        )

    def create(
        self,
        *,
        system_id: str,
        type: DeclarationType,
        period_start: Day,
        period_end: Day,
        energy_wh: float | NotGiven = NOT_GIVEN,
        reference: str | NotGiven | None = NOT_GIVEN,
        idempotency_key: str | None = None,
    ) -> Declaration:
        payload = body(
            system_id=system_id,
            type=type,
            period_start=period_start,
            period_end=period_end,
            energy_wh=energy_wh,
            reference=reference,
        )
        return self._client.send(
            Call(
                "POST",
                "/declarations",
                one(Declaration),
                json=payload,
                idempotency_key=idempotency_key,
            )
        )

    def get(self, declaration_id: str) -> Declaration:
        path = f"/declarations/{path_id(declaration_id)}"
        return self._client.send(Call("GET", path, one(Declaration)))

    def update(
        self,
        declaration_id: str,
        *,
        period_start: Day | NotGiven = NOT_GIVEN,
        period_end: Day | NotGiven = NOT_GIVEN,
        energy_wh: float | NotGiven = NOT_GIVEN,
        reference: str | NotGiven | None = NOT_GIVEN,
    ) -> Declaration:
        payload = body(
            period_start=period_start,
            period_end=period_end,
            energy_wh=energy_wh,
            reference=reference,
        )
        path = f"/declarations/{path_id(declaration_id)}"
        return self._client.send(Call("PATCH", path, one(Declaration), json=payload))

    def delete(self, declaration_id: str) -> None:
        path = f"/declarations/{path_id(declaration_id)}"
        self._client.send(Call("DELETE", path, nothing))

    def submit(self, declaration_id: str, *, idempotency_key: str | None = None) -> Declaration:
        return self._action(declaration_id, "submit", idempotency_key)

    def withdraw(self, declaration_id: str, *, idempotency_key: str | None = None) -> Declaration:
        return self._action(declaration_id, "withdraw", idempotency_key)

    def history(self, declaration_id: str) -> builtins.list[Transition]:
        path = f"/declarations/{path_id(declaration_id)}/history"
        return self._client.send(Call("GET", path, many(Transition)))

    def _action(self, declaration_id: str, action: str, idempotency_key: str | None) -> Declaration:
        path = f"/declarations/{path_id(declaration_id)}/{action}"
        return self._client.send(
            Call("POST", path, one(Declaration), idempotency_key=idempotency_key)
        )


class Reports(_Resource):
    def create(
        self,
        *,
        type: ReportType,
        format: ReportFormat,
        system_ids: Sequence[str] | NotGiven = NOT_GIVEN,
        start: Timestamp | NotGiven = NOT_GIVEN,
        end: Timestamp | NotGiven = NOT_GIVEN,
        interval: Interval | NotGiven = NOT_GIVEN,
        timezone: str | NotGiven = NOT_GIVEN,
        idempotency_key: str | None = None,
    ) -> Report:
        """Queue a report; `wait()` for it, then `download()` it. `timezone`: the report's
        calendar (an IANA name), needed when the systems' clocks differ."""
        payload = body(
            type=type,
            format=format,
            system_ids=list(system_ids) if not isinstance(system_ids, NotGiven) else NOT_GIVEN,
            interval=interval,
            timezone=timezone,
        )
        payload.update(body(**{"from": start, "to": end}))
        return self._client.send(
            Call("POST", "/reports", one(Report), json=payload, idempotency_key=idempotency_key)
        )

    def list(
        self,
        *,
        status: ReportStatus | None = None,
        type: ReportType | None = None,
        page_size: int = MAX_PAGE_SIZE,
    ) -> SyncPager[Report]:
        return self._client.pager(
            lambda page: Call(
                "GET",
                "/reports",
                paged(Report),
                query(page=page, limit=page_size, status=status, type=type),
            )
        )

    def get(self, report_id: str) -> Report:
        return self._client.send(Call("GET", f"/reports/{path_id(report_id)}", one(Report)))

    def delete(self, report_id: str) -> None:
        self._client.send(Call("DELETE", f"/reports/{path_id(report_id)}", nothing))

    def download(self, report_id: str) -> bytes:
        return self._client.send(Call("GET", f"/reports/{path_id(report_id)}/download", raw))

    def wait(self, report_id: str, *, timeout: float = 300.0, poll_interval: float = 1.0) -> Report:
        """Poll until the report is completed or failed (returned either way)."""
        deadline = monotonic() + timeout
        while True:
            report = self.get(report_id)
            if report.finished:
                return report
            if monotonic() >= deadline:
                raise TimeoutError(f"report {report_id} still {report.status} after {timeout} s")
            self._client._sleep(poll_interval)


class Webhooks(_Resource):
    def create(
        self,
        *,
        url: str,
        events: Sequence[str],
        description: str | NotGiven | None = NOT_GIVEN,
        idempotency_key: str | None = None,
    ) -> Webhook:
        """Register an endpoint. Keep `.secret` (shown only here) to verify deliveries."""
        payload = body(url=url, events=list(events), description=description)
        return self._client.send(
            Call("POST", "/webhooks", one(Webhook), json=payload, idempotency_key=idempotency_key)
        )

    def list(self, *, page_size: int = MAX_PAGE_SIZE) -> SyncPager[Webhook]:
        return self._client.pager(
            lambda page: Call("GET", "/webhooks", paged(Webhook), query(page=page, limit=page_size))
        )

    def get(self, webhook_id: str) -> Webhook:
        return self._client.send(Call("GET", f"/webhooks/{path_id(webhook_id)}", one(Webhook)))

    def update(
        self,
        webhook_id: str,
        *,
        url: str | NotGiven = NOT_GIVEN,
        events: Sequence[str] | NotGiven = NOT_GIVEN,
        description: str | NotGiven | None = NOT_GIVEN,
        status: WebhookStatus | NotGiven = NOT_GIVEN,
    ) -> Webhook:
        payload = body(url=url, events=events, description=description, status=status)
        path = f"/webhooks/{path_id(webhook_id)}"
        return self._client.send(Call("PATCH", path, one(Webhook), json=payload))

    def delete(self, webhook_id: str) -> None:
        self._client.send(Call("DELETE", f"/webhooks/{path_id(webhook_id)}", nothing))

    def rotate_secret(self, webhook_id: str, *, idempotency_key: str | None = None) -> Webhook:
        """A new secret (in `.secret`); the old one keeps signing for a while beside it."""
        path = f"/webhooks/{path_id(webhook_id)}/rotate-secret"
        return self._client.send(Call("POST", path, one(Webhook), idempotency_key=idempotency_key))

    def deliveries(self, webhook_id: str, *, page_size: int = MAX_PAGE_SIZE) -> SyncPager[Delivery]:
        path = f"/webhooks/{path_id(webhook_id)}/deliveries"
        return self._client.pager(
            lambda page: Call("GET", path, paged(Delivery), query(page=page, limit=page_size))
        )


class Events(_Resource):
    def list(self, *, type: str | None = None, page_size: int = MAX_PAGE_SIZE) -> SyncPager[Event]:
        """The environment's events of the last 30 days, newest first."""
        return self._client.pager(
            lambda page: Call(
                "GET", "/events", paged(Event), query(page=page, limit=page_size, type=type)
            )
        )


class Alerts(_Resource):
    def list(
        self,
        *,
        system_id: str | None = None,
        status: AlertStatus | None = None,
        type: AlertType | None = None,
        page_size: int = MAX_PAGE_SIZE,
    ) -> SyncPager[Alert]:
        """The environment's alerts, newest first (by `opened_at`, then id); a system has at
        most one open alert per type."""
        return self._client.pager(
            lambda page: Call(
                "GET",
                "/alerts",
                paged(Alert),
                query(page=page, limit=page_size, system_id=system_id, status=status, type=type),
            )
        )

    def get(self, alert_id: str) -> Alert:
        return self._client.send(Call("GET", f"/alerts/{path_id(alert_id)}", one(Alert)))


class IngestTokens(_Resource):
    """A system's ingest tokens for its data logger (managing them needs Enterprise; the
    logger's uploads work on every plan, with `IngestClient`)."""

    def create(
        self, system_id: str, *, name: str, idempotency_key: str | None = None
    ) -> IngestToken:
        """A new token: `.token` (`ik_…`) is shown only here; give it to the logger."""
        path = f"/systems/{path_id(system_id)}/ingest-tokens"
        return self._client.send(
            Call(
                "POST",
                path,
                one(IngestToken),
                json=body(name=name),
                idempotency_key=idempotency_key,
            )
        )

    def list(self, system_id: str) -> builtins.list[IngestToken]:
        """The system's tokens that still work, oldest first (without `.token`)."""
        path = f"/systems/{path_id(system_id)}/ingest-tokens"
        return self._client.send(Call("GET", path, many(IngestToken)))

    def revoke(self, system_id: str, token_id: str) -> None:
        """Revoke a token: its next upload is refused (401)."""
        path = f"/systems/{path_id(system_id)}/ingest-tokens/{path_id(token_id)}"
        self._client.send(Call("DELETE", path, nothing))
