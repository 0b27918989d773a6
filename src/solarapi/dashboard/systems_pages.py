"""Dashboard pages that change systems, for every plan: add, edit, delete, and a readings
CSV upload. HTTP only; the rules are the API's (system_forms.py calls its services)."""

from __future__ import annotations

import secrets
from datetime import UTC, date, datetime, timedelta
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

from fastapi import APIRouter, Request
from starlette.datastructures import QueryParams
from starlette.responses import Response

from solarapi.audit.service import Actor
from solarapi.auth.principal import Caller
from solarapi.dashboard import service
from solarapi.dashboard.chart import ChartPoint, bucket_label, render_chart
from solarapi.dashboard.dependencies import UserDep, client_ip
from solarapi.dashboard.errors import DashboardRoute, FormRejected
from solarapi.dashboard.forms import environment_of, read_form, read_upload
from solarapi.dashboard.rendering import render
from solarapi.dashboard.responses import redirect
from solarapi.dashboard.sessions import claim_form_nonce
from solarapi.dashboard.system_forms import (
    SystemForm,
    add_system,
    change_system,
    issue_token,
    remove_system,
    revoke_token,
    system_tokens,
    upload_csv,
)
from solarapi.db import SessionDep
from solarapi.kit.grid import INTERVAL_LABELS, Interval
from solarapi.kit.timefmt import parse_timestamp, utcnow
from solarapi.kit.zones import ZONES
from solarapi.models.systems import SYSTEM_STATUSES
from solarapi.readings.upload import UploadResult
from solarapi.state import settings_of

router = APIRouter(include_in_schema=False, route_class=DashboardRoute)

_NOTICES = {
    "created": "The system was added. Upload its readings below, or give its data logger an "
    "ingest token.",
    "updated": "Your changes were saved.",
    "token-revoked": "The ingest token was revoked. Uploads with it are refused from now on.",
    "token-already-created": "That form was already sent, so no second token was created. "
    "The full token is shown only once; if you did not copy it, revoke it and create a new one.",
}


def _form_page(
    request: Request,
    user: UserDep,
    form: SystemForm,
    *,
    action: str,
    environment: str,
    system_id: str | None,
    error: str | None = None,
    status_code: int = 200,
) -> Response:
    return render(
        request,
        "system_form.html",
        {
            "form": form.values,
            "action": action,
            "environment": environment,
            "system_id": system_id,
            "zones": list(ZONES.values()),
            "statuses": SYSTEM_STATUSES,
            "error": error,
        },
        status_code=status_code,
        user=user,
    )


@router.get("/systems/new")
async def new_system_page(request: Request, user: UserDep) -> Response:
    environment = environment_of(request.query_params.get("env"))
    return _form_page(
        request,
        user,
        SystemForm.blank(),
        action="/systems/new",
        environment=environment,
        system_id=None,
    )


@router.post("/systems/new")
async def create_system(request: Request, session: SessionDep, user: UserDep) -> Response:
    posted = await read_form(request, user)
    environment = environment_of(posted.get("environment"))
    form = SystemForm.posted(posted)
    try:
        system = await add_system(session, Caller(user.account_id, environment), form, utcnow())
    except FormRejected as exc:
        return _form_page(
            request,
            user,
            form,
            action="/systems/new",
            environment=environment,
            system_id=None,
            error=exc.message,
            status_code=exc.status_code,
        )
    return redirect(f"/systems/{system.id}?notice=created")


@router.get("/systems/{system_id}/edit")
async def edit_system_page(
    request: Request, system_id: str, session: SessionDep, user: UserDep
) -> Response:
    system = await service.own_system(session, user.account_id, system_id)
    return _form_page(
        request,
        user,
        SystemForm.of(system),
        action=f"/systems/{system.id}/edit",
        environment=system.environment,
        system_id=system.id,
    )


@router.post("/systems/{system_id}/edit")
async def edit_system(
    request: Request, system_id: str, session: SessionDep, user: UserDep
) -> Response:
    posted = await read_form(request, user)
    system = await service.own_system(session, user.account_id, system_id)
    form = SystemForm.posted(posted)
    try:
        await change_system(session, service.scope_of(user, system), system, form, utcnow())
    except FormRejected as exc:
        await session.rollback()
        return _form_page(
            request,
            user,
            form,
            action=f"/systems/{system.id}/edit",
            environment=system.environment,
            system_id=system.id,
            error=exc.message,
            status_code=exc.status_code,
        )
    return redirect(f"/systems/{system.id}?notice=updated")


