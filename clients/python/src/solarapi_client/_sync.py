"""`Client`: the blocking client. Each method sends one `Call` from `_endpoints`."""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import TracebackType
from typing import TypeVar

import httpx

from solarapi_client import _endpoints as ep
from solarapi_client import fleet
from solarapi_client._core import (
    DEFAULT_TIMEOUT,
    NOT_GIVEN,
    Call,
    Core,
    NotGiven,
    Page,
    RetryPolicy,
)
from solarapi_client._endpoints import (
    MAX_PAGE_SIZE,
    Day,
    IrradianceInput,
    LocationInput,
    OrientationInput,
    ReadingInput,
    Timestamp,
)
from solarapi_client.errors import TimeoutError
from solarapi_client.models import (
    Account,
    DataSource,
    Declaration,
    DeclarationStatus,
    DeclarationType,
    Delivery,
    Event,
    Health,
    Interval,
    IrradianceList,
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
from solarapi_client.pagination import Identified, SyncPager
from solarapi_client.ranges import as_datetime, next_cursor, piece_end

T = TypeVar("T")
F = TypeVar("F")
H = TypeVar("H", bound=Identified)


class Client:
    """The Solar Energy Platform API.

    `Client(api_key="pk_live_…", base_url="https://solar.example.com")`; both default to the
    `SOLARAPI_API_KEY` and `SOLARAPI_BASE_URL` environment variables. Use it as a context
    manager, or call `close()`, to release its connections.
    """

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        max_retries: int = 3,
        retry: RetryPolicy | None = None,
        http_client: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._core = Core(api_key, base_url, retry or RetryPolicy(max_retries=max_retries))
        self._http = http_client or httpx.Client(timeout=timeout)
        self._http.headers.update(self._core.headers)
        self._sleep = sleep
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

    def send(self, call: Call[T]) -> T:
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
                delay = self._core.retry.after_response(response, attempt)
                if delay is None:
                    return self._core.result(call, response)
                response.close()
            self._sleep(delay)
            attempt += 1

    def __repr__(self) -> str:
        # Never the key: a client printed in a log must not leak it.
        return f"Client(base_url={self._core.base_url!r})"

    def pager(self, call_for_page: Callable[[int], Call[Page[H]]]) -> SyncPager[H]:
        return SyncPager(lambda number: self.send(call_for_page(number)))

    def health(self) -> Health:
        return self.send(ep.health())

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class _Resource:
    def __init__(self, client: Client) -> None:
        self._client = client


class AccountResource(_Resource):
    def get(self) -> Account:
        """The key in use: its account, plan, environment, limits and usage."""
        return self._client.send(ep.get_account())


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
            lambda page: ep.list_systems(page, page_size, status, market_zone)
        )

    def get(self, system_id: str) -> System:
        return self._client.send(ep.get_system(system_id))

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
        idempotency_key: str | None = None,
    ) -> System:
        return self._client.send(
            ep.create_system(
                name=name,
                capacity_kwp=capacity_kwp,
                location=location,
                inverter_capacity_kw=inverter_capacity_kw,
                orientation=orientation,
                market_zone=market_zone,
                installed_on=installed_on,
                status=status,
                data_source=data_source,
                idempotency_key=idempotency_key,
            )
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
    ) -> System:
        """Change the fields given (None sets an optional field to null)."""
        changes = {
            "name": name,
            "capacity_kwp": capacity_kwp,
            "inverter_capacity_kw": inverter_capacity_kw,
            "location": location,
            "orientation": orientation,
            "market_zone": market_zone,
            "installed_on": installed_on,
            "status": status,
        }
        return self._client.send(ep.update_system(system_id, changes))

    def delete(self, system_id: str) -> None:
        self._client.send(ep.delete_system(system_id))

    def summary(self, system_id: str) -> Summary:
        return self._client.send(ep.system_summary(system_id))

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
        return self._client.send(ep.get_performance(system_id, start, end, interval))


