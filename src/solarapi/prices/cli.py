"""Operator commands of the prices area, registered on the `solarapi` command."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.cli_support import load_settings, print_json, run_in_session
from solarapi.kit.timefmt import TimestampError, format_timestamp, parse_date, utcnow
from solarapi.kit.zones import ZONES
from solarapi.prices.fetch import ENTSOE_API_URL, fetch_day_ahead, local_day_range
from solarapi.prices.price_files import read_price_file
from solarapi.prices.price_rows import (
    ParsedPrices,
    PriceFileError,
    ResolutionSpan,
    resolution_spans,
)
from solarapi.prices.service import ImportResult, import_prices

prices_app = typer.Typer(help="Day-ahead market prices (live data).", no_args_is_help=True)

_RESOLUTIONS = {"15m": 900, "30m": 1800, "60m": 3600, "1h": 3600}


@prices_app.command("import")
def import_command(
    file: Annotated[
        Path, typer.Argument(help="ENTSO-E Publication_MarketDocument (A44) XML, or CSV")
    ],
    zone: Annotated[str, typer.Option("--zone", help="Zone code, e.g. NL")],
    resolution: Annotated[
        str | None,
        typer.Option(
            help="CSV only: how long each price holds (15m, 30m, 60m); inferred if absent"
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Import prices for one zone; they replace stored prices for the time they cover.

    All or nothing: a file with any error stores nothing and the error names its line.
    """

    resolution_s: int | None = None
    if resolution is not None:
        resolution_s = _RESOLUTIONS.get(resolution)
        if resolution_s is None:
            typer.echo(f"error: --resolution must be 15m, 30m or 60m; got '{resolution}'", err=True)
            raise typer.Exit(2)
    try:
        parsed = read_price_file(file, zone, resolution_s)
    except PriceFileError as exc:
        typer.echo(f"error: {file}: {exc}", err=True)
        raise typer.Exit(1) from None

    async def work(session: AsyncSession) -> ImportResult:
        return await import_prices(session, parsed, utcnow())

    _report(run_in_session(load_settings(), work), as_json)


@prices_app.command("fetch")
def fetch_command(
    zone: Annotated[str, typer.Option("--zone", help="Zone code, e.g. NL")],
    first: Annotated[str, typer.Option("--from", help="First local day of the zone, YYYY-MM-DD")],
    last: Annotated[
        str | None, typer.Option("--to", help="Last local day, YYYY-MM-DD (default: --from)")
    ] = None,
    url: Annotated[str, typer.Option(help="ENTSO-E API endpoint")] = "",
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Fetch day-ahead prices from the ENTSO-E Transparency Platform and import them.

    Needs SOLARAPI_ENTSOE_TOKEN (the platform's security token). Whole local days of the zone,
    at most 366 per run; they replace stored prices like an import.
    """

    settings = load_settings()
    token = (settings.entsoe_token or "").strip()
    if not token:
        typer.echo("error: set SOLARAPI_ENTSOE_TOKEN to the ENTSO-E security token", err=True)
        raise typer.Exit(2)
    found = ZONES.get(zone)
    if found is None:
        typer.echo(f"error: unknown zone '{zone}'; known zones: {', '.join(ZONES)}", err=True)
        raise typer.Exit(2)
    try:
        first_day = parse_date(first)
        last_day = parse_date(last) if last else first_day
        start, end = local_day_range(found, first_day, last_day)
        document = fetch_day_ahead(found, start, end, token, url or ENTSOE_API_URL)
    except (TimestampError, PriceFileError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    parsed = ParsedPrices(found, "entsoe", document.rows, document.sequence, document.skipped)

    async def work(session: AsyncSession) -> ImportResult:
        return await import_prices(session, parsed, utcnow())

    _report(run_in_session(settings, work), as_json)


def _report(result: ImportResult, as_json: bool) -> None:
    """Per zone and sequence, what was stored (and what was skipped): range, resolution, count."""

    def iso(epoch: int) -> str:
        return format_timestamp(datetime.fromtimestamp(epoch, UTC))

    def spans(items: Sequence[ResolutionSpan]) -> list[dict[str, object]]:
        return [
            {
                "resolution": f"PT{span.resolution_s // 60}M",
                "count": span.count,
                "from": iso(span.first_start),
                "to": iso(span.last_end),
            }
            for span in items
        ]

    skipped_spans = [(item, spans(resolution_spans(item.rows))) for item in result.skipped]
    skipped = [
        {"sequence": item.sequence, "count": len(item.rows), "spans": item_spans}
        for item, item_spans in skipped_spans
    ]
    payload: dict[str, object] = {
        "zone": result.zone,
        "source": result.source,
        "sequence": result.sequence,
        "stored": result.stored,
        "replaced": result.replaced,
        "from": format_timestamp(result.first_start),
        "to": format_timestamp(result.last_end),
        "resolutions": [f"PT{seconds // 60}M" for seconds in result.resolutions_s],
        "spans": spans(result.spans),
        "skipped": skipped,
    }
    if as_json:
        print_json(payload)
        return
    what = "" if result.sequence is None else f" sequence {result.sequence} (day-ahead price)"
    typer.echo(
        f"{result.zone}{what}: stored {result.stored} prices from {payload['from']} to "
        f"{payload['to']}; replaced {result.replaced} stored before"
    )
    for span in spans(result.spans):
        typer.echo(f"  {span['resolution']}: {span['count']} from {span['from']} to {span['to']}")
    for item, item_spans in skipped_spans:
        typer.echo(
            f"{result.zone} sequence {item.sequence}: skipped {len(item.rows)} prices (another "
            "auction, not the day-ahead price; not stored)"
        )
        for span in item_spans:
            typer.echo(
                f"  {span['resolution']}: {span['count']} from {span['from']} to {span['to']}"
            )


def register(app: typer.Typer) -> None:
    """Add this area's commands to `app`."""
    app.add_typer(prices_app, name="prices")
