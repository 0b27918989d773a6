"""Operator commands of the declarations area, registered on the `solarapi` command."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this area's commands to `app`."""
    return None
