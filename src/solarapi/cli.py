"""`solarapi`: the operator command line. Thin: parses arguments, calls services."""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.accounts.repository import list_accounts
from solarapi.accounts.service import create_account, find_account
from solarapi.admin.cli import register as admin_commands
from solarapi.admin.service import change_plan, issue_key, withdraw_key
from solarapi.audit.cli import register as audit_commands
from solarapi.audit.service import Actor
from solarapi.auth.repository import list_keys
from solarapi.cli_support import (
    describe_failure,
    load_settings,
    print_json,
    redacted,
    run_in_session,
    sqlite_file,
    startup_summary,
)
from solarapi.config import Settings
from solarapi.declarations.cli import register as declarations_commands
from solarapi.jobs.cli import register as jobs_commands
from solarapi.jobs.repository import queue_stats
from solarapi.kit.plans import Environment, Plan
from solarapi.kit.timefmt import format_optional, format_timestamp, utcnow
from solarapi.kit.version import API_VERSION, package_version
from solarapi.logs import configure_logging
from solarapi.metrics import prepare_multiprocess_dir
from solarapi.performance.cli import register as weather_commands
from solarapi.prices.cli import register as prices_commands
from solarapi.readings.cli import register as readings_commands
from solarapi.systems.cli import register as systems_commands

app = typer.Typer(
    help="Solar Energy Platform API: operator commands.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
accounts_app = typer.Typer(help="Accounts and their plans.", no_args_is_help=True)
keys_app = typer.Typer(help="API keys (a new key is printed once).", no_args_is_help=True)
app.add_typer(accounts_app, name="accounts")
app.add_typer(keys_app, name="keys")


@app.command()
def migrate(
    check: Annotated[
        bool,
        typer.Option(
            "--check", help="Change nothing; exit 1 when migrations are pending, 0 when none"
        ),
    ] = False,
    sql: Annotated[
        bool,
        typer.Option("--sql", help="Change nothing; print the SQL the pending migrations run"),
    ] = False,
) -> None:
    """Create or upgrade the database schema to the latest revision."""
    # start-up: Alembic adds ~0.3 s to every other command; only this one needs it.
    from alembic.util import CommandError

    from solarapi.migrate import (
        current_revision,
        head_revision,
        is_known,
        pending_revisions,
        upgrade,
        upgrade_sql,
    )

    settings = load_settings()
    where = redacted(settings.database_url)
    path = sqlite_file(settings)
    exists = path is None or path.is_file()
    try:
        before = current_revision(settings) if exists else None
    except Exception as exc:
        typer.echo(f"error: {describe_failure(exc, settings.database_url)}", err=True)
        raise typer.Exit(1) from None
    if before is not None and not is_known(before):
        typer.echo(
            f"error: the database at {where} is at schema revision {before}, which this "
            f"release (up to {head_revision()}) does not know: a newer release migrated it; "
            "run that release's `solarapi migrate` and serve with it",
            err=True,
        )
        raise typer.Exit(1)
    if check or sql:
        pending = pending_revisions(before)
        if sql and pending:
            try:
                typer.echo(upgrade_sql(settings, before), nl=False)
            except CommandError:
                # A migration that rebuilds a table (SQLite's batch mode) must read the live
                # table first: Alembic cannot print it without running it.
                typer.echo(
                    "error: a pending migration rebuilds a table, which SQLite's batch mode "
                    "cannot print without running it; --sql works on PostgreSQL (on SQLite, "
                    "back up the file and run `solarapi migrate`)",
                    err=True,
                )
                raise typer.Exit(1) from None
        if sql and not pending and not check:
            # stdout stays empty (it is the SQL); say why on stderr, as --check would.
            typer.echo(
                f"no migration pending for {where} (revision {before}): no SQL to print", err=True
            )
        if check:
            state = "no database yet" if not exists else f"at {before or 'no schema'}"
            if pending:
                typer.echo(
                    f"{len(pending)} migration(s) pending for {where} ({state}): "
                    f"{', '.join(pending)}; run `solarapi migrate`",
                    err=True,
                )
                raise typer.Exit(1)
            typer.echo(f"the schema in {where} is up to date (revision {before})", err=True)
        return
    migration = upgrade(settings)
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


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    workers: Annotated[int, typer.Option(min=1, help="Worker processes")] = 1,
) -> None:
    """Serve the API and the dashboard."""
    # start-up: uvicorn with uvloop and httptools adds ~0.15 s; only this command needs it.
    import uvicorn

    from solarapi.server import BoundedHttpToolsProtocol  # start-up: imports uvicorn (above)

    settings = load_settings()
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
    if workers > 1:
        _light_children()
    startup = logging.getLogger("solarapi.startup")
    startup.info(
        "starting",
        extra={"config": startup_summary(settings, "api", host=host, port=port, workers=workers)},
    )
    if settings.redis_url:
        _warn_if_redis_is_unreachable(settings.redis_url, startup)
    if settings.metrics_port is not None:
        _serve_metrics(settings)
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
        # With --workers N the supervisor pings each child and kills one that does not answer
        # in time; a child answers from a thread it starts only once its interpreter has
        # booted and imported uvicorn, which on a busy host took longer than uvicorn's 5 s.
        timeout_worker_healthcheck=settings.worker_healthcheck_seconds,
    )


