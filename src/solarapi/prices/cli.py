"""Operator commands of the prices area, registered on the `solarapi` command."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

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
    from sqlalchemy.ext.asyncio import AsyncSession

    from solarapi.cli import _print_json, _settings, run_in_session
    from solarapi.kit.timefmt import format_timestamp, utcnow
    from solarapi.prices.imports import PriceFileError, read_price_file
    from solarapi.prices.service import ImportResult, import_prices

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

    result = run_in_session(_settings(), work)
    resolutions = [f"PT{seconds // 60}M" for seconds in result.resolutions_s]
    payload: dict[str, object] = {
        "zone": result.zone,
        "source": result.source,
        "stored": result.stored,
        "replaced": result.replaced,
        "from": format_timestamp(result.first_start),
        "to": format_timestamp(result.last_end),
        "resolutions": resolutions,
    }
    if as_json:
        _print_json(payload)
        return
    typer.echo(
        f"{result.zone}: stored {result.stored} prices ({', '.join(resolutions)}) "
        f"from {payload['from']} to {payload['to']}; replaced {result.replaced} stored before"
    )


def register(app: typer.Typer) -> None:
    """Add this area's commands to `app`."""
    app.add_typer(prices_app, name="prices")
