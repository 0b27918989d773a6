"""Operator commands of the performance area: `solarapi weather import FILE --system ID`."""

from __future__ import annotations

import asyncio
import importlib
from pathlib import Path
from typing import Annotated

import typer

from solarapi.cli_support import load_settings, print_json
from solarapi.config import Settings
from solarapi.db import create_oneshot_engine, dispose_engine, sessionmaker_for
from solarapi.kit.timefmt import utcnow
from solarapi.performance import upload
from solarapi.readings.upload import UploadResult
from solarapi.systems import repository as systems_repo

weather_app = typer.Typer(
    help="Satellite irradiance for the performance model.", no_args_is_help=True
)


class ImportFailed(Exception):
    """One line for the operator."""


async def import_cams(settings: Settings, system_id: str, path: Path) -> UploadResult:
    """Read, check and store a CAMS file as the system's `satellite` irradiance, all or
    nothing in one transaction."""
    # start-up: the CAMS reader is pvlib's (seconds to import, measured); only this command
    # needs it, so every other `solarapi` command starts without it.
    cams = importlib.import_module("solarapi.performance.cams")
    engine = create_oneshot_engine(settings)
    maker = sessionmaker_for(engine)
    try:
        async with maker() as session, session.begin():
            system = await systems_repo.get(session, system_id)
            if system is None:
                raise ImportFailed(f"no system with id '{system_id}'")
            if system.data_source == "simulated":
                raise ImportFailed(
                    f"system '{system_id}' is simulated: its irradiance is the sandbox model's own"
                )
            try:
                found = cams.satellite_irradiance(path, system.latitude, system.longitude, utcnow())
            except cams.CamsFileError as exc:
                raise ImportFailed(f"{path.name}: {exc}") from None
            if len(found) == 0:
                raise ImportFailed(f"{path.name}: the file holds no data rows")
            updated = await upload.store(
                session,
                system,
                "satellite",
                found.starts,
                {
                    "ghi_w_m2": found.ghi_w_m2,
                    "dni_w_m2": found.dni_w_m2,
                    "dhi_w_m2": found.dhi_w_m2,
                },
            )
    finally:
        await dispose_engine(engine)
    return UploadResult(len(found), len(found) - updated, updated)


@weather_app.command("import")
def import_command(
    file: Annotated[
        Path,
        typer.Argument(
            help="CAMS radiation-service CSV (Universal time, 15- or 1-minute steps)",
            exists=True,
            dir_okay=False,
            readable=True,
        ),
    ],
    system_id: Annotated[str, typer.Option("--system", help="sys_… id of a metered system")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON")] = False,
) -> None:
    """Import satellite irradiance (GHI/DNI/DHI) for a system; stored as its `satellite`
    source and used where no sensor irradiance was uploaded. All or nothing."""
    try:
        result = asyncio.run(import_cams(load_settings(), system_id, file))
    except ImportFailed as exc:
        typer.echo(f"error: {exc}; nothing was imported", err=True)
        raise typer.Exit(1) from None
    if as_json:
        print_json({"system_id": system_id, **result.to_api()})
    else:
        typer.echo(
            f"{result.received:,} quarter-hours of satellite irradiance imported into "
            f"{system_id}: {result.inserted:,} inserted, {result.updated:,} updated"
        )


def register(app: typer.Typer) -> None:
    """Add this area's commands to `app`."""
    app.add_typer(weather_app, name="weather")