def _light_children() -> None:
    """Keep each spawned worker from re-running the `solarapi` script before it can answer.

    multiprocessing's spawn re-imports the parent's main module in every child before the
    child runs anything; run as the `solarapi` console script, that is `solarapi.cli` with
    every area (~2 s of CPU, 11 s of wall time on a host at load 20) — all before uvicorn's
    health-check thread starts in the child, so the supervisor killed children that were
    only starting. A main module known by the name `solarapi.__main__` (as under
    `python -m solarapi`) is not re-imported (spawn skips `*.__main__` modules): the child
    imports only what the server needs, and answers pings while it loads the app."""
    main_module = sys.modules["__main__"]
    if getattr(main_module, "__spec__", None) is None:
        main_module.__spec__ = importlib.util.find_spec("solarapi.__main__")


def _warn_if_redis_is_unreachable(url: str, log: logging.Logger) -> None:
    """A mistyped or down Redis is said at start, not found in a dashboard later. The server
    starts anyway: the limiter fails open (per-process counters) until Redis answers."""
    # start-up: redis-py adds ~0.1 s; only `serve` with Redis needs it.
    from solarapi.ratelimit.redis import probe

    reason = asyncio.run(probe(url))
    if reason is not None:
        log.warning(
            "redis unreachable at %s (%s): rate limits fall back to per-process counters "
            "until it answers; /health reports degraded",
            redacted(url),
            reason,
        )


def _serve_metrics(settings: Settings) -> None:
    """Start the operator metrics endpoint in this (the supervising) process, before the
    workers start: they inherit `PROMETHEUS_MULTIPROC_DIR` and write their values there."""
    directory = prepare_multiprocess_dir()
    # start-up: prometheus_client costs ~90 ms (-X importtime) and reads
    # PROMETHEUS_MULTIPROC_DIR once, at import: only here, after the directory is set.
    from solarapi.events.types import DELIVERY_JOB_KIND
    from solarapi.metrics.exposition import start_metrics_server
    from solarapi.reports.service import JOB_KIND as REPORT_JOB_KIND

    try:
        start_metrics_server(
            settings, directory, queue_stats, lambda: (REPORT_JOB_KIND, DELIVERY_JOB_KIND)
        )
    except OSError as exc:
        typer.echo(
            f"error: cannot serve metrics on {settings.metrics_host}:{settings.metrics_port}: "
            f"{exc.strerror or exc}",
            err=True,
        )
        raise typer.Exit(2) from None
    typer.echo(
        f"metrics on http://{settings.metrics_host}:{settings.metrics_port}/metrics", err=True
    )


@app.command()
def openapi() -> None:
    """Print the OpenAPI 3.1 document."""
    # start-up: the whole app (every router, the dashboard) adds ~0.8 s.
    from solarapi.app import create_app
    from solarapi.openapi import build_openapi  # start-up: with the app, above

    # The document does not depend on the database: a scratch one (never opened) keeps this
    # command from creating the data directory.
    with tempfile.TemporaryDirectory(prefix="solarapi-openapi-") as scratch:
        settings = load_settings().model_copy(
            update={"data_dir": Path(scratch), "database_url": f"sqlite:///{scratch}/unused.db"}
        )
        print_json(build_openapi(create_app(settings)))


