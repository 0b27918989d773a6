"""Operator commands of the declarations area, registered on the `solarapi` command.

In the live environment the issuing body's answer reaches the service through the operator:
`solarapi declarations decide ID --approve|--reject --reason TEXT`.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.cli_support import load_settings, print_json, run_in_session
from solarapi.declarations.service import decide_as_operator, pending_declarations
from solarapi.kit.plans import Environment
from solarapi.kit.timefmt import utcnow

declarations_app = typer.Typer(
    help="Declarations: enter the issuing body's decisions.", no_args_is_help=True
)


def register(app: typer.Typer) -> None:
    """Add this area's commands to `app`."""
    app.add_typer(declarations_app, name="declarations")


@declarations_app.command("decide")
def decide(
    declaration_id: Annotated[str, typer.Argument(help="dcl_… id of a submitted declaration")],
    approve: Annotated[bool, typer.Option("--approve", help="Approve it")] = False,
    reject: Annotated[bool, typer.Option("--reject", help="Reject it (needs --reason)")] = False,
    reason: Annotated[
        str | None, typer.Option(help="Shown to the customer as status_reason")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the declaration")] = False,
) -> None:
    """Record the issuing body's decision on a submitted declaration."""

    if approve == reject:
        typer.echo("error: give exactly one of --approve or --reject", err=True)
        raise typer.Exit(2)
    if reject and not (reason and reason.strip()):
        typer.echo("error: --reject needs --reason TEXT (it is shown to the customer)", err=True)
        raise typer.Exit(2)

    async def work(session: AsyncSession) -> dict[str, Any]:
        declaration = await decide_as_operator(
            session, declaration_id, approve=approve, reason=reason, now=utcnow()
        )
        return declaration.render()

    payload = run_in_session(load_settings(), work)
    if as_json:
        print_json(payload)
        return
    certificates = payload["certificates"]
    extra = f", {certificates} guarantees of origin" if certificates is not None else ""
    typer.echo(f"{payload['id']} is now {payload['status']}{extra}")


@declarations_app.command("pending")
def pending(
    env: Annotated[Environment, typer.Option(help="live or test")] = Environment.LIVE,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 100,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """List submitted declarations awaiting a decision, oldest first."""

    async def work(session: AsyncSession) -> list[dict[str, Any]]:
        rows = await pending_declarations(session, env, limit)
        return [{**d.render(), "account_id": d.account_id} for d in rows]

    payload = run_in_session(load_settings(), work)
    if as_json:
        print_json(payload)
        return
    for item in payload:
        typer.echo(
            f"{item['id']}  {item['type']:<20} {item['period_start']}..{item['period_end']}  "
            f"{item['energy_wh']:>14.3f} Wh  coverage {item['coverage']:.3f}  "
            f"submitted {item['submitted_at']}  {item['account_id']}"
        )
