"""Local calendars follow the tz database pinned in uv.lock, never the host's (issue 28,
item 19). On a host whose /usr/share/zoneinfo is an older release (2025b on the machine this
was found on, against the lock's 2026f) these fail without `kit.tzdb`."""

from __future__ import annotations

import subprocess
import sys
import zoneinfo
from datetime import UTC, datetime, timedelta
from importlib.resources import files

import tzdata
from fastapi import FastAPI

from solarapi.kit.tzdb import TZDATA_VERSION
from tests.support import Tenant, client_for
from tests.systems.factories import create_system


def _shipped(name: str) -> zoneinfo.ZoneInfo:
    """The zone as the `tzdata` package's own file defines it."""
    parts = name.split("/")
    resource = files("tzdata").joinpath("zoneinfo", *parts)
    with resource.open("rb") as file:
        return zoneinfo.ZoneInfo.from_file(file, key=name)


def _offsets(zone: zoneinfo.ZoneInfo, start: datetime, days: int, step_h: int) -> list[object]:
    return [
        (start + timedelta(hours=h)).astimezone(zone).utcoffset()
        for h in range(0, days * 24, step_h)
    ]


def test_no_host_path_is_searched() -> None:
    assert zoneinfo.TZPATH == ()


def test_every_zone_follows_the_shipped_database() -> None:
    """Every zone the API accepts, weekly over 2024–2029: the zone the service builds by name
    has the offsets of the package's file (2025b and 2026f differ in 15 zones there)."""
    listing = files("tzdata").joinpath("zones").read_text(encoding="utf-8").split()
    start = datetime(2024, 1, 1, tzinfo=UTC)
    differing = [
        name
        for name in listing
        if _offsets(zoneinfo.ZoneInfo(name), start, 6 * 365, 7 * 24)
        != _offsets(_shipped(name), start, 6 * 365, 7 * 24)
    ]
    assert differing == []


def test_vancouver_2026_11_01_follows_the_shipped_release() -> None:
    """2026f keeps Vancouver on UTC−7 from 2026-11-01 (a 24-hour day); older releases end
    DST that day (25 hours). The service's answer is the package's, whatever the host has."""
    shipped = _shipped("America/Vancouver")
    day = datetime(2026, 11, 1, tzinfo=shipped)
    expected_h = (day + timedelta(days=1)).timestamp() - day.timestamp()
    ours = zoneinfo.ZoneInfo("America/Vancouver")
    ours_day = datetime(2026, 11, 1, tzinfo=ours)
    assert (ours_day + timedelta(days=1)).timestamp() - ours_day.timestamp() == expected_h


def test_a_fresh_process_uses_the_package_even_with_a_host_path_set() -> None:
    """`PYTHONTZPATH` pointing at the host's files, and a zone built before solarapi is
    imported: the service still computes with the package."""
    code = (
        "import zoneinfo; zoneinfo.ZoneInfo('America/Vancouver'); import solarapi; "
        "from datetime import datetime, timedelta; "
        "tz = zoneinfo.ZoneInfo('America/Vancouver'); d = datetime(2026, 11, 1, tzinfo=tz); "
        "print(zoneinfo.TZPATH, (d + timedelta(days=1)).timestamp() - d.timestamp())"
    )
    shipped = _shipped("America/Vancouver")
    day = datetime(2026, 11, 1, tzinfo=shipped)
    expected = (day + timedelta(days=1)).timestamp() - day.timestamp()
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONTZPATH": "/usr/share/zoneinfo", "PATH": "/usr/bin:/bin"},
    )
    assert result.stdout.split() == ["()", str(expected)]


async def test_health_reports_the_shipped_release(app: FastAPI) -> None:
    async with client_for(app) as client:
        body = (await client.get("/api/v1/health")).json()
    assert body["tzdata"] == tzdata.IANA_VERSION == TZDATA_VERSION


async def test_vancouver_day_over_http_has_the_shipped_length(
    app: FastAPI, enterprise: Tenant
) -> None:
    shipped = _shipped("America/Vancouver")
    day = datetime(2026, 11, 1, tzinfo=shipped)
    quarters = int(((day + timedelta(days=1)).timestamp() - day.timestamp()) // 900)
    async with client_for(app, enterprise.live) as client:
        system_id = (
            await create_system(
                client,
                location={"latitude": 49.28, "longitude": -123.12, "timezone": "America/Vancouver"},
                market_zone=None,
            )
        )["id"]
        response = await client.get(
            f"/api/v1/systems/{system_id}/readings",
            params={"from": "2026-11-01T12:00:00Z", "to": "2026-11-01T13:00:00Z", "interval": "1d"},
        )
    assert response.status_code == 200, response.text
    assert [b["expected_samples"] for b in response.json()["data"]] == [quarters]