@app.command()
def demo(
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
    no_data: Annotated[bool, typer.Option("--no-data", help="Accounts and keys only")] = False,
    not_production: Annotated[
        bool,
        typer.Option(
            "--yes-this-is-not-production",
            help="Allow a database other than the embedded SQLite (the demo accounts have a "
            "published password)",
        ),
    ] = False,
) -> None:
    """Create (idempotently) one demo account per plan, each with a live and a test key."""
    settings = load_settings()
    if not settings.is_sqlite and not not_production:
        typer.echo(
            f"error: refusing to create demo accounts (published password) in "
            f"{redacted(settings.database_url)}: demo data is for the embedded SQLite "
            "database; add --yes-this-is-not-production if this database is not production",
            err=True,
        )
        raise typer.Exit(2)
    # start-up: the demo data's simulator (pvlib, pandas) adds ~0.4 s.
    from solarapi.demo import DEMO_PASSWORD, demo_data_summary, ensure_demo_accounts

    # The secret is read (or, embedded, made) inside: only once the database is known to be
    # there, so a mistyped data directory is not created with a secret in it.
    accounts = run_in_session(
        settings,
        lambda s: ensure_demo_accounts(
            s, settings.effective_secret_key, utcnow(), with_data=not no_data
        ),
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
        print_json(payload)
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

    settings = load_settings()
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
        print_json(payload)
    else:
        typer.echo(f"created {payload['id']} ({payload['email']}, {payload['plan']})")


@accounts_app.command("list")
def accounts_list(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List accounts."""

    rows = run_in_session(load_settings(), list_accounts)
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
        print_json(payload)
        return
    for item in payload:
        typer.echo(f"{item['id']}  {item['plan']:<10}  {item['email']}  {item['name']}")


@accounts_app.command("set-plan")
def accounts_set_plan(
    account: Annotated[str, typer.Argument(help="Account id or user e-mail")],
    plan: Annotated[Plan, typer.Argument(help="New plan")],
) -> None:
    """Change an account's plan; applies to its existing keys at once."""

    updated = run_in_session(
        load_settings(),
        lambda s: change_plan(
            s, email_or_id=account, plan=plan, actor=Actor.operator(), now=utcnow()
        ),
    )
    typer.echo(f"{updated.id} is now on the {updated.plan} plan")


@keys_app.command("create")
def keys_create(
    account: Annotated[str, typer.Option(help="Account id or user e-mail")],
    env: Annotated[Environment, typer.Option(help="live or test")] = Environment.LIVE,
    name: Annotated[str, typer.Option(help="A name to recognise the key by")] = "CLI key",
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Create a key and print it once. Store it now: it cannot be shown again."""

    settings = load_settings()

    async def work(session: AsyncSession) -> dict[str, Any]:
        found, record, new = await issue_key(
            session,
            email_or_id=account,
            name=name,
            environment=env,
            secret=settings.effective_secret_key,
            actor=Actor.operator(),
            now=utcnow(),
        )
        return {
            "id": record.id,
            "key": new.key,
            "environment": record.environment,
            "name": record.name,
            "display": record.display,
            "account_id": found.id,
            "created_at": format_timestamp(record.created_at),
            "plan": found.plan,
        }

    payload = run_in_session(settings, work)
    plan = payload.pop("plan")
    if as_json:
        print_json(payload)
    else:
        typer.echo(payload["key"])
        typer.echo(f"({payload['id']}; this is the only time the key is shown)", err=True)
    if plan == Plan.STARTER:
        # An operator may prepare a key before an upgrade; the account holder cannot (the
        # dashboard refuses). Said, so that the key's 403s are no surprise.
        typer.echo(
            f"note: {account} is on the Starter plan, which has no API access: every request "
            "with this key is a 403 until the account moves to Pro or Enterprise "
            f"(solarapi accounts set-plan {account} pro)",
            err=True,
        )


@keys_app.command("list")
def keys_list(
    account: Annotated[str, typer.Option(help="Account id or user e-mail")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """List an account's keys (display form only)."""

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

    payload = run_in_session(load_settings(), work)
    if as_json:
        print_json(payload)
        return
    for k in payload:
        status = "revoked" if k["revoked_at"] else "active"
        typer.echo(f"{k['id']}  {k['environment']}  {k['display']}  {status:<8} {k['name']}")


@keys_app.command("revoke")
def keys_revoke(key_id: Annotated[str, typer.Argument(help="key_… id")]) -> None:
    """Revoke a key; it is refused from the next request on."""

    run_in_session(
        load_settings(),
        lambda s: withdraw_key(s, key_id=key_id, actor=Actor.operator(), now=utcnow()),
    )
    typer.echo(f"{key_id} revoked")


for register in (
    readings_commands,
    prices_commands,
    declarations_commands,
    jobs_commands,
    weather_commands,
    audit_commands,
    systems_commands,
):
    register(app)
admin_commands(accounts_app)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"solarapi {package_version()} (API {API_VERSION})")
        raise typer.Exit


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit"
        ),
    ] = False,
) -> None:
    """Solar Energy Platform API: operator commands."""


def main() -> None:
    os.environ.setdefault("PYTHONUTF8", "1")
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:
        # What a command did not turn into its own message: still one line, never a
        # traceback (SOLARAPI_TRACEBACK=1 shows it, for a bug report).
        if os.environ.get("SOLARAPI_TRACEBACK") == "1":
            raise
        database_url = os.environ.get("SOLARAPI_DATABASE_URL") or None
        typer.echo(f"error: {describe_failure(exc, database_url)}", err=True)
        sys.exit(1)
