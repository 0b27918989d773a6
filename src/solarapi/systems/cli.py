"""`solarapi systems create|list --account EMAIL`: an operator sets up a customer's systems."""

from __future__ import annotations

from typing import Annotated

import typer
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.accounts.service import find_account
from solarapi.auth.principal import Caller
from solarapi.cli_support import load_settings, print_json, run_in_session
from solarapi.errors import describe_validation_errors
from solarapi.kit.plans import Environment
from solarapi.kit.timefmt import utcnow
from solarapi.systems import repository
from solarapi.systems.schemas import SystemCreate
from solarapi.systems.service import create_system
from solarapi.systems.views import SystemView

systems_app = typer.Typer(help="Systems of an account.", no_args_is_help=True)
ACCOUNT = Annotated[str, typer.Option("--account", help="Account id or a user's e-mail")]
ENV = Annotated[Environment, typer.Option("--env", help="live or test (the sandbox)")]


def register(app: typer.Typer) -> None:
    app.add_typer(systems_app, name="systems")


@systems_app.command("create")
def systems_create(
    account: ACCOUNT,
    name: Annotated[str, typer.Option(help="System name")],
    capacity_kwp: Annotated[float, typer.Option("--capacity-kwp", help="DC capacity, kWp")],
    latitude: Annotated[float, typer.Option(help="Degrees north")],
    longitude: Annotated[float, typer.Option(help="Degrees east")],
    timezone: Annotated[str, typer.Option(help="IANA time zone, e.g. Europe/Amsterdam")],
    market_zone: Annotated[str | None, typer.Option("--market-zone", help="e.g. NL")] = None,
    env: ENV = Environment.LIVE,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Create a system with the same validation as `POST /api/v1/systems`."""
    try:
        body = SystemCreate.model_validate(
            {
                "name": name,
                "capacity_kwp": capacity_kwp,
                "location": {"latitude": latitude, "longitude": longitude, "timezone": timezone},
                "market_zone": market_zone,
            }
        )
    except ValidationError as exc:
        # The API's message for the same body (`POST /api/v1/systems`).
        typer.echo(f"error: {describe_validation_errors(exc.errors())}", err=True)
        raise typer.Exit(1) from None

    async def work(session: AsyncSession) -> SystemView:
        found = await find_account(session, account)
        return await create_system(session, Caller(found.id, env), body, utcnow())

    created = run_in_session(load_settings(), work)
    if as_json:
        print_json(created.render())
    else:
        typer.echo(f"created {created.id} ({created.name}, {created.environment})")


@systems_app.command("list")
def systems_list(
    account: ACCOUNT,
    env: ENV = Environment.LIVE,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """An account's systems in one environment, oldest first."""

    async def work(session: AsyncSession) -> list[SystemView]:
        found = await find_account(session, account)
        return [
            SystemView.of(system)
            for system in await repository.list_for_account(session, found.id, env)
        ]

    systems = run_in_session(load_settings(), work)
    if as_json:
        print_json([system.render() for system in systems])
        return
    for system in systems:
        typer.echo(f"{system.id}  {system.capacity_kwp:>9} kWp  {system.status:<10} {system.name}")
