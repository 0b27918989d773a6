"""A system's add and edit forms, turned into the API's own request bodies and run through
the same services the API's routers call: same fields, same rules, same messages. The only
translation is from form text to JSON values (numbers from text, blank optional fields left
out or cleared)."""

from __future__ import annotations

import io
from dataclasses import dataclass
from datetime import datetime

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.audit.service import Actor
from solarapi.auth.principal import Caller
from solarapi.dashboard.errors import FormRejected, sentence
from solarapi.errors import ApiError, describe_validation_errors
from solarapi.ingest import service as ingest_service
from solarapi.ingest.schemas import TokenCreate
from solarapi.models.systems import ReadableSystem
from solarapi.readings.csvfile import CsvRowError, store_file
from solarapi.readings.upload import UploadResult
from solarapi.systems import service as systems_service
from solarapi.systems.access import get_system
from solarapi.systems.schemas import SystemCreate, SystemPatch
from solarapi.systems.views import SystemView

# The form's fields, in the order of the page. Numbers are sent as numbers when they parse.
NUMBER_FIELDS = (
    "capacity_kwp",
    "inverter_capacity_kw",
    "latitude",
    "longitude",
    "tilt_deg",
    "azimuth_deg",
)
TEXT_FIELDS = ("name", "timezone", "country", "market_zone", "installed_on", "status")
# Blank means "none" (create: the API's default; edit: cleared, as `null` in a PATCH).
OPTIONAL = frozenset(
    {"inverter_capacity_kw", "country", "market_zone", "installed_on", "tilt_deg", "azimuth_deg"}
)


@dataclass(frozen=True, slots=True)
class SystemForm:
    """What the form shows: a system's values as text (or what the person typed)."""

    values: dict[str, str]

    @classmethod
    def blank(cls) -> SystemForm:
        values = dict.fromkeys((*NUMBER_FIELDS, *TEXT_FIELDS), "")
        values.update(status="active", timezone="Europe/Amsterdam", data_source="")
        return cls(values)

    @classmethod
    def of(cls, system: ReadableSystem) -> SystemForm:
        def text(value: object) -> str:
            if value is None:
                return ""
            if isinstance(value, float):
                return f"{value:g}" if abs(value) < 1e15 else repr(value)
            return str(value)

        return cls(
            {
                "name": system.name,
                "capacity_kwp": text(system.capacity_kwp),
                "inverter_capacity_kw": text(system.inverter_capacity_kw),
                "latitude": text(system.latitude),
                "longitude": text(system.longitude),
                "timezone": system.timezone,
                "country": text(system.country),
                "tilt_deg": text(system.tilt_deg),
                "azimuth_deg": text(system.azimuth_deg),
                "market_zone": text(system.market_zone),
                "installed_on": text(system.installed_on),
                "status": system.status,
                "data_source": system.data_source,
            }
        )

    @classmethod
    def posted(cls, form: dict[str, str]) -> SystemForm:
        names = (*NUMBER_FIELDS, *TEXT_FIELDS, "data_source")
        return cls({name: form.get(name, "")[:200] for name in names})


def _value(name: str, text: str) -> object:
    if name == "name":
        # As typed, as the API takes it: a blank name is the API's "must not be blank", and
        # a name is stored with the spaces it was given, whichever way it arrives.
        return text
    text = text.strip()
    if name in NUMBER_FIELDS and text:
        try:
            return float(text)
        except ValueError:
            return text  # the API's own message: "Input should be a valid number"
    return text


