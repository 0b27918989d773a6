"""Alembic environment: runs migrations on the async engine of the configured database."""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection

from solarapi.config import Settings
from solarapi.db import backend_of, create_oneshot_engine
from solarapi.models import Base

target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=backend_of(connection.engine).batch_migrations,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_async() -> None:
    settings = context.config.attributes.get("settings") or Settings()
    engine = create_oneshot_engine(settings)
    async with engine.connect() as connection:
        await connection.run_sync(_run)
        await connection.commit()
    await engine.dispose()


def _run_offline() -> None:
    """`solarapi migrate --sql`: the statements as text, for the database's dialect."""
    settings = context.config.attributes.get("settings") or Settings()
    context.configure(
        url=settings.async_database_url,
        target_metadata=target_metadata,
        render_as_batch=settings.is_sqlite,
        literal_binds=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


connection = context.config.attributes.get("connection")
if context.is_offline_mode():
    _run_offline()
elif connection is not None:
    _run(connection)
else:
    asyncio.run(_run_async())