class Irradiance(_Resource):
    def upload(
        self,
        system_id: str,
        readings: Iterable[IrradianceInput],
        *,
        idempotency_key: str | None = None,
    ) -> UploadResult:
        """Store 1–10,000 quarter-hours of plane-of-array irradiance (all or nothing)."""
        return self._client.send(ep.upload_irradiance(system_id, readings, idempotency_key))

    def get(
        self, system_id: str, *, start: Timestamp | None = None, end: Timestamp | None = None
    ) -> IrradianceList:
        """Stored sensor and satellite quarter-hours of [start, end) (at most 31 days)."""
        return self._client.send(ep.get_irradiance(system_id, start, end))


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
        return self._client.send(ep.get_readings(system_id, start, end, interval))

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
        return self._client.send(ep.upload_readings(system_id, readings, idempotency_key))

    def changes(self, *, cursor: str | None = None, limit: int | None = None) -> fleet.ChangeFeed:
        """Every reading inserted or replaced after `cursor` (None: from the first stored
        one), in commit order, following the feed until it has no more. The returned
        iterator's `cursor` is the position to persist once you have applied the rows."""
        return fleet.ChangeFeed(
            lambda position: self._client.send(
                fleet.changes(position, limit or fleet.MAX_CHANGES_PAGE)
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
        page_size: int = fleet.MAX_FLEET_PAGE,
    ) -> fleet.FleetReadings:
        """Every matching system's readings (`to_dataframe()`: indexed by system_id, start)."""
        return self._every_page(
            lambda page: fleet.fleet_readings(
                page, page_size, start, end, interval, system_ids, status, market_zone
            )
        )

    def summary(
        self,
        *,
        system_ids: Sequence[str] | None = None,
        status: SystemStatus | None = None,
        market_zone: str | None = None,
        page_size: int = fleet.MAX_FLEET_PAGE,
    ) -> fleet.FleetSummary:
        """Every matching system's summary and the fleet's totals."""
        return self._every_page(
            lambda page: fleet.fleet_summary(page, page_size, system_ids, status, market_zone)
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
        page_size: int = fleet.MAX_FLEET_PAGE,
    ) -> fleet.FleetValue:
        """Every matching system's market value, with per-zone and fleet totals."""
        return self._every_page(
            lambda page: fleet.fleet_market_value(
                page, page_size, start, end, interval, system_ids, status, market_zone
            )
        )

    def _every_page(self, calls: Callable[[int], Call[fleet.FleetPage[F]]]) -> F:
        number = 1
        page = self._client.send(calls(number))
        body = page.body
        while page.pagination.has_more:
            number += 1
            page = self._client.send(calls(number))
            body = fleet.merge(body, page.body)
        return body


class MarketPrices(_Resource):
    def zones(self) -> list[Zone]:
        return self._client.send(ep.list_zones())

    def get(
        self,
        zone: str,
        *,
        start: Timestamp | None = None,
        end: Timestamp | None = None,
        interval: PriceInterval | None = None,
    ) -> PriceSeries:
        return self._client.send(ep.get_prices(zone, start, end, interval))


class MarketValue(_Resource):
    def get(
        self,
        system_id: str,
        *,
        start: Timestamp | None = None,
        end: Timestamp | None = None,
        interval: Interval | None = None,
    ) -> MarketValueSeries:
        return self._client.send(ep.get_market_value(system_id, start, end, interval))


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
            lambda page: ep.list_declarations(page, page_size, system_id, status, type)
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
        return self._client.send(
            ep.create_declaration(
                system_id=system_id,
                type=type,
                period_start=period_start,
                period_end=period_end,
                energy_wh=energy_wh,
                reference=reference,
                idempotency_key=idempotency_key,
            )
        )

    def get(self, declaration_id: str) -> Declaration:
        return self._client.send(ep.get_declaration(declaration_id))

    def update(
        self,
        declaration_id: str,
        *,
        period_start: Day | NotGiven = NOT_GIVEN,
        period_end: Day | NotGiven = NOT_GIVEN,
        energy_wh: float | NotGiven = NOT_GIVEN,
        reference: str | NotGiven | None = NOT_GIVEN,
    ) -> Declaration:
        changes = {
            "period_start": period_start,
            "period_end": period_end,
            "energy_wh": energy_wh,
            "reference": reference,
        }
        return self._client.send(ep.update_declaration(declaration_id, changes))

    def delete(self, declaration_id: str) -> None:
        self._client.send(ep.delete_declaration(declaration_id))

    def submit(self, declaration_id: str, *, idempotency_key: str | None = None) -> Declaration:
        return self._client.send(ep.declaration_action(declaration_id, "submit", idempotency_key))

    def withdraw(self, declaration_id: str, *, idempotency_key: str | None = None) -> Declaration:
        return self._client.send(ep.declaration_action(declaration_id, "withdraw", idempotency_key))

    def history(self, declaration_id: str) -> builtins.list[Transition]:
        return self._client.send(ep.declaration_history(declaration_id))


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
        return self._client.send(
            ep.create_report(
                type=type,
                format=format,
                system_ids=system_ids,
                start=start,
                end=end,
                interval=interval,
                timezone=timezone,
                idempotency_key=idempotency_key,
            )
        )

    def list(
        self,
        *,
        status: ReportStatus | None = None,
        type: ReportType | None = None,
        page_size: int = MAX_PAGE_SIZE,
    ) -> SyncPager[Report]:
        return self._client.pager(lambda page: ep.list_reports(page, page_size, status, type))

    def get(self, report_id: str) -> Report:
        return self._client.send(ep.get_report(report_id))

    def delete(self, report_id: str) -> None:
        self._client.send(ep.delete_report(report_id))

    def download(self, report_id: str) -> bytes:
        return self._client.send(ep.download_report(report_id))

    def wait(self, report_id: str, *, timeout: float = 300.0, poll_interval: float = 1.0) -> Report:
        """Poll until the report is completed or failed (returned either way)."""
        deadline = time.monotonic() + timeout
        while True:
            report = self.get(report_id)
            if report.finished:
                return report
            if time.monotonic() >= deadline:
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
        return self._client.send(
            ep.create_webhook(
                url=url, events=events, description=description, idempotency_key=idempotency_key
            )
        )

    def list(self, *, page_size: int = MAX_PAGE_SIZE) -> SyncPager[Webhook]:
        return self._client.pager(lambda page: ep.list_webhooks(page, page_size))

    def get(self, webhook_id: str) -> Webhook:
        return self._client.send(ep.get_webhook(webhook_id))

    def update(
        self,
        webhook_id: str,
        *,
        url: str | NotGiven = NOT_GIVEN,
        events: Sequence[str] | NotGiven = NOT_GIVEN,
        description: str | NotGiven | None = NOT_GIVEN,
        status: WebhookStatus | NotGiven = NOT_GIVEN,
    ) -> Webhook:
        return self._client.send(
            ep.update_webhook(
                webhook_id, url=url, events=events, description=description, status=status
            )
        )

    def delete(self, webhook_id: str) -> None:
        self._client.send(ep.delete_webhook(webhook_id))

    def rotate_secret(self, webhook_id: str, *, idempotency_key: str | None = None) -> Webhook:
        """A new secret (in `.secret`); the old one keeps signing for a while beside it."""
        return self._client.send(ep.rotate_webhook_secret(webhook_id, idempotency_key))

    def deliveries(self, webhook_id: str, *, page_size: int = MAX_PAGE_SIZE) -> SyncPager[Delivery]:
        return self._client.pager(lambda page: ep.list_deliveries(webhook_id, page, page_size))


class Events(_Resource):
    def list(self, *, type: str | None = None, page_size: int = MAX_PAGE_SIZE) -> SyncPager[Event]:
        """The environment's events of the last 30 days, newest first."""
        return self._client.pager(lambda page: ep.list_events(page, page_size, type))