def _body(form: SystemForm, *, patch: bool) -> dict[str, object]:
    """The JSON body the API would receive for these form values."""
    given: dict[str, object] = {}
    for name, text in form.values.items():
        if name == "data_source":
            continue
        if not text.strip() and name in OPTIONAL:
            if patch:
                given[name] = None
            continue
        given[name] = _value(name, text)
    location = {
        k: given.pop(k) for k in ("latitude", "longitude", "timezone", "country") if k in given
    }
    orientation = {k: given.pop(k) for k in ("tilt_deg", "azimuth_deg") if k in given}
    body: dict[str, object] = {**given, "location": location}
    if patch:
        # Orientation cannot be cleared in a PATCH; blank keeps the current value.
        orientation = {k: v for k, v in orientation.items() if v is not None}
    if orientation:
        body["orientation"] = orientation
    data_source = form.values.get("data_source", "").strip()
    if data_source and not patch:
        body["data_source"] = data_source
    return body


async def add_system(
    session: AsyncSession, scope: Caller, form: SystemForm, now: datetime
) -> SystemView:
    """`POST /systems` for a signed-in person of any plan."""
    try:
        body = SystemCreate.model_validate(_body(form, patch=False))
        return await systems_service.create_system(session, scope, body, now)
    except ValidationError as exc:
        raise FormRejected(sentence(describe_validation_errors(exc.errors()))) from None
    except ApiError as exc:
        raise FormRejected(sentence(exc.message), exc.status_code) from None


async def change_system(
    session: AsyncSession,
    scope: Caller,
    system: ReadableSystem,
    form: SystemForm,
    now: datetime,
) -> SystemView:
    """`PATCH /systems/{id}` with every field of the form."""
    try:
        body = SystemPatch.model_validate(_body(form, patch=True))
        return await systems_service.update_system(session, scope, system.id, body, now)
    except ValidationError as exc:
        raise FormRejected(sentence(describe_validation_errors(exc.errors()))) from None
    except ApiError as exc:
        raise FormRejected(sentence(exc.message), exc.status_code) from None


async def remove_system(
    session: AsyncSession, scope: Caller, system: ReadableSystem, now: datetime
) -> None:
    """`DELETE /systems/{id}`: 409 while a declaration holds it."""
    try:
        await systems_service.delete_system(session, scope, system.id, now)
    except ApiError as exc:
        raise FormRejected(sentence(exc.message), exc.status_code) from None


async def upload_csv(
    session: AsyncSession, scope: Caller, system: ReadableSystem, data: bytes, now: datetime
) -> UploadResult:
    """A readings CSV (the `solarapi readings import` format) in the caller's transaction;
    on FormRejected the caller rolls back: all or nothing."""
    target = await get_system(session, scope, system.id)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FormRejected(
            f"The file is not UTF-8 text (byte {exc.start + 1}); save it as CSV in UTF-8."
        ) from None
    try:
        return await store_file(session, target, io.StringIO(text, newline=""), now)
    except CsvRowError as exc:
        raise FormRejected(sentence(str(exc))) from None


# --- ingest tokens ------------------------------------------------------------------------


async def system_tokens(
    session: AsyncSession, scope: Caller, system: ReadableSystem
) -> list[ingest_service.TokenView]:
    return await ingest_service.list_tokens(session, scope, system.id)


async def issue_token(
    session: AsyncSession,
    scope: Caller,
    system: ReadableSystem,
    name: str,
    secret: bytes,
    now: datetime,
    *,
    actor: Actor,
    ip: str,
) -> ingest_service.CreatedToken:
    """`POST /systems/{id}/ingest-tokens` for a signed-in person of any plan."""
    try:
        body = TokenCreate.model_validate({"name": name})
        return await ingest_service.create_token(
            session,
            scope,
            system.id,
            body.name,
            secret,
            now,
            actor=actor,
            ip=ip,
        )
    except ValidationError as exc:
        raise FormRejected(sentence(describe_validation_errors(exc.errors()))) from None


async def revoke_token(
    session: AsyncSession,
    scope: Caller,
    system: ReadableSystem,
    token_id: str,
    now: datetime,
    *,
    actor: Actor,
    ip: str,
) -> None:
    await ingest_service.revoke_token(session, scope, system.id, token_id, now, actor=actor, ip=ip)
