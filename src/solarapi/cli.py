"""`solarapi`: the operator command line. Thin: parses arguments, calls services."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

import orjson
import typer
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.config import Settings
from solarapi.errors import ApiError
from solarapi.kit.plans import Environment, Plan
from solarapi.kit.timefmt import format_optional, format_timestamp, utcnow

app = typer.Typer(
    help="Solar Energy Platform API: operator commands.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
accounts_app = typer.Typer(help="Accounts and their plans.", no_args_is_help=True)
keys_app = typer.Typer(help="API keys (a new key is printed once).", no_args_is_help=True)
app.add_typer(accounts_app, name="accounts")
app.add_typer(keys_app, name="keys")

T = TypeVar("T")


def _settings() -> Settings:
    try:
        return Settings()
    except ValueError as exc:
        typer.echo(f"error: invalid settings: {exc}", err=True)
        raise typer.Exit(2) from None


def run_in_session(settings: Settings, work: Callable[[AsyncSession], Awaitable[T]]) -> T:
    """Run `work` in one transaction: committed if it returns, rolled back if it raises."""
    from solarapi.db import create_oneshot_engine, dispose_engine, sessionmaker_for

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


def _print_json(payload: Any) -> None:
    typer.echo(orjson.dumps(payload, option=orjson.OPT_INDENT_2).decode())


@app.command()
def migrate() -> None:
    """Create or upgrade the database schema to the latest revision."""
    from solarapi.migrate import upgrade

    settings = _settings()
    migration = upgrade(settings)
    where = _redacted(settings.database_url)
    if migration.created:
        typer.echo(f"created the schema in {where} (revision {migration.after})", err=True)
    elif migration.changed:
        typer.echo(
            f"upgraded the schema in {where} from revision {migration.before} to {migration.after}",
            err=True,
        )
    else:
        typer.echo(
            f"the schema in {where} is already up to date (revision {migration.after})", err=True
        )


def _redacted(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    workers: Annotated[int, typer.Option(min=1, help="Worker processes")] = 1,
) -> None:
    """Serve the API and the dashboard."""
    # Deferred: uvicorn and its protocols are only needed here, not by the other commands.
    import uvicorn

    from solarapi.logs import configure_logging
    from solarapi.server import BoundedHttpToolsProtocol

    settings = _settings()
    if workers > 1 and not settings.redis_url:
        typer.echo(
            "error: --workers > 1 needs SOLARAPI_REDIS_URL: in-memory rate limits would be "
            "counted per worker, multiplying every plan's limit",
            err=True,
        )
        raise typer.Exit(2)
    if workers > 1 and settings.is_sqlite:
        typer.echo(
            "note: several workers on SQLite serialize their writes; use PostgreSQL to scale",
            err=True,
        )
    settings.effective_secret_key  # noqa: B018 - create the embedded secret before workers fork
    configure_logging(settings.log_level)
    uvicorn.run(
        "solarapi.app:serve_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        loop="uvloop",
        http=BoundedHttpToolsProtocol,
        timeout_keep_alive=settings.keep_alive_seconds,
        limit_concurrency=settings.max_connections,
        log_config=None,
        access_log=False,
        proxy_headers=False,
        server_header=False,
        timeout_graceful_shutdown=20,
    )


@app.command()
def openapi() -> None:
    """Print the OpenAPI 3.1 document."""
    from solarapi.app import create_app
    from solarapi.openapi import build_openapi

    _print_json(build_openapi(create_app(_settings())))


@app.command()
def demo(
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
    no_data: Annotated[bool, typer.Option("--no-data", help="Accounts and keys only")] = False,
) -> None:
    """Create (idempotently) one demo account per plan, each with a live and a test key."""
    from solarapi.demo import DEMO_PASSWORD, demo_data_summary, ensure_demo_accounts

    settings = _settings()
    secret = settings.effective_secret_key
    accounts = run_in_session(
        settings, lambda s: ensure_demo_accounts(s, secret, utcnow(), with_data=not no_data)
    )
    payload: dict[str, object] = {
        "password": DEMO_PASSWORD,
        "accounts": [
            {
                "id": a.account_id,
                "name": a.name,
                "email": a.email,
                "plan": a.plan.value,
                "keys": {env.value: key for env, key in a.keys.items()},
            }
            for a in accounts
        ],
    }
    data = None if no_data else demo_data_summary()
    if data is not None:
        payload["data"] = data.to_json()
    if as_json:
        _print_json(payload)
        return
    typer.echo(f"Demo accounts (dashboard login: e-mail below, password '{DEMO_PASSWORD}'):")
    for a in accounts:
        typer.echo(f"  {a.plan.value:<10} {a.email}")
        for env, key in a.keys.items():
            typer.echo(f"      {env.value}: {key}")
    if data is not None:
        typer.echo(f"Demo data (live): {', '.join(data.systems)} with {data.readings}.")
        typer.echo(
            f"Day-ahead prices for {', '.join(data.price_zones)} (source "
            f"'{data.price_source}'): {data.price_origin}."
        )


@accounts_app.command("create")
def accounts_create(
    name: Annotated[str, typer.Option(help="Account name")],
    email: Annotated[str, typer.Option(help="E-mail of the first user")],
    password: Annotated[str, typer.Option(help="Dashboard password (≥ 10 characters)")],
    plan: Annotated[Plan, typer.Option(help="Plan")] = Plan.STARTER,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Create an account with its first dashboard user."""
    from solarapi.accounts.service import create_account

    settings = _settings()
    created = run_in_session(
        settings,
        lambda s: create_account(
            s, name=name, email=email, password=password, plan=plan, now=utcnow()
        ),
    )
    payload = {
        "id": created.account.id,
        "name": created.account.name,
        "email": created.user.email,
        "plan": created.account.plan,
        "created_at": format_timestamp(created.account.created_at),
    }
    if as_json:
        _print_json(payload)
    else:
        typer.echo(f"created {payload['id']} ({payload['email']}, {payload['plan']})")


