"""The part of the client that does no I/O: building requests, reading answers, deciding on
retries. `Client` and `AsyncClient` are thin loops around it, so both behave the same."""

from __future__ import annotations

import email.utils
import importlib.metadata
import logging
import os
import random
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Generic, Protocol, TypeVar
from urllib.parse import quote

import httpx

from solarapi_client import errors
from solarapi_client._decode import decode
from solarapi_client.models import (
    Health,
    IrradianceReading,
    Location,
    ModelParameters,
    Monitoring,
    Orientation,
    Pagination,
    Reading,
    SystemStatus,
)

T = TypeVar("T")

__version__ = importlib.metadata.version("solarapi-client")
DEFAULT_BASE_URL = "http://127.0.0.1:8000"
API_PREFIX = "/api/v1"
# Connecting should be quick; a year of 15-minute readings or a PDF download may take a while.
DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=5.0)
DEFAULT_MAX_RETRIES = 3
# Statuses retried for every method: the API refused the request before doing anything
# (429: the key's window is full and the request was not counted; 503: database unreachable).
RETRY_STATUSES = frozenset({429, 503})
# Methods safe to send again after a broken connection. A POST is too, because the client
# always sends an Idempotency-Key: the API replays the first answer instead of acting twice.
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "DELETE", "PUT", "POST"})
MAX_PAGE_SIZE = 100

# What the methods take: a time as an aware datetime or RFC 3339 text, a day as a date or
# ISO text, and a nested body part as the typed model or a plain mapping with the same keys
# (a mapping may leave fields out where the API allows it, as in an update).
Timestamp = datetime | str
Day = date | str
LocationInput = Location | Mapping[str, Any]
OrientationInput = Orientation | Mapping[str, Any]
ModelInput = ModelParameters | Mapping[str, Any]
MonitoringInput = Monitoring | Mapping[str, Any]
ReadingInput = Reading | Mapping[str, Any]
IrradianceInput = IrradianceReading | Mapping[str, Any]

# A function the pagers and the change feed call to fetch a page, and the wait before a
# retry (`time.sleep`, `asyncio.sleep` by default), for each client: `_sync.py` is generated
# from `_async.py` with the Sync names for the Async ones.
A = TypeVar("A")
R = TypeVar("R")
SyncFetch = Callable[[A], R]
AsyncFetch = Callable[[A], Awaitable[R]]
SyncSleep = Callable[[float], None]
AsyncSleep = Callable[[float], Awaitable[None]]


class NotGiven:
    """Marks a PATCH field that was not passed (unlike None, which sets the field to null)."""

    _instance: NotGiven | None = None

    def __new__(cls) -> NotGiven:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NOT_GIVEN"

    def __bool__(self) -> bool:
        return False


NOT_GIVEN = NotGiven()


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a list endpoint."""

    data: list[T]
    pagination: Pagination


class Identified(Protocol):
    """Anything listed has an id."""

    @property
    def id(self) -> str: ...


@dataclass(frozen=True)
class Call(Generic[T]):
    """One endpoint call: what to send and how to read a successful answer."""

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    params: Mapping[str, str] = field(default_factory=dict)
    json: Any = None
    idempotency_key: str | None = None
    # Error statuses whose body is this call's answer, neither retried nor raised (the 503
    # of `GET /health` is its "unavailable" report).
    answered_by: frozenset[int] = frozenset()

    def answers(self, response: httpx.Response) -> bool:
        return response.is_success or response.status_code in self.answered_by


def one(cls: type[T]) -> Callable[[httpx.Response], T]:
    return lambda response: decode(cls, response.json())


def health_call() -> Call[Health]:
    """`GET /health`, whose 503 is an answer ("unavailable"), not an error to retry."""
    return Call("GET", "/health", one(Health), answered_by=frozenset({503}))


def many(cls: type[T]) -> Callable[[httpx.Response], list[T]]:
    return lambda response: [decode(cls, item) for item in response.json()["data"]]


def paged(cls: type[T]) -> Callable[[httpx.Response], Page[T]]:
    def parse(response: httpx.Response) -> Page[T]:
        body = response.json()
        return Page(
            data=[decode(cls, item) for item in body["data"]],
            pagination=decode(Pagination, body["pagination"]),
        )

    return parse


def nothing(response: httpx.Response) -> None:
    return None


def raw(response: httpx.Response) -> bytes:
    return response.content


def path_id(value: str) -> str:
    """An id as one path segment (an id holding '/' or '?' cannot reach another endpoint)."""
    return quote(value, safe="")


def timestamp_param(value: datetime | str) -> str:
    if isinstance(value, str):
        return value
    if value.tzinfo is None or value.utcoffset() is None:
        # The API refuses zone-less timestamps (400); say so before the request is sent.
        raise ValueError(f"timestamp {value.isoformat()} has no time zone; pass an aware datetime")
    return value.isoformat()


def date_param(value: date | str) -> str:
    return value if isinstance(value, str) else value.isoformat()


def query(**values: Any) -> dict[str, str]:
    """Query parameters without the unset ones; `from_` is sent as `from`."""
    params: dict[str, str] = {}
    for name, value in values.items():
        if value is None:
            continue
        key = name.rstrip("_")
        if isinstance(value, datetime):
            params[key] = timestamp_param(value)
        elif isinstance(value, date):
            params[key] = value.isoformat()
        else:
            params[key] = str(value)
    return params


def body(**values: Any) -> dict[str, Any]:
    """A JSON body without the NOT_GIVEN fields (None stays: it sets a field to null)."""
    return {name: jsonable(value) for name, value in values.items() if value is not NOT_GIVEN}


def jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return timestamp_param(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {k: jsonable(v) for k, v in value.items() if v is not NOT_GIVEN}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        return {k: jsonable(getattr(value, k)) for k in value.__dataclass_fields__}
    return value


def readings_body(readings: Iterable[ReadingInput]) -> dict[str, Any]:
    """`{"readings": [...]}` of an upload; an unset `power_w` is left out, not sent as null."""
    return {"readings": [_without_none(r, ("power_w",)) for r in readings]}


def irradiance_body(readings: Iterable[IrradianceInput]) -> dict[str, Any]:
    """As `readings_body`, leaving out unset temperatures."""
    optional = ("module_temp_c", "ambient_temp_c")
    return {"readings": [_without_none(r, optional) for r in readings]}


def _without_none(item: Any, optional: tuple[str, ...]) -> dict[str, Any]:
    values = dict(jsonable(item))
    for name in optional:
        if values.get(name) is None:
            values.pop(name, None)
    return values


def fleet_query(
    system_ids: Sequence[str] | None, status: SystemStatus | None, market_zone: str | None
) -> dict[str, str]:
    """The portfolio endpoints' filters (`system_ids` comma-separated)."""
    ids = None if system_ids is None else ",".join(system_ids)
    return query(system_ids=ids, status=status, market_zone=market_zone)


