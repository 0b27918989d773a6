"""The shared kit: key format and checksum, RFC 3339 parsing, and the pagination helper."""

from __future__ import annotations

import zlib
from datetime import UTC, datetime, timedelta, timezone

import pytest
from fastapi import FastAPI
from hypothesis import given
from hypothesis import strategies as st

from solarapi.auth.keys import BASE62, base62, checksum, display_form, generate_key, parse_key
from solarapi.kit.pagination import PageParams
from solarapi.kit.plans import Environment
from solarapi.kit.text import energy_text
from solarapi.kit.timefmt import TimestampError, format_timestamp, parse_date, parse_timestamp
from solarapi.logs import redact_keys
from tests.support import PROBE_ITEM_COUNT, PROBE_ITEMS, Tenant, client_for

# --- keys -------------------------------------------------------------------------------


def test_checksum_is_crc32_in_base62_most_significant_first() -> None:
    random_part = "A" * 32
    value = zlib.crc32(random_part.encode())
    digits = ""
    while value:
        value, rest = divmod(value, 62)
        digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"[rest] + digits
    assert checksum(random_part) == digits.rjust(6, "0")
    assert base62(0, 6) == "000000"
    assert base62(61, 2) == "0z"
    assert base62(62, 2) == "10"


@given(st.sampled_from(list(Environment)))
def test_generated_keys_parse_and_typos_do_not(environment: Environment) -> None:
    key = generate_key(environment).key
    assert len(key) == len(f"pk_{environment.value}_") + 38
    assert parse_key(key) is environment
    for position in range(8, len(key)):
        char = key[position]
        typo = key[:position] + BASE62[(BASE62.index(char) + 7) % 62] + key[position + 1 :]
        assert parse_key(typo) is None, position
    assert parse_key(key.replace("pk_", "sk_", 1)) is None
    assert parse_key(key + "0") is None
    assert display_form(key) == f"{key[:12]}…{key[-4:]}"


def test_log_redaction_keeps_only_the_display_form() -> None:
    key = generate_key(Environment.LIVE).key
    assert redact_keys(f"GET /x?key={key} done") == f"GET /x?key={display_form(key)} done"
    assert redact_keys("no keys here pk_live_short") == "no keys here pk_live_short"


# --- time -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2025-06-15T12:00:00Z", datetime(2025, 6, 15, 12, tzinfo=UTC)),
        ("2025-06-15t12:00:00z", datetime(2025, 6, 15, 12, tzinfo=UTC)),
        ("2025-06-15T14:00:00+02:00", datetime(2025, 6, 15, 12, tzinfo=UTC)),
        ("2025-06-15T00:30:00-05:30", datetime(2025, 6, 15, 6, tzinfo=UTC)),
        ("2025-06-15T12:00:00.5Z", datetime(2025, 6, 15, 12, 0, 0, 500000, tzinfo=UTC)),
        ("2025-06-15 12:00:00Z", datetime(2025, 6, 15, 12, tzinfo=UTC)),
    ],
)
def test_parse_timestamp_accepts_rfc3339_with_a_zone(text: str, expected: datetime) -> None:
    parsed = parse_timestamp(text)
    assert parsed == expected
    assert parsed.tzinfo is UTC


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("2025-06-01T00:00:00", "has no time zone"),
        ("2025-06-01", "not an RFC 3339 timestamp"),
        ("2025-06-01T24:00:00Z", "not a valid date and time"),
        ("2025-02-30T00:00:00Z", "not a valid date and time"),
        ("2025-06-01T00:00:00+25:00", "not a valid date and time"),
        ("2025-06-01T00:00:00+0200", "not an RFC 3339 timestamp"),
        ("1749945600", "not an RFC 3339 timestamp"),
        ("", "not an RFC 3339 timestamp"),
    ],
)
def test_parse_timestamp_rejects_with_a_reason(text: str, fragment: str) -> None:
    with pytest.raises(TimestampError, match=fragment):
        parse_timestamp(text)