@accounts_app.command("list")
def accounts_list(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List accounts."""
    from solarapi.accounts.repository import list_accounts

    rows = run_in_session(_settings(), list_accounts)
    payload = [
        {
            "id": a.id,
            "name": a.name,
            "email": email,
            "plan": a.plan,
            "created_at": format_timestamp(a.created_at),
        }
        for a, email in rows
    ]
    if as_json:
        _print_json(payload)
        return
    for item in payload:
        typer.echo(f"{item['id']}  {item['plan']:<10}  {item['email']}  {item['name']}")


@accounts_app.command("set-plan")
def accounts_set_plan(
    account: Annotated[str, typer.Argument(help="Account id or user e-mail")],
    plan: Annotated[Plan, typer.Argument(help="New plan")],
) -> None:
    """Change an account's plan; applies to its existing keys at once."""
    from solarapi.accounts.service import set_plan

    updated = run_in_session(_settings(), lambda s: set_plan(s, email_or_id=account, plan=plan))
    typer.echo(f"{updated.id} is now on the {updated.plan} plan")


@keys_app.command("create")
def keys_create(
    account: Annotated[str, typer.Option(help="Account id or user e-mail")],
    env: Annotated[Environment, typer.Option(help="live or test")] = Environment.LIVE,
    name: Annotated[str, typer.Option(help="A name to recognise the key by")] = "CLI key",
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Create a key and print it once. Store it now: it cannot be shown again."""
    from solarapi.accounts.service import find_account
    from solarapi.auth.service import create_key

    settings = _settings()
    secret = settings.effective_secret_key

    async def work(session: AsyncSession) -> dict[str, Any]:
        found = await find_account(session, account)
        record, new = await create_key(
            session, account_id=found.id, name=name, environment=env, secret=secret, now=utcnow()
        )
        return {
            "id": record.id,
            "key": new.key,
            "environment": record.environment,
            "name": record.name,
            "display": record.display,
            "account_id": found.id,
            "created_at": format_timestamp(record.created_at),
        }

    payload = run_in_session(settings, work)
    if as_json:
        _print_json(payload)
    else:
        typer.echo(payload["key"])
        typer.echo(f"({payload['id']}; this is the only time the key is shown)", err=True)


@keys_app.command("list")
def keys_list(
    account: Annotated[str, typer.Option(help="Account id or user e-mail")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """List an account's keys (display form only)."""
    from solarapi.accounts.service import find_account
    from solarapi.auth.repository import list_keys

    async def work(session: AsyncSession) -> list[dict[str, Any]]:
        found = await find_account(session, account)
        return [
            {
                "id": k.id,
                "name": k.name,
                "environment": k.environment,
                "display": k.display,
                "created_at": format_timestamp(k.created_at),
                "last_used_at": format_optional(k.last_used_at),
                "revoked_at": format_optional(k.revoked_at),
            }
            for k in await list_keys(session, found.id)
        ]

    payload = run_in_session(_settings(), work)
    if as_json:
        _print_json(payload)
        return
    for k in payload:
        status = "revoked" if k["revoked_at"] else "active"
        typer.echo(f"{k['id']}  {k['environment']}  {k['display']}  {status:<8} {k['name']}")


@keys_app.command("revoke")
def keys_revoke(key_id: Annotated[str, typer.Argument(help="key_… id")]) -> None:
    """Revoke a key; it is refused from the next request on."""
    from solarapi.auth.service import revoke_key

    run_in_session(_settings(), lambda s: revoke_key(s, key_id=key_id, now=utcnow()))
    typer.echo(f"{key_id} revoked")


def _register_area_commands() -> None:
    from solarapi.declarations.cli import register as declarations_commands
    from solarapi.jobs.cli import register as jobs_commands
    from solarapi.prices.cli import register as prices_commands
    from solarapi.readings.cli import register as readings_commands

    for register in (readings_commands, prices_commands, declarations_commands, jobs_commands):
        register(app)


_register_area_commands()


def main() -> None:
    os.environ.setdefault("PYTHONUTF8", "1")
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