log = logging.getLogger("solarapi_client")


@dataclass(frozen=True)
class RetryWait:
    """A wait before sending a request again, as `RetryPolicy.on_wait` is told of it."""

    status: int  # 429 or 503
    seconds: float
    attempt: int  # 1 for the first retry
    method: str
    url: str


@dataclass(frozen=True)
class RetryPolicy:
    """When and how long to wait before sending a request again.

    A 429 or 503 waits what the API asks: `Retry-After`, else `X-RateLimit-Reset` (Unix
    seconds) minus now. Without either, or after a broken connection, it backs off
    exponentially with jitter. A wait longer than `max_wait` is not slept through: the error
    is raised at once (a daily window may reset in hours).
    """

    max_retries: int = DEFAULT_MAX_RETRIES
    initial_backoff: float = 0.5
    max_backoff: float = 8.0
    max_wait: float = 60.0
    # Called before every wait on a 429 or 503 (each is also logged at INFO on the
    # `solarapi_client` logger), e.g. to count throttling in your own metrics.
    on_wait: Callable[[RetryWait], None] | None = None

    def backoff(self, attempt: int) -> float:
        base: float = min(self.max_backoff, self.initial_backoff * 2**attempt)
        return base * (0.5 + random.random() / 2)

    def after_response(self, response: httpx.Response, attempt: int) -> float | None:
        """Seconds to wait before retrying this answer; None: do not retry."""
        if response.status_code not in RETRY_STATUSES or attempt >= self.max_retries:
            return None
        asked = requested_wait(response.status_code, response.headers, time.time())
        wait = asked if asked is not None else self.backoff(attempt)
        if wait > self.max_wait:
            return None
        try:
            request: httpx.Request | None = response.request
        except RuntimeError:  # a response made by hand (a test, a transport) has none
            request = None
        event = RetryWait(
            response.status_code,
            wait,
            attempt + 1,
            request.method if request is not None else "",
            str(request.url.copy_with(query=None)) if request is not None else "",
        )
        log.info(
            "HTTP %d: waiting %.1f s before retry %d of %s %s",
            event.status, event.seconds, event.attempt, event.method, event.url,
        )  # fmt: skip
        if self.on_wait is not None:
            self.on_wait(event)
        return wait

    def after_error(self, request: httpx.Request, exc: Exception, attempt: int) -> float | None:
        if attempt >= self.max_retries:
            return None
        # Nothing was sent when the connection could not be opened: safe for every method.
        if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)):
            return self.backoff(attempt)
        if request.method in IDEMPOTENT_METHODS and isinstance(
            exc, (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)
        ):
            return self.backoff(attempt)
        return None


def requested_wait(status: int, headers: httpx.Headers, now: float) -> float | None:
    retry_after = headers.get("retry-after")
    if retry_after is not None:
        try:
            return max(0.0, float(retry_after))
        except ValueError:
            when = email.utils.parsedate_to_datetime(retry_after)
            return max(0.0, when.timestamp() - now)
    # Every answer carries X-RateLimit-Reset; only a 429 means "wait for that window".
    reset = headers.get("x-ratelimit-reset")
    if status == 429 and reset is not None and reset.isdigit():
        return max(0.0, int(reset) - now)
    return None