@router.get("/systems/{system_id}/delete")
async def delete_system_page(
    request: Request, system_id: str, session: SessionDep, user: UserDep
) -> Response:
    system = await service.own_system(session, user.account_id, system_id)
    return render(request, "system_delete.html", {"system": system, "error": None}, user=user)


@router.post("/systems/{system_id}/delete")
async def delete_system(
    request: Request, system_id: str, session: SessionDep, user: UserDep
) -> Response:
    await read_form(request, user)
    system = await service.own_system(session, user.account_id, system_id)
    try:
        await remove_system(session, service.scope_of(user, system), system, utcnow())
    except FormRejected as exc:
        await session.rollback()
        return render(
            request,
            "system_delete.html",
            {"system": system, "error": exc.message},
            status_code=exc.status_code,
            user=user,
        )
    return redirect(f"/overview?env={system.environment}&notice=deleted")


@router.post("/systems/{system_id}/readings")
async def upload_readings(
    request: Request, system_id: str, session: SessionDep, user: UserDep
) -> Response:
    _, data = await read_upload(request, user, "file")
    system = await service.own_system(session, user.account_id, system_id)
    try:
        result = await upload_csv(session, service.scope_of(user, system), system, data, utcnow())
    except FormRejected as exc:
        # All or nothing: the batches stored before the bad line go with the transaction.
        await session.rollback()
        return await _system_view(request, session, user, system.id, upload_error=exc.message)
    return redirect(f"/systems/{system.id}?" + _uploaded_query(result, system.timezone))


@router.post("/systems/{system_id}/ingest-tokens")
async def create_token(
    request: Request, system_id: str, session: SessionDep, user: UserDep
) -> Response:
    posted = await read_form(request, user)
    system = await service.own_system(session, user.account_id, system_id)
    nonce = posted.get("nonce", "")[:64]
    if nonce and not await claim_form_nonce(session, session_id=user.session_id, nonce=nonce):
        return redirect(f"/systems/{system.id}?notice=token-already-created#ingest-tokens")
    try:
        created = await issue_token(
            session,
            service.scope_of(user, system),
            system,
            posted.get("name", ""),
            settings_of(request).effective_secret_key,
            utcnow(),
            actor=Actor.user(user.user_id),
            ip=client_ip(request),
        )
    except FormRejected as exc:
        await session.rollback()
        return await _system_view(request, session, user, system.id, token_error=exc.message)
    return render(
        request,
        "ingest_token_created.html",
        {"system": system, "view": created.view, "token": created.token},
        user=user,
    )


@router.post("/systems/{system_id}/ingest-tokens/{token_id}/revoke")
async def revoke_ingest_token(
    request: Request, system_id: str, token_id: str, session: SessionDep, user: UserDep
) -> Response:
    await read_form(request, user)
    system = await service.own_system(session, user.account_id, system_id)
    await revoke_token(
        session,
        service.scope_of(user, system),
        system,
        token_id,
        utcnow(),
        actor=Actor.user(user.user_id),
        ip=client_ip(request),
    )
    return redirect(f"/systems/{system.id}?notice=token-revoked#ingest-tokens")


def _uploaded_query(result: UploadResult, timezone: str) -> str:
    """The system page showing what was uploaded: the counts, and a chart over the file's
    local days with a bucket size that keeps it readable."""
    tz = ZoneInfo(timezone)
    if result.start is None or result.end is None:  # store_file always sets them
        raise ValueError("an upload without its span")
    first = result.start.astimezone(tz).date()
    last = (result.end - timedelta(seconds=1)).astimezone(tz).date()
    days = (last - first).days + 1
    interval = (
        Interval.MIN15
        if days <= 2
        else Interval.HOUR
        if days <= 7
        else Interval.DAY
        if days <= 92
        else Interval.MONTH
    )
    return urlencode(
        {
            "from": first.isoformat(),
            "to": last.isoformat(),
            "interval": interval.value,
            "received": result.received,
            "inserted": result.inserted,
            "updated": result.updated,
        }
    )


