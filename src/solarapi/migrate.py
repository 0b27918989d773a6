"""Running the Alembic migrations programmatically (`solarapi migrate`, tests, `make run`)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
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


def alembic_config(settings: Settings) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
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


def upgrade(settings: Settings, revision: str = "head") -> Migration:
    before = current_revision(settings)
    command.upgrade(alembic_config(settings), revision)
    return Migration(before=before, after=current_revision(settings))


def downgrade(settings: Settings, revision: str) -> None:
    command.downgrade(alembic_config(settings), revision)
