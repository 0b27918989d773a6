"""`solarapi audit list`: the audit trail, newest first."""

from __future__ import annotations

from typing import Annotated

import typer
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.accounts.service import find_account
from solarapi.audit.service import AuditEntry, list_audit
from solarapi.cli_support import load_settings, print_json, run_in_session
from solarapi.kit.timefmt import format_timestamp

audit_app = typer.Typer(help="The audit trail of security-relevant actions.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(audit_app, name="audit")


@audit_app.command("list")
def audit_list(
    account: Annotated[
        str | None, typer.Option(help="Only this account (id or a user's e-mail)")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=100_000, help="At most this many")] = 100,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON array")] = False,
) -> None:
    """Key and token creation and revocation, plan and password changes, log-ins and failed
    log-ins, account creation, disabling and deletion: who, what, when, from where."""

    async def work(session: AsyncSession) -> list[AuditEntry]:
        account_id = None
        if account is not None:
            # A deleted account has no row to find by: its id is taken as given.
            account_id = (
                account
                if account.startswith("acct_")
                else (await find_account(session, account)).id
            )
        return await list_audit(session, account_id=account_id, limit=limit)

    entries = run_in_session(load_settings(), work)
    if as_json:
        print_json([entry.to_json() for entry in entries])
        return
    for entry in entries:
        details = " ".join(f"{key}={value}" for key, value in sorted(entry.details.items()))
        typer.echo(
            f"{format_timestamp(entry.occurred_at)}  {entry.action:<22} {entry.actor:<32} "
            f"{entry.account_id or '-':<31} {entry.subject or '-'}  {entry.ip or '-'}"
            + (f"  {details}" if details else "")
        )
