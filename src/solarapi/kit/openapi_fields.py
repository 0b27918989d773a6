"""Field types of request models, and query parameters, whose JSON Schema says exactly what
passes.

Many request fields are plain `str` checked by hand (so a 400 names the field and the allowed
values in the API's own words), and PATCH fields are `X | None = None` where None only stands
for "not sent". Left alone, pydantic would document both too loosely: any string, and `null`
accepted. These types keep the validation as it is and state the real rule in the schema, so
the OpenAPI document is the models' own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import (
    BeforeValidator,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    WithJsonSchema,
)
from pydantic_core import core_schema

from solarapi.kit.grid import ALL_INTERVALS, EARLIEST, LATEST
from solarapi.kit.timefmt import format_timestamp
from solarapi.kit.tznames import tz_database_names
from solarapi.kit.zones import ZONES


def enum_schema(values: Iterable[object]) -> WithJsonSchema:
    """A string field checked by hand against a closed list: the schema lists it."""
    return WithJsonSchema({"type": "string", "enum": [str(value) for value in values]})


def _drop_null(schema: dict[str, Any]) -> None:
    choices = [choice for choice in schema.get("anyOf", []) if choice != {"type": "null"}]
    if len(choices) != 1:
        return
    del schema["anyOf"]
    schema.pop("default", None)  # None means "not sent", never a value to send
    kept = dict(schema)
    schema.clear()
    schema.update({**choices[0], **kept})


# `Annotated[X | None, NEVER_NULL] = None`: may be left out, but `null` is refused (a PATCH
# field that cannot be cleared); the schema is X's alone.
NEVER_NULL = Field(json_schema_extra=_drop_null)


def _as_given(value: object) -> object:
    return value


class TimeZone:
    """The tz database's names as one shared schema (`TimeZone`), not the same 600 names inline
    in every field that takes a time zone. The list is read when the document is built, not
    at import."""

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: object, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.str_schema(ref="TimeZone")

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> dict[str, Any]:
        return {
            "type": "string",
            "enum": sorted(tz_database_names()),
            "title": "TimeZone",
            "description": "IANA time zone name of the tz database",
        }


# A time-zone name (still checked by `kit.tznames.check_time_zone`, for its messages).
TimeZoneName = Annotated[str, BeforeValidator(_as_given, json_schema_input_type=TimeZone)]
# A bidding zone's code (checked by hand against `kit.zones.ZONES`).
ZoneCode = Annotated[str, enum_schema(ZONES)]
# ISO 3166-1 alpha-2 (checked by hand, for its message).
CountryCode = Annotated[str, WithJsonSchema({"type": "string", "pattern": "^[A-Z]{2}$"})]
# An instant of an answer, as `kit.timefmt.format_timestamp` writes it (RFC 3339, UTC, `Z`).
Instant = Annotated[str, WithJsonSchema({"type": "string", "format": "date-time", "pattern": "Z$"})]


@dataclass(slots=True)
class QuerySchema(WithJsonSchema):
    """What a query parameter accepts, stated where the route declares it.

    The routes take their query parameters as optional strings (`str | None = None`, None for
    "not given") and parse them by hand, so that a 400 says what is wrong in the contract's
    words and FastAPI never answers 422. This annotation says what passes instead, and the
    document takes it whole (`openapi.build_openapi`): FastAPI would add a title and drop the
    `default`, since the route's own default is None. `required` documents a parameter that
    the route refuses the request without (with its own 400, so FastAPI must not require it).
    In `Annotated[str | None, Query(...), QuerySchema(...)]`; a `@direct` endpoint documents
    its parameters with `kit.direct_endpoints.query_parameter`.
    """

    required: bool = False


def query_enum(
    values: Iterable[object], *, default: object = None, required: bool = False
) -> QuerySchema:
    """A query parameter checked by hand against a closed list."""
    schema: dict[str, Any] = {"type": "string", "enum": [str(value) for value in values]}
    if default is not None:
        schema["default"] = str(default)
    return QuerySchema(schema, required=required)


def query_count(maximum: int, default: int, *, description: str | None = None) -> QuerySchema:
    """A positive integer query parameter (`page`, `limit`) with its bounds and default."""
    schema: dict[str, Any] = {
        "type": "integer",
        "minimum": 1,
        "maximum": maximum,
        "default": default,
    }
    if description is not None:
        schema["description"] = description
    return QuerySchema(schema)


def query_text(schema: dict[str, Any]) -> QuerySchema:
    """A string query parameter with a rule of its own (a length, a pattern)."""
    return QuerySchema({"type": "string", **schema})


# `from` and `to` (`kit.grid.parse_range`). JSON Schema cannot bound a date-time; the bounds
# are stated where a client reads them.
QUERY_INSTANT = QuerySchema(
    {
        "type": "string",
        "format": "date-time",
        "description": (
            f"RFC 3339 with `Z` or an offset, from {format_timestamp(EARLIEST)} to "
            f"{format_timestamp(LATEST)} (400 `validation` outside)"
        ),
        "examples": [format_timestamp(EARLIEST)],
    }
)
# `interval` of a series that offers every bucket (`kit.grid.parse_interval`).
QUERY_INTERVAL = query_enum(ALL_INTERVALS)
# A bidding zone's code (`kit.zones.ZONES`).
QUERY_ZONE = query_enum(ZONES)
# A system id filter. Given empty, a 400 from the gateway (`parse_query`), like every parameter.
QUERY_SYSTEM_ID = query_text({"minLength": 1, "maxLength": 40})
