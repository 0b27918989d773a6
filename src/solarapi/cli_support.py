"""What every `solarapi` command shares: settings, one transaction, JSON output. The area
command modules (`*/cli.py`) and `cli.py` import these; `cli.py` imports the areas'."""

from __future__ import annotations

import asyncio
import platform
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar
from urllib.parse import urlsplit

import orjson
import typer
from pydantic import ValidationError
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.config import Settings
from solarapi.db import create_oneshot_engine, dispose_engine, schema_revision, sessionmaker_for
from solarapi.dbfaults import (
    SCHEMA_REVISION,
    is_database_unavailable,
    may_be_unmigrated,
    revision_is_current,
)
from solarapi.errors import ApiError
from solarapi.kit.tzdb import TZDATA_VERSION
from solarapi.kit.version import API_VERSION, package_version

T = TypeVar("T")


def load_settings() -> Settings:
    """The settings from the environment, or exit 2 saying what is invalid."""
    try:
        return Settings()
    except ValidationError as exc:
        typer.echo(f"error: invalid settings: {settings_problems(exc)}", err=True)
        raise typer.Exit(2) from None


def settings_problems(exc: ValidationError) -> str:
    """What is wrong, by variable, without the values: pydantic's own text quotes the input
    (`input_value=…`), which may be the secret or a URL with a password."""
    problems = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        message = str(error["msg"]).removeprefix("Value error, ")
        names = [str(part) for part in error["loc"]]
        where = f"SOLARAPI_{names[0].upper()}" if names else ""
        problems.append(f"{where}: {message}" if where else message)
    return "; ".join(problems)


def run_in_session(settings: Settings, work: Callable[[AsyncSession], Awaitable[T]]) -> T:
    """Run `work` in one transaction: committed if it returns, rolled back if it raises.

    The database is checked first: a missing SQLite file, an unreachable server or a schema
    this release cannot use ends the command with one line that says what to do, before
    anything is created (a mistyped data directory is not silently made)."""
    require_database(settings)

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
    except Exception as exc:
        if not (is_database_unavailable(exc) or may_be_unmigrated(exc)):
            raise
        typer.echo(f"error: {describe_failure(exc, settings.database_url)}", err=True)
        raise typer.Exit(1) from None


def redacted(url: str) -> str:
    """A database or Redis URL as it may be printed: without its password."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "(the configured URL)"


def sqlite_file(settings: Settings) -> Path | None:
    """The SQLite database's file; None for PostgreSQL or an in-memory database."""
    if not settings.is_sqlite:
        return None
    name = settings.async_database_url.database
    return None if not name or name == ":memory:" else Path(name)


def require_database(settings: Settings) -> None:
    """Exit with one line unless the database exists, answers and has this release's schema
    (or a newer one: migrations only add)."""
    path = sqlite_file(settings)
    if path is not None and not path.is_file():
        _fail(
            f"no database at {path}: run `solarapi migrate` to create it (or set "
            "SOLARAPI_DATA_DIR / SOLARAPI_DATABASE_URL to the one you meant)"
        )

    async def read() -> str | None:
        engine = create_oneshot_engine(settings)
        try:
            return await schema_revision(engine)
        finally:
            await dispose_engine(engine)

    try:
        revision = asyncio.run(read())
    except Exception as exc:
        if not is_database_unavailable(exc):
            raise
        _fail(describe_failure(exc, settings.database_url))
    where = redacted(settings.database_url)
    if revision is None:
        _fail(f"the database at {where} has no schema yet: run `solarapi migrate`")
    if not revision_is_current(revision):
        _fail(
            f"the database at {where} is at schema revision {revision}, this release needs "
            f"{SCHEMA_REVISION}: run `solarapi migrate`"
        )


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


_URL_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\s]*@")


def describe_failure(exc: BaseException, database_url: str | None) -> str:
    """One line for an exception that ended a command: what failed and what to do, never a
    traceback, never a password (URLs in the text are cut to their user and host)."""
    where = redacted(database_url) if database_url else "the database"
    if is_database_unavailable(exc):
        return f"cannot reach the database at {where}: {_root_cause(exc)}"
    if may_be_unmigrated(exc):
        return (
            f"the database at {where} lacks a table or column this release uses: run "
            "`solarapi migrate`"
        )
    return f"unexpected {type(exc).__name__}: {_root_cause(exc)}"


def _root_cause(exc: BaseException) -> str:
    while exc.__cause__ is not None and exc.__cause__ is not exc:
        exc = exc.__cause__
    orig = getattr(exc, "orig", None)
    if isinstance(orig, BaseException):
        exc = orig
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return _URL_PASSWORD.sub(r"\1***@", text)[:300]


def print_json(payload: Any) -> None:
    typer.echo(orjson.dumps(payload, option=orjson.OPT_INDENT_2).decode())


def startup_summary(settings: Settings, role: str, **extra: object) -> dict[str, object]:
    """The effective configuration a process starts with, for its first log line: what an
    operator checks first when something is off. Never a secret or a password."""
    database = settings.async_database_url
    redis = urlsplit(settings.redis_url) if settings.redis_url else None
    return {
        "role": role,
        "version": package_version(),
        "api_version": API_VERSION,
        "tzdata": TZDATA_VERSION,  # the IANA release, as /health reports it
        "python": platform.python_version(),
        "database": {
            "kind": "sqlite" if settings.is_sqlite else "postgresql",
            "host": database.host,
            "port": database.port,
            "name": database.database,
            "pool_size": settings.db_pool_size,
        },
        "redis": None
        if redis is None
        else {
            "host": redis.hostname or redis.path,
            "port": redis.port,
            "db": redis.path.lstrip("/") if redis.hostname else None,
        },
        "job_runner": settings.job_runner,
        "reports": settings.reports_url or str(settings.effective_reports_dir),
        "trusted_proxies": len(settings.trusted_proxies),
        "metrics_port": settings.metrics_port,
        "warm_start": settings.warm_start,
        "secret": "file"
        if settings.secret_key_file
        else ("set" if settings.secret_key else "embedded"),
        **extra,
    }