@dataclass(frozen=True)
class Credential:
    """A kind of credential a client sends as its bearer token, and how a wrong one is told
    apart before any request: a placeholder pasted from a quickstart (`pk_live_…`, whose
    ellipsis is not ASCII and would fail inside the HTTP library), a truncated copy, stray
    quotes or spaces, or the other kind. Only a short prefix is quoted in a message."""

    name: str  # "API key"
    plural: str  # "keys"
    pattern: re.Pattern[str]
    looks_like: str
    quoted: int  # characters quoted in a message
    argument: str  # the client's parameter
    variable: str  # the environment variable read when the parameter is not given
    expected: str
    mistaken: re.Pattern[str]  # the other kind, told apart with `mistaken_hint`
    mistaken_hint: str

    def given_or_from_environment(self, value: str | None) -> str:
        found = value if value is not None else os.environ.get(self.variable)
        if not found:
            raise errors.SolarApiError(
                f"no {self.name}: pass {self.argument}=... or set {self.variable} ({self.expected})"
            )
        self.check(found)
        return found

    def check(self, value: str) -> None:
        if value.isascii() and self.pattern.fullmatch(value):
            return
        shown = value[: self.quoted] + ("…" if len(value) > self.quoted else "")
        hint = ""
        if not value.isascii():
            hint = (
                " (it holds characters other than ASCII letters and digits, such as the '…' of "
                f"a placeholder: paste the whole {self.name.split()[-1]} shown once in the "
                "dashboard)"
            )
        elif self.mistaken.fullmatch(value):
            hint = f" ({self.mistaken_hint})"
        raise errors.SolarApiError(
            f"malformed {self.name} {shown!r}: {self.plural} look like {self.looks_like}, "
            f"{len(value)} characters in all is not that{hint}"
        )


_KEY_PATTERN = re.compile(r"pk_(live|test)_[0-9A-Za-z]{38}")
_TOKEN_PATTERN = re.compile(r"ik_[0-9A-Za-z]{38}")
API_KEY = Credential(
    name="API key",
    plural="keys",
    pattern=_KEY_PATTERN,
    looks_like="pk_live_ or pk_test_ followed by 38 letters and digits",
    quoted=8,
    argument="api_key",
    variable="SOLARAPI_API_KEY",
    expected="a pk_live_ or pk_test_ key",
    mistaken=_TOKEN_PATTERN,
    mistaken_hint="an ingest token: it only uploads a logger's readings, with IngestClient",
)
# A data logger's token for one system; 7 characters quoted, as the dashboard shows them.
INGEST_TOKEN = Credential(
    name="ingest token",
    plural="tokens",
    pattern=_TOKEN_PATTERN,
    looks_like="ik_ followed by 38 letters and digits",
    quoted=7,
    argument="token",
    variable="SOLARAPI_INGEST_TOKEN",
    expected="the ik_ token created for the system",
    mistaken=_KEY_PATTERN,
    mistaken_hint="an API key: use Client; IngestClient takes a system's ik_ token",
)


class Core:
    """Settings shared by every client and the request/answer translation."""

    def __init__(self, credential: str, base_url: str | None, retry: RetryPolicy) -> None:
        """`credential`: a checked API key or ingest token, sent as the bearer token."""
        url = base_url or os.environ.get("SOLARAPI_BASE_URL") or DEFAULT_BASE_URL
        self.base_url = url.rstrip("/")
        self.retry = retry
        self.headers = {
            "Authorization": f"Bearer {credential}",
            "Accept": "application/json",
            "User-Agent": f"solarapi-client-python/{__version__}",
        }

    def build(self, http: httpx.Client | httpx.AsyncClient, call: Call[Any]) -> httpx.Request:
        headers: dict[str, str] = {}
        if call.method == "POST":
            # One key per logical request, generated once and kept across its retries.
            headers["Idempotency-Key"] = call.idempotency_key or str(uuid.uuid4())
        return http.build_request(
            call.method,
            f"{self.base_url}{API_PREFIX}{call.path}",
            params=call.params or None,
            json=call.json,
            headers=headers,
        )

    def result(self, call: Call[T], response: httpx.Response) -> T:
        if call.answers(response):
            return call.parse(response)
        raise error_from(response)

    def transport_error(self, exc: Exception) -> errors.SolarApiError:
        if isinstance(exc, httpx.TimeoutException):
            return errors.TimeoutError(f"no answer in time: {exc}")
        return errors.ConnectionError(f"could not reach the API: {exc}")


def error_from(response: httpx.Response) -> errors.ApiError:
    request_id = response.headers.get("x-request-id")
    try:
        payload = response.json()
        message = str(payload["error"])
        code = str(payload["code"])
    except (ValueError, KeyError, TypeError):
        # Not the API's error shape (a proxy's page, say): keep what there is.
        payload = response.text
        message = f"HTTP {response.status_code}: {response.text[:200]}"
        code = "unknown"
    cls = errors.ERRORS_BY_CODE.get(code, errors.ApiError)
    return cls(
        message,
        code=code,
        status=response.status_code,
        request_id=request_id,
        headers=response.headers,
        body=payload,
    )
