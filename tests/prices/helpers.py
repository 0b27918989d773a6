"""Plain functions the prices tests share: importing files and reading what got stored."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from fastapi import FastAPI
from sqlalchemy import select

from solarapi.kit.timefmt import utcnow
from solarapi.models.prices import MarketPrice
from solarapi.prices.price_files import read_price_file
from solarapi.prices.service import ImportResult, import_prices

DATA = Path(__file__).parent / "data"


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


async def import_file(
    app: FastAPI, path: Path, zone: str, resolution_s: int | None = None
) -> ImportResult:
    parsed = read_price_file(path, zone, resolution_s)
    async with app.state.sessionmaker() as session, session.begin():
        return await import_prices(session, parsed, utcnow())


def write_csv(tmp_path: Path, name: str, rows: list[tuple[str, float]]) -> Path:
    path = tmp_path / name
    lines = ["timestamp,price_eur_per_mwh", *(f"{ts},{price}" for ts, price in rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


async def stored_rows(
    app: FastAPI, zone: str, start: datetime, end: datetime
) -> list[tuple[datetime, int, float, str]]:
    """(start, resolution_s, price, source) of the rows starting in [start, end), by start."""
    async with app.state.sessionmaker() as session:
        result = await session.execute(
            select(
                MarketPrice.start,
                MarketPrice.resolution_s,
                MarketPrice.price_eur_per_mwh,
                MarketPrice.source,
            )
            .where(MarketPrice.zone == zone, MarketPrice.start >= start, MarketPrice.start < end)
            .order_by(MarketPrice.start)
        )
        return [(row[0], row[1], row[2], row[3]) for row in result.all()]