@given(
    st.datetimes(
        min_value=datetime(1970, 1, 2),
        max_value=datetime(9998, 12, 30),
        timezones=st.sampled_from(
            [UTC, timezone(timedelta(hours=5, minutes=45)), timezone(-timedelta(hours=11))]
        ),
    )
)
def test_format_then_parse_round_trips_whole_seconds(value: datetime) -> None:
    text = format_timestamp(value)
    assert text.endswith("Z")
    assert len(text) == 20
    assert parse_timestamp(text) == value.replace(microsecond=0)
    assert parse_timestamp(value.isoformat()) == value


def test_parse_date() -> None:
    assert parse_date("2025-06-15").isoformat() == "2025-06-15"
    for bad in ("2025-6-15", "2025-06-31", "20250615", "2025-06-15T00:00:00Z"):
        with pytest.raises(TimestampError):
            parse_date(bad)


# --- pagination ---------------------------------------------------------------------------


def test_offset() -> None:
    assert PageParams(page=1, limit=50).offset == 0
    assert PageParams(page=3, limit=50).offset == 100


async def test_pagination_envelope_and_link_header(probe_app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(probe_app, enterprise.live) as client:
        first = await client.get(PROBE_ITEMS, params={"status": "x"})
        middle = await client.get(PROBE_ITEMS, params={"page": "2", "limit": "50", "status": "x"})
        last = await client.get(PROBE_ITEMS, params={"page": "3", "limit": "50"})
        past = await client.get(PROBE_ITEMS, params={"page": "1000000000", "limit": "100"})
    assert first.status_code == 200
    assert [i["id"] for i in first.json()["data"]][:2] == ["item_000", "item_001"]
    assert first.json()["pagination"] == {
        "page": 1, "limit": 50, "total": PROBE_ITEM_COUNT, "total_pages": 3, "has_more": True,
    }  # fmt: skip
    body = middle.json()
    assert [i["id"] for i in body["data"]] == [f"item_{n:03d}" for n in range(50, 100)]
    assert body["pagination"]["has_more"] is True
    links = middle.headers["link"]
    assert f'<{PROBE_ITEMS}?status=x&page=1&limit=50>; rel="first"' in links
    assert f'<{PROBE_ITEMS}?status=x&page=1&limit=50>; rel="prev"' in links
    assert f'<{PROBE_ITEMS}?status=x&page=3&limit=50>; rel="next"' in links
    assert f'<{PROBE_ITEMS}?status=x&page=3&limit=50>; rel="last"' in links
    assert len(last.json()["data"]) == PROBE_ITEM_COUNT - 100
    assert last.json()["pagination"]["has_more"] is False
    assert 'rel="next"' not in last.headers["link"]
    assert 'rel="prev"' not in first.headers["link"]
    assert past.status_code == 200
    assert past.json()["data"] == []
    assert past.json()["pagination"]["has_more"] is False


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"page": "0"}, "page must be an integer between 1 and 1000000000; got '0'"),
        ({"page": "-1"}, "page must be an integer between 1 and 1000000000; got '-1'"),
        ({"page": "two"}, "page must be an integer between 1 and 1000000000; got 'two'"),
        ({"page": "1.5"}, "page must be an integer between 1 and 1000000000; got '1.5'"),
        ({"page": "99999999999999999999999"}, "between 1 and 1000000000"),
        ({"page": "+2"}, "page must be an integer between 1 and 1000000000; got '+2'"),
        ({"limit": "0"}, "limit must be an integer between 1 and 100; got '0'"),
        ({"limit": "101"}, "limit must be an integer between 1 and 100; got '101'"),
        ({"limit": "١٠"}, "limit must be an integer between 1 and 100"),
    ],
)
async def test_pagination_rejects_bad_parameters(
    probe_app: FastAPI, enterprise: Tenant, params: dict[str, str], message: str
) -> None:
    async with client_for(probe_app, enterprise.live) as client:
        response = await client.get(PROBE_ITEMS, params=params)
    assert response.status_code == 400
    assert response.json() == {"error": response.json()["error"], "code": "validation"}
    assert message in response.json()["error"]


@pytest.mark.parametrize(
    ("wh", "text"),
    [(1e8, "100,000,000"), (12345678.9, "12,345,678.9"), (0.0, "0"), (0.0005, "0.001"),
     (999.1234, "999.123"), (-2.5, "-2.5")],
)  # fmt: skip
def test_energy_in_messages_keeps_its_digits(wh: float, text: str) -> None:
    assert energy_text(wh) == text
