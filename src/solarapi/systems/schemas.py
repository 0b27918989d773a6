"""Request and response bodies of the systems endpoints (also the OpenAPI documentation)."""

from __future__ import annotations

import re
from datetime import date
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator
from pydantic.json_schema import SkipJsonSchema

from solarapi.kit.openapi_fields import NEVER_NULL, CountryCode, TimeZoneName, ZoneCode
from solarapi.kit.pagination import Pagination
from solarapi.kit.text import excerpt
from solarapi.kit.timefmt import TimestampError, parse_date
from solarapi.kit.tznames import MAX_NAME_LENGTH, check_time_zone
from solarapi.kit.zones import ZONES

Status = Literal["active", "inactive", "decommissioned"]
DataSource = Literal["metered", "simulated"]

# Strict numbers: a JSON string or boolean where a number belongs is a client bug to report,
# not to coerce. NaN and infinities are never physical values.
Latitude = Annotated[float, Field(strict=True, ge=-90, le=90, allow_inf_nan=False)]
Longitude = Annotated[float, Field(strict=True, ge=-180, le=180, allow_inf_nan=False)]
Tilt = Annotated[float, Field(strict=True, ge=0, le=90, allow_inf_nan=False)]
Azimuth = Annotated[float, Field(strict=True, ge=0, le=360, allow_inf_nan=False)]
CapacityKwp = Annotated[float, Field(strict=True, gt=0, le=1_000_000, allow_inf_nan=False)]
InverterKw = Annotated[float, Field(strict=True, gt=0, le=1_000_000, allow_inf_nan=False)]
# A name is refused when blank (`check_name`: nothing but what Python's `str.strip` removes).
# The OpenAPI document states the same rule as a pattern, with those characters spelled out
# (JSON Schema's `\\s` is ECMAScript's, another set) and U+0000 excluded as everywhere.
BLANK_CHARACTERS = (
    "\\t\\n\\u000b\\f\\r\\u001c-\\u001f \\u0085\\u00a0\\u1680\\u2000-\\u200a"
    "\\u2028\\u2029\\u202f\\u205f\\u3000"
)
NAME_PATTERN = f"^[^\\u0000]*[^\\u0000{BLANK_CHARACTERS}][^\\u0000]*$"
Name = Annotated[
    str,
    Field(strict=True, min_length=1, max_length=100, json_schema_extra={"pattern": NAME_PATTERN}),
]
# The performance model's overrides (section 12): bounds of real crystalline and thin-film
# modules and of real systems; an efficiency is a fraction, so 96 (a percentage) is refused.
Gamma = Annotated[float, Field(strict=True, ge=-1.0, le=0.0, allow_inf_nan=False)]
LossesPct = Annotated[float, Field(strict=True, ge=0, le=50, allow_inf_nan=False)]
InverterEfficiency = Annotated[float, Field(strict=True, gt=0.5, le=1.0, allow_inf_nan=False)]


def whole_number(value: object) -> object:
    """JSON has one number type: 24.0 is the integer 24 (as JSON Schema says), 24.5 is not, and
    "24" or true are not numbers."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


OfflineAfterHours = Annotated[
    int,
    Field(
        strict=True,
        ge=1,
        le=168,
        description="Daylight hours (sun above 5° at the site) without a new reading before "
        "`system.offline` opens; for loggers that upload once a day, 24 or more",
    ),
    BeforeValidator(whole_number),
]
UnderperformanceThreshold = Annotated[
    float,
    Field(
        strict=True,
        ge=0.1,
        le=1.0,
        allow_inf_nan=False,
        description="`system.underperforming` opens when the 7-day energy performance index "
        "stays below this",
    ),
]

_COUNTRY = re.compile(r"^[A-Z]{2}$")
TIMEZONE_DESCRIPTION = (
    "IANA time zone name of the tz database, e.g. `Europe/Amsterdam`; drives all calendar "
    "bucketing. Host-dependent names (`localtime`, `posixrules`, `posix/…`, `right/…`) and "
    "names over 64 characters are refused."
)


def check_market_zone(value: str | None) -> str | None:
    if value is not None and value not in ZONES:
        raise ValueError(
            f"unknown market zone '{excerpt(value)}'; use a code from GET /api/v1/market-prices/zones "
            f"such as {', '.join(list(ZONES)[:4])}"
        )
    return value


def check_country(value: str | None) -> str | None:
    if value is not None and not _COUNTRY.match(value):
        raise ValueError(f"must be an ISO 3166-1 alpha-2 code such as 'NL'; got '{excerpt(value)}'")
    return value


def check_name(value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise ValueError("must not be blank")
    return value


def parse_installed_on(value: object) -> object:
    if value is None or isinstance(value, date):
        return value
    if not isinstance(value, str):
        raise ValueError("must be a date in the form YYYY-MM-DD")
    try:
        return parse_date(value)
    except TimestampError as exc:
        raise ValueError(str(exc)) from None


class LocationIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    latitude: Latitude
    longitude: Longitude
    timezone: Annotated[
        TimeZoneName,
        Field(
            strict=True,
            max_length=MAX_NAME_LENGTH,
            examples=["Europe/Amsterdam"],
            description=TIMEZONE_DESCRIPTION,
        ),
    ]
    country: Annotated[CountryCode | None, Field(examples=["NL"])] = None

    _tz = field_validator("timezone")(check_time_zone)
    _country = field_validator("country")(check_country)


class LocationPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    latitude: Annotated[Latitude | None, NEVER_NULL] = None
    longitude: Annotated[Longitude | None, NEVER_NULL] = None
    timezone: Annotated[
        TimeZoneName | None,
        Field(strict=True, max_length=MAX_NAME_LENGTH, description=TIMEZONE_DESCRIPTION),
        NEVER_NULL,
    ] = None
    country: CountryCode | None = None

    @field_validator("timezone")
    @classmethod
    def _tz(cls, value: str | None) -> str | None:
        return None if value is None else check_time_zone(value)

    _country = field_validator("country")(check_country)


class OrientationIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tilt_deg: Tilt | None = None
    azimuth_deg: Annotated[Azimuth | None, Field(description="Compass degrees, 180 = south")] = None


class OrientationPatch(OrientationIn):
    # A field left out keeps its value; neither can be cleared.
    tilt_deg: Annotated[Tilt | None, NEVER_NULL] = None
    azimuth_deg: Annotated[
        Azimuth | None, Field(description="Compass degrees, 180 = south"), NEVER_NULL
    ] = None


class ModelIn(BaseModel):
    """Performance-model overrides; a field left out (or `null`) uses the default."""

    model_config = ConfigDict(extra="forbid")

    gamma_pdc_pct_per_c: Annotated[
        Gamma | None,
        Field(description="Power temperature coefficient, %/°C, −1 … 0 (default −0.37)"),
    ] = None
    losses_pct: Annotated[
        LossesPct | None, Field(description="System losses, %, 0 … 50 (default 14)")
    ] = None
    inverter_efficiency: Annotated[
        InverterEfficiency | None,
        Field(description="Nominal inverter efficiency as a fraction, 0.5 … 1 (default 0.96)"),
    ] = None


class MonitoringIn(BaseModel):
    """The alert rules' settings of one system; a field left out keeps its value."""

    model_config = ConfigDict(extra="forbid")

    enabled: Annotated[bool | None, Field(strict=True), NEVER_NULL] = None
    offline_after_hours: Annotated[OfflineAfterHours | None, NEVER_NULL] = None
    underperformance_threshold: Annotated[UnderperformanceThreshold | None, NEVER_NULL] = None


