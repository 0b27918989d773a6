"""Running the Alembic migrations programmatically (`solarapi migrate`, tests, `make run`)."""

from __future__ import annotations

import asyncio
import io
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.script.revision import ResolutionError
from alembic.util import CommandError
from sqlalchemy.engine import Connection

from solarapi.config import Settings
from solarapi.db import create_oneshot_engine

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


@dataclass(frozen=True)
class Migration:
    """What an upgrade did: the revision before (None: the database had no schema) and after."""

    before: str | None
    after: str | None

    @property
    def created(self) -> bool:
        return self.before is None and self.after is not None

    @property
    def changed(self) -> bool:
        return self.before != self.after


def alembic_config(settings: Settings | None, output_buffer: TextIO | None = None) -> Config:
    config = Config(output_buffer=output_buffer)
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if settings is not None:
        config.attributes["settings"] = settings
    return config


def _revision_of(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


def current_revision(settings: Settings) -> str | None:
    """The database's schema revision; None when it has none (a new database)."""

    async def read() -> str | None:
        engine = create_oneshot_engine(settings)
        try:
            async with engine.connect() as connection:
                return await connection.run_sync(_revision_of)
        finally:
            await engine.dispose()

    return asyncio.run(read())


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config(None)).get_current_head()
    assert head is not None
    return head


def is_known(revision: str) -> bool:
    """Whether this release has `revision` (a database migrated by a newer release is at one
    it does not know)."""
    try:
        return ScriptDirectory.from_config(alembic_config(None)).get_revision(revision) is not None
    except (ResolutionError, CommandError):
        return False


def pending_revisions(current: str | None) -> list[str]:
    """The revisions an upgrade from `current` (None: an empty database) would apply, oldest
    first."""
    script = ScriptDirectory.from_config(alembic_config(None))
    return [
        step.revision
        for step in reversed(list(script.iterate_revisions("head", current or "base")))
    ]


def upgrade_sql(settings: Settings, current: str | None) -> str:
    """The SQL an upgrade from `current` to the head would run, without running it (Alembic's
    offline mode), for a reviewer or a DBA who applies it by hand."""
    buffer = io.StringIO()
    config = alembic_config(settings, output_buffer=buffer)
    command.upgrade(config, f"{current}:head" if current else "head", sql=True)
    return buffer.getvalue()


def upgrade(settings: Settings, revision: str = "head") -> Migration:
    before = current_revision(settings)
    command.upgrade(alembic_config(settings), revision)
    return Migration(before=before, after=current_revision(settings))


def downgrade(settings: Settings, revision: str) -> None:
    command.downgrade(alembic_config(settings), revision)
