"""`solarapi accounts set-password|disable|enable|delete`: the operator's account
administration (added to the `accounts` command group by `solarapi.cli`)."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from solarapi.admin.service import (
    delete_account,
    delete_report_files,
    disable_account,
    enable_account,
    set_password,
)
from solarapi.audit.service import Actor
from solarapi.cli_support import load_settings, print_json, run_in_session
from solarapi.kit.timefmt import utcnow
from solarapi.reports.storage import storage_for

ACCOUNT = Annotated[str, typer.Argument(help="Account id or a user's e-mail")]


def register(accounts: typer.Typer) -> None:
    accounts.command("set-password")(accounts_set_password)
    accounts.command("disable")(accounts_disable)
    accounts.command("enable")(accounts_enable)
    accounts.command("delete")(accounts_delete)


def accounts_set_password(
    email: Annotated[str, typer.Argument(help="The user's e-mail")],
    password: Annotated[
        str | None,
        typer.Option(
            prompt=True,
            hide_input=True,
            confirmation_prompt=True,
            help="New password (≥ 10 characters); asked for when not given, so it stays out "
            "of the shell's history",
        ),
    ] = None,  # not "[required]" in the help: the prompt asks for it
) -> None:
    """Set a user's dashboard password and end all their dashboard sessions."""
    assert password is not None  # given, or typed at the prompt (click asks when missing)
    changed = run_in_session(
        load_settings(),
        lambda s: set_password(
            s, email=email, password=password, actor=Actor.operator(), now=utcnow()
        ),
    )
    typer.echo(
        f"password of {changed.user.email} changed; {changed.sessions_ended} dashboard "
        "session(s) ended"
    )


def accounts_disable(account: ACCOUNT) -> None:
    """Disable an account: its keys are refused (401), its users cannot log in, its
    dashboard sessions end. Nothing is deleted."""
    state = run_in_session(
        load_settings(),
        lambda s: disable_account(s, email_or_id=account, actor=Actor.operator(), now=utcnow()),
    )
    if state.changed:
        typer.echo(
            f"{state.account.id} disabled; {state.sessions_ended} dashboard session(s) ended"
        )
    else:
        typer.echo(f"{state.account.id} was already disabled")


def accounts_enable(account: ACCOUNT) -> None:
    """Enable a disabled account again: its keys and log-ins work as before."""
    state = run_in_session(
        load_settings(),
        lambda s: enable_account(s, email_or_id=account, actor=Actor.operator(), now=utcnow()),
    )
    typer.echo(f"{state.account.id} {'enabled' if state.changed else 'was not disabled'}")


def accounts_delete(
    account: ACCOUNT,
    yes: Annotated[
        bool, typer.Option("--yes", help="Do not ask; for scripts (there is no undo)")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print what was deleted as JSON")] = False,
) -> None:
    """Erase an account and everything tied to it: users, sessions, keys, systems and their
    readings, declarations, reports (with their files), webhooks, events, queued jobs.
    There is no undo; take a backup first if in doubt."""
    settings = load_settings()
    if not yes:
        typer.confirm(f"Erase {account} and all its data? There is no undo", abort=True, err=True)
    erased = run_in_session(
        settings,
        lambda s: delete_account(s, email_or_id=account, actor=Actor.operator(), now=utcnow()),
    )
    failed = asyncio.run(delete_report_files(storage_for(settings), erased))
    if as_json:
        print_json(
            {
                "id": erased.account_id,
                "rows": erased.rows,
                "jobs": erased.jobs,
                "report_files": len(erased.report_files) - failed,
                "report_files_left": failed,
            }
        )
        return
    rows = ", ".join(f"{table} {count}" for table, count in sorted(erased.rows.items()))
    typer.echo(
        f"{erased.account_id} deleted ({rows}; jobs {erased.jobs}; report files "
        f"{len(erased.report_files) - failed})"
    )
    if failed:
        typer.echo(
            f"warning: {failed} report file(s) could not be deleted now; the reports "
            "clean-up removes them",
            err=True,
        )
