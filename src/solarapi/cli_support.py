"""What every `solarapi` command shares: settings, one transaction, JSON output. The area
command modules (`*/cli.py`) and `cli.py` import these; `cli.py` imports the areas'."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson
import typer
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.config import Settings
from solarapi.db import create_oneshot_engine, dispose_engine, sessionmaker_for
from solarapi.errors import ApiError

T = TypeVar("T")


def load_settings() -> Settings:
    """The settings from the environment, or exit 2 saying what is invalid."""
    try:
        return Settings()
    except ValueError as exc:
        typer.echo(f"error: invalid settings: {exc}", err=True)
        raise typer.Exit(2) from None


def run_in_session(settings: Settings, work: Callable[[AsyncSession], Awaitable[T]]) -> T:
    """Run `work` in one transaction: committed if it returns, rolled back if it raises."""

    async def main() -> T:
        engine = create_oneshot_engine(settings)
        try:
            async with sessionmaker_for(engine)() as session, session.begin():
                return await work(session)
        finally:
            await dispose_engine(engine)

    try:
        return asyncio.run(main())
    except ApiError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(1) from None


def print_json(payload: Any) -> None:
    typer.echo(orjson.dumps(payload, option=orjson.OPT_INDENT_2).decode())