class SystemCreate(BaseModel):
    """A new system. Orientation defaults to tilt 30° facing the equator."""

    model_config = ConfigDict(extra="forbid")

    name: Name
    capacity_kwp: CapacityKwp
    inverter_capacity_kw: InverterKw | None = None
    location: LocationIn
    orientation: OrientationIn | None = None
    market_zone: ZoneCode | None = None
    installed_on: date | None = None
    status: Status = "active"
    model: ModelIn | None = None
    data_source: DataSource | None = Field(
        default=None,
        description="Sandbox only: `simulated` (default) or `metered`; live systems are metered",
    )
    monitoring: MonitoringIn | None = None

    _name = field_validator("name")(check_name)
    _zone = field_validator("market_zone")(check_market_zone)
    _installed = field_validator("installed_on", mode="before")(parse_installed_on)


class SystemPatch(BaseModel):
    """Any writable field but `data_source`; `null` clears an optional field."""

    model_config = ConfigDict(extra="forbid")

    name: Annotated[Name | None, NEVER_NULL] = None
    capacity_kwp: Annotated[CapacityKwp | None, NEVER_NULL] = None
    inverter_capacity_kw: InverterKw | None = None
    location: Annotated[LocationPatch | None, NEVER_NULL] = None
    orientation: Annotated[OrientationPatch | None, NEVER_NULL] = None
    market_zone: ZoneCode | None = None
    installed_on: date | None = None
    status: Annotated[Status | None, NEVER_NULL] = None
    model: Annotated[
        ModelIn | None, Field(description="Performance-model overrides; `null` resets all")
    ] = None
    monitoring: Annotated[MonitoringIn | None, NEVER_NULL] = None
    # Accepted only to be refused with a clear message (it cannot change after creation), so
    # left out of the schema.
    data_source: SkipJsonSchema[DataSource | None] = Field(
        default=None, description="Cannot be changed"
    )

    _name = field_validator("name")(check_name)
    _zone = field_validator("market_zone")(check_market_zone)
    _installed = field_validator("installed_on", mode="before")(parse_installed_on)


class LocationOut(BaseModel):
    latitude: float
    longitude: float
    timezone: str
    country: str | None


class OrientationOut(BaseModel):
    tilt_deg: float
    azimuth_deg: float


class ModelOut(BaseModel):
    gamma_pdc_pct_per_c: float
    losses_pct: float
    inverter_efficiency: float


class MonitoringOut(BaseModel):
    enabled: bool
    offline_after_hours: Annotated[int, Field(ge=1, le=168)]
    underperformance_threshold: Annotated[float, Field(ge=0.1, le=1.0)]


class SystemOut(BaseModel):
    id: str
    name: str
    status: Status
    environment: Literal["live", "test"]
    data_source: DataSource
    capacity_kwp: float
    inverter_capacity_kw: float | None
    location: LocationOut
    orientation: OrientationOut
    market_zone: str | None
    installed_on: str | None
    model: ModelOut
    first_reading_at: str | None
    last_reading_at: str | None
    created_at: str
    updated_at: str
    monitoring: MonitoringOut


class SystemList(BaseModel):
    data: list[SystemOut]
    pagination: Pagination


class SummaryOut(BaseModel):
    energy_today_wh: float | None
    energy_month_wh: float | None
    energy_year_wh: float | None
    energy_lifetime_wh: float | None
    last_power_w: float | None
    last_reading_at: str | None
