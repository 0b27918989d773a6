"""Every endpoint of the API as a `Call`: the one place that knows paths, parameters, bodies and
answer types. The sync and async resources only send these."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime
from typing import Any

from solarapi_client._core import (
    NOT_GIVEN,
    Call,
    NotGiven,
    Page,
    body,
    jsonable,
    many,
    nothing,
    one,
    paged,
    path_id,
    query,
    raw,
)
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
    IrradianceReading,
    Location,
    MarketValueSeries,
    Orientation,
    PerformanceInterval,
    PerformanceSeries,
    PriceInterval,
    PriceSeries,
    Reading,
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

Timestamp = datetime | str
Day = date | str
# A nested body part: the typed model or a plain mapping with the same keys.
LocationInput = Location | Mapping[str, Any]
OrientationInput = Orientation | Mapping[str, Any]
ReadingInput = Reading | Mapping[str, Any]
IrradianceInput = IrradianceReading | Mapping[str, Any]

MAX_PAGE_SIZE = 100


def health() -> Call[Health]:
    return Call("GET", "/health", one(Health))


def get_account() -> Call[Account]:
    return Call("GET", "/account", one(Account))


# --- systems ------------------------------------------------------------------------------


def list_systems(
    page: int, limit: int, status: SystemStatus | None, market_zone: str | None
) -> Call[Page[System]]:
    params = query(page=page, limit=limit, status=status, market_zone=market_zone)
    return Call("GET", "/systems", paged(System), params)


def get_system(system_id: str) -> Call[System]:
    return Call("GET", f"/systems/{path_id(system_id)}", one(System))


def create_system(
    *,
    name: str,
    capacity_kwp: float,
    location: LocationInput,
    inverter_capacity_kw: float | NotGiven | None,
    orientation: OrientationInput | NotGiven | None,
    market_zone: str | NotGiven | None,
    installed_on: Day | NotGiven | None,
    status: SystemStatus | NotGiven,
    data_source: DataSource | NotGiven,
    idempotency_key: str | None,
) -> Call[System]:
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
    )
    return Call("POST", "/systems", one(System), json=payload, idempotency_key=idempotency_key)


def update_system(system_id: str, changes: dict[str, Any]) -> Call[System]:
    return Call("PATCH", f"/systems/{path_id(system_id)}", one(System), json=body(**changes))


def delete_system(system_id: str) -> Call[None]:
    return Call("DELETE", f"/systems/{path_id(system_id)}", nothing)


def system_summary(system_id: str) -> Call[Summary]:
    return Call("GET", f"/systems/{path_id(system_id)}/summary", one(Summary))


# --- readings, prices, market value -------------------------------------------------------


def get_readings(
    system_id: str, start: Timestamp | None, end: Timestamp | None, interval: Interval | None
) -> Call[ReadingSeries]:
    params = query(from_=start, to=end, interval=interval)
    return Call("GET", f"/systems/{path_id(system_id)}/readings", one(ReadingSeries), params)


def upload_readings(
    system_id: str, readings: Iterable[ReadingInput], idempotency_key: str | None
) -> Call[UploadResult]:
    items = [_reading(r) for r in readings]
    return Call(
        "POST",
        f"/systems/{path_id(system_id)}/readings",
        one(UploadResult),
        json={"readings": items},
        idempotency_key=idempotency_key,
    )


def _reading(reading: ReadingInput) -> dict[str, Any]:
    item = jsonable(reading)
    if item.get("power_w") is None:
        item.pop("power_w", None)  # optional: leave it out rather than send null
    return dict(item)


def get_performance(
    system_id: str,
    start: Timestamp | None,
    end: Timestamp | None,
    interval: PerformanceInterval | None,
) -> Call[PerformanceSeries]:
    params = query(from_=start, to=end, interval=interval)
    path = f"/systems/{path_id(system_id)}/performance"
    return Call("GET", path, one(PerformanceSeries), params)


def upload_irradiance(
    system_id: str, readings: Iterable[IrradianceInput], idempotency_key: str | None
) -> Call[UploadResult]:
    items = []
    for reading in readings:
        item = dict(jsonable(reading))
        for optional in ("module_temp_c", "ambient_temp_c"):
            if item.get(optional) is None:
                item.pop(optional, None)  # optional: leave it out rather than send null
        items.append(item)
    return Call(
        "POST",
        f"/systems/{path_id(system_id)}/irradiance",
        one(UploadResult),
        json={"readings": items},
        idempotency_key=idempotency_key,
    )


def get_irradiance(
    system_id: str, start: Timestamp | None, end: Timestamp | None
) -> Call[IrradianceList]:
    params = query(from_=start, to=end)
    return Call("GET", f"/systems/{path_id(system_id)}/irradiance", one(IrradianceList), params)


def list_zones() -> Call[list[Zone]]:
    return Call("GET", "/market-prices/zones", many(Zone))


def get_prices(
    zone: str, start: Timestamp | None, end: Timestamp | None, interval: PriceInterval | None
) -> Call[PriceSeries]:
    params = query(zone=zone, from_=start, to=end, interval=interval)
    return Call("GET", "/market-prices", one(PriceSeries), params)


def get_market_value(
    system_id: str, start: Timestamp | None, end: Timestamp | None, interval: Interval | None
) -> Call[MarketValueSeries]:
    params = query(from_=start, to=end, interval=interval)
    path = f"/systems/{path_id(system_id)}/market-value"
    return Call("GET", path, one(MarketValueSeries), params)


# --- declarations -------------------------------------------------------------------------


def list_declarations(
    page: int,
    limit: int,
    system_id: str | None,
    status: DeclarationStatus | None,
    type: DeclarationType | None,
) -> Call[Page[Declaration]]:
    params = query(page=page, limit=limit, system_id=system_id, status=status, type=type)
    return Call("GET", "/declarations", paged(Declaration), params)


def create_declaration(
    *,
    system_id: str,
    type: DeclarationType,
    period_start: Day,
    period_end: Day,
    energy_wh: float | NotGiven,
    reference: str | NotGiven | None,
    idempotency_key: str | None,
) -> Call[Declaration]:
    payload = body(
        system_id=system_id,
        type=type,
        period_start=period_start,
        period_end=period_end,
        energy_wh=energy_wh,
        reference=reference,
    )
    return Call(
        "POST", "/declarations", one(Declaration), json=payload, idempotency_key=idempotency_key
    )


def get_declaration(declaration_id: str) -> Call[Declaration]:
    return Call("GET", f"/declarations/{path_id(declaration_id)}", one(Declaration))


def update_declaration(declaration_id: str, changes: dict[str, Any]) -> Call[Declaration]:
    path = f"/declarations/{path_id(declaration_id)}"
    return Call("PATCH", path, one(Declaration), json=body(**changes))


def delete_declaration(declaration_id: str) -> Call[None]:
    return Call("DELETE", f"/declarations/{path_id(declaration_id)}", nothing)


def declaration_action(
    declaration_id: str, action: str, idempotency_key: str | None
) -> Call[Declaration]:
    path = f"/declarations/{path_id(declaration_id)}/{action}"
    return Call("POST", path, one(Declaration), idempotency_key=idempotency_key)


def declaration_history(declaration_id: str) -> Call[list[Transition]]:
    path = f"/declarations/{path_id(declaration_id)}/history"
    return Call("GET", path, many(Transition))


# --- reports ------------------------------------------------------------------------------


def create_report(
    *,
    type: ReportType,
    format: ReportFormat,
    system_ids: Sequence[str] | NotGiven,
    start: Timestamp | NotGiven,
    end: Timestamp | NotGiven,
    interval: Interval | NotGiven,
    timezone: str | NotGiven,
    idempotency_key: str | None,
) -> Call[Report]:
    payload = body(
        type=type,
        format=format,
        system_ids=list(system_ids) if not isinstance(system_ids, NotGiven) else NOT_GIVEN,
        interval=interval,
        timezone=timezone,
    )
    payload.update(body(**{"from": start, "to": end}))
    return Call("POST", "/reports", one(Report), json=payload, idempotency_key=idempotency_key)


def list_reports(
    page: int, limit: int, status: ReportStatus | None, type: ReportType | None
) -> Call[Page[Report]]:
    params = query(page=page, limit=limit, status=status, type=type)
    return Call("GET", "/reports", paged(Report), params)


def get_report(report_id: str) -> Call[Report]:
    return Call("GET", f"/reports/{path_id(report_id)}", one(Report))


def delete_report(report_id: str) -> Call[None]:
    return Call("DELETE", f"/reports/{path_id(report_id)}", nothing)


def download_report(report_id: str) -> Call[bytes]:
    return Call("GET", f"/reports/{path_id(report_id)}/download", raw)


# --- webhooks and events ------------------------------------------------------------------


def create_webhook(
    *,
    url: str,
    events: Sequence[str],
    description: str | NotGiven | None,
    idempotency_key: str | None,
) -> Call[Webhook]:
    payload = body(url=url, events=list(events), description=description)
    return Call("POST", "/webhooks", one(Webhook), json=payload, idempotency_key=idempotency_key)


def list_webhooks(page: int, limit: int) -> Call[Page[Webhook]]:
    return Call("GET", "/webhooks", paged(Webhook), query(page=page, limit=limit))


def get_webhook(webhook_id: str) -> Call[Webhook]:
    return Call("GET", f"/webhooks/{path_id(webhook_id)}", one(Webhook))


def update_webhook(
    webhook_id: str,
    *,
    url: str | NotGiven,
    events: Sequence[str] | NotGiven,
    description: str | NotGiven | None,
    status: WebhookStatus | NotGiven,
) -> Call[Webhook]:
    payload = body(url=url, events=events, description=description, status=status)
    return Call("PATCH", f"/webhooks/{path_id(webhook_id)}", one(Webhook), json=payload)


def delete_webhook(webhook_id: str) -> Call[None]:
    return Call("DELETE", f"/webhooks/{path_id(webhook_id)}", nothing)


def rotate_webhook_secret(webhook_id: str, idempotency_key: str | None) -> Call[Webhook]:
    path = f"/webhooks/{path_id(webhook_id)}/rotate-secret"
    return Call("POST", path, one(Webhook), idempotency_key=idempotency_key)


def list_deliveries(webhook_id: str, page: int, limit: int) -> Call[Page[Delivery]]:
    path = f"/webhooks/{path_id(webhook_id)}/deliveries"
    return Call("GET", path, paged(Delivery), query(page=page, limit=limit))


def list_events(page: int, limit: int, type: str | None) -> Call[Page[Event]]:
    return Call("GET", "/events", paged(Event), query(page=page, limit=limit, type=type))