def _uploaded(params: QueryParams) -> dict[str, int] | None:
    try:
        counts = {name: int(params[name]) for name in ("received", "inserted", "updated")}
    except (KeyError, ValueError):
        return None
    return counts


@router.get("/systems/{system_id}")
async def system_page(
    request: Request, system_id: str, session: SessionDep, user: UserDep
) -> Response:
    return await _system_view(request, session, user, system_id)


async def _system_view(
    request: Request,
    session: SessionDep,
    user: UserDep,
    system_id: str,
    *,
    upload_error: str | None = None,
    token_error: str | None = None,
) -> Response:
    system = await service.own_system(session, user.account_id, system_id)
    scope = service.scope_of(user, system)
    tokens = await system_tokens(session, scope, system)
    now = utcnow()
    tz = ZoneInfo(system.timezone)
    params = request.query_params
    error: str | None = None
    production: service.Production | None = None
    query: service.ProductionQuery | None = None
    expected: service.ExpectedAgainstActual | None = None
    try:
        query = service.production_query(
            system, params.get("from"), params.get("to"), params.get("interval"), now
        )
        production = await service.production(session, system, query, now)
        expected = await service.expected_against_actual(session, system, query, now)
    except FormRejected as exc:
        error = exc.message
    today = now.astimezone(tz).date()
    chart = None
    if production is not None and query is not None and expected is not None:
        points = [
            ChartPoint(
                datetime.fromtimestamp(bucket.start_s, UTC),
                bucket.energy_wh,
                _expected_wh(expected, bucket.start),
            )
            for bucket in production.buckets
        ]
        chart = render_chart(
            points,
            query.interval,
            tz,
            title=f"Energy per {query.interval.label} of {system.name}, measured and expected",
        )
    return render(
        request,
        "system.html",
        {
            "system": system,
            "query": query,
            "form": {
                "from": params.get("from") or (query.first_day.isoformat() if query else ""),
                "to": params.get("to") or (query.last_day.isoformat() if query else ""),
                "interval": params.get("interval") or (query.interval if query else "1d"),
            },
            "production": production,
            "chart": chart,
            "expected": expected,
            "error": error,
            "upload_error": upload_error,
            "tokens": tokens,
            "token_error": token_error,
            "nonce": secrets.token_urlsafe(16),
            "uploaded": _uploaded(params),
            "notice": _NOTICES.get(params.get("notice", "")),
            "presets": _presets(system.id, today),
            "current_url": str(request.url.path)
            + ("?" + request.url.query if request.url.query else ""),
            "intervals": INTERVAL_LABELS,
            "tz": tz,
            "bucket_label": bucket_label,
            "parse": parse_timestamp,
            "alerts": await service.open_alerts(session, scope, [system]),
            "alert_titles": service.ALERT_TITLES,
        },
        status_code=400 if error or upload_error or token_error else 200,
        user=user,
    )


def _expected_wh(expected: service.ExpectedAgainstActual, start: str) -> float | None:
    figures = expected.buckets.get(start)
    return None if figures is None else figures.expected_energy_wh


def _presets(system_id: str, today: date) -> list[tuple[str, str]]:
    def link(first: date, last: date, interval: str) -> str:
        return f"/systems/{system_id}?" + urlencode(
            {"from": first.isoformat(), "to": last.isoformat(), "interval": interval}
        )

    return [
        ("Today", link(today, today, "15m")),
        ("Yesterday", link(today - timedelta(days=1), today - timedelta(days=1), "15m")),
        ("Last 3 days", link(today - timedelta(days=2), today, "1h")),
        ("Last 7 days", link(today - timedelta(days=6), today, "1d")),
        ("Last 30 days", link(today - timedelta(days=29), today, "1d")),
        ("This year", link(date(today.year, 1, 1), today, "1M")),
        ("Last 12 months", link(_months_before(today, 11), today, "1M")),
    ]


def _months_before(today: date, months: int) -> date:
    index = today.year * 12 + today.month - 1 - months
    return date(index // 12, index % 12 + 1, 1)
