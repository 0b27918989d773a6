"""Is the database usable? Faults that make it an outage (answered 503 `unavailable` with
Retry-After, and reported by /health) rather than a bug (500), decided by the driver's
exception class and SQLSTATE or SQLite result code, never by message text:

- any failure to open a connection (refused, timed out, the database dropped or renamed,
  not accepting connections, shutting down, out of connection slots, bad credentials);
- a connection lost or closed by the server (terminated backend, shutdown, crash);
- PostgreSQL SQLSTATEs of those states on an open connection (classes 08, 53, 57P, 58, a
  read-only standby after a failover);
- SQLite's I/O, lock-timeout, full, read-only, corrupt and cannot-open result codes;
- a schema older than this release (an empty or unmigrated database, or one revision
  behind): an error that could come from a missing table or column, or from a constraint a
  later revision relaxed (NOT NULL, CHECK, a column's width or type), is confirmed by
  reading the schema's revision.

Recovery needs no restart: every request checks a connection out afresh, a lost one is
discarded by the pool, and the next request reaches whatever the database is then.
"""

from __future__ import annotations

import errno
import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
from sqlalchemy import event
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncEngine

# Revision ids are "NNNN_name", one file each, applied in order: the newest file names the
# schema this release needs (tests/contract/test_migrations.py checks it against Alembic's head).
# Read from the directory, not Alembic: importing Alembic costs ~0.5-1.2 s at start-up.
SCHEMA_REVISION = max(
    path.stem
    for path in (Path(__file__).parent / "migrations" / "versions").glob(
        "[0-9][0-9][0-9][0-9]_*.py"
    )
)


class DatabaseUnreachable(ConnectionError):
    """Opening a connection to the database failed, whatever the server said."""


# SQLSTATE classes and codes of a database that cannot serve now (PostgreSQL appendix A).
_UNAVAILABLE_CLASSES = ("08", "53", "58")  # connection, insufficient resources, system error
_UNAVAILABLE_CODES = frozenset(
    {
        "57P01",  # admin_shutdown (also: terminated by pg_terminate_backend, dropdb --force)
        "57P02",  # crash_shutdown
        "57P03",  # cannot_connect_now (starting up, shutting down)
        "57P04",  # database_dropped
        "57P05",  # idle_session_timeout
        "3D000",  # invalid_catalog_name: the database does not exist
        "25006",  # read_only_sql_transaction: a standby after a failover
        "28000",  # invalid_authorization_specification
        "28P01",  # invalid_password
    }
)
# SQLSTATEs a schema older than the code gives: a missing table, column or function, and a
# constraint a later revision relaxed (a column made nullable, a CHECK widened, a column
# widened or retyped). A bug on a current schema gives them too: the revision decides.
_SCHEMA_CODES = frozenset(
    {
        "42P01",  # undefined_table
        "42703",  # undefined_column
        "42883",  # undefined_function
        "3F000",  # invalid_schema_name
        "23502",  # not_null_violation
        "23514",  # check_violation
        "22001",  # string_data_right_truncation
        "42804",  # datatype_mismatch
    }
)

_SQLITE_UNAVAILABLE = frozenset(
    {
        5,  # SQLITE_BUSY: the write lock was not free within busy_timeout
        6,  # SQLITE_LOCKED
        7,  # SQLITE_NOMEM
        8,  # SQLITE_READONLY
        10,  # SQLITE_IOERR
        11,  # SQLITE_CORRUPT
        13,  # SQLITE_FULL
        14,  # SQLITE_CANTOPEN
        15,  # SQLITE_PROTOCOL
        26,  # SQLITE_NOTADB
    }
)
_SQLITE_ERROR = 1  # generic: among others "no such table"
# Extended constraint codes a relaxed constraint gives on an older schema (not UNIQUE or a
# foreign key: those are the application's own conflicts).
_SQLITE_SCHEMA_CONSTRAINTS = frozenset(
    {
        275,  # SQLITE_CONSTRAINT_CHECK
        1299,  # SQLITE_CONSTRAINT_NOTNULL
    }
)


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """The exception, the driver's exception under SQLAlchemy's wrapper, and their causes."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, DBAPIError):
            pending.append(current.orig)
        pending.extend((current.__cause__, current.__context__))


def _sqlstate(exc: BaseException) -> str | None:
    # asyncpg's exceptions and SQLAlchemy's adapted asyncpg errors both carry `sqlstate`.
    state = getattr(exc, "sqlstate", None)
    return state if isinstance(state, str) else None


def _sqlite_code(exc: BaseException) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None  # the primary of an extended code


# OS errors of a network connection. Any other OSError (a file name too long, a missing file:
# `ZoneInfo` opens files) is a bug or bad input, never an outage to retry: a 300-character
# time-zone name once came back as 503 "database unavailable", and clients retried forever.
_NETWORK_ERRNOS = frozenset(
    {
        errno.ECONNREFUSED,
        errno.ECONNRESET,
        errno.ECONNABORTED,
        errno.EPIPE,
        errno.ETIMEDOUT,
        errno.EHOSTUNREACH,
        errno.EHOSTDOWN,
        errno.ENETUNREACH,
        errno.ENETDOWN,
        errno.EADDRNOTAVAIL,
    }
)


def _is_network_failure(exc: BaseException) -> bool:
    if isinstance(exc, ConnectionError | TimeoutError | socket.gaierror):
        return True
    return isinstance(exc, OSError) and exc.errno in _NETWORK_ERRNOS


def is_database_unavailable(exc: BaseException) -> bool:
    """A fault of the database's availability, not of the statement."""
    for cause in _causes(exc):
        if _is_network_failure(cause):  # DatabaseUnreachable is a ConnectionError
            return True
        if isinstance(cause, DBAPIError) and cause.connection_invalidated:
            return True
        if isinstance(cause, PoolTimeout):
            # Every pooled connection stayed busy for `db_pool_timeout` (a burst on a loaded
            # machine): the process cannot serve now, and a retry later will do — not a 500.
            return True
        if isinstance(cause, asyncpg.PostgresConnectionError):
            return True
        state = _sqlstate(cause)
        if state is not None and (state in _UNAVAILABLE_CODES or state[:2] in _UNAVAILABLE_CLASSES):
            return True
        if isinstance(cause, sqlite3.Error) and _sqlite_code(cause) in _SQLITE_UNAVAILABLE:
            return True
    return False


def may_be_unmigrated(exc: BaseException) -> bool:
    """An error a schema older than this release would give (a missing table or column, a
    constraint a later revision relaxed)."""
    for cause in _causes(exc):
        if _sqlstate(cause) in _SCHEMA_CODES:
            return True
        if isinstance(cause, sqlite3.OperationalError) and _sqlite_code(cause) == _SQLITE_ERROR:
            return True
        if isinstance(cause, sqlite3.IntegrityError):
            extended = getattr(cause, "sqlite_errorcode", None)
            if extended in _SQLITE_SCHEMA_CONSTRAINTS:
                return True
    return False


def revision_is_current(revision: str | None) -> bool:
    """The schema is this release's or newer (a newer release migrated it first; its
    migrations only add, so this release still works on it)."""
    return revision is not None and revision[:4] >= SCHEMA_REVISION[:4]


def watch_connects(engine: AsyncEngine) -> None:
    """Make every failure to open a connection a `DatabaseUnreachable`: whatever the server
    answered at that moment (no such database, not accepting connections, too many clients,
    shutting down), no request can be served until it changes."""

    @event.listens_for(engine.sync_engine, "do_connect")
    def _connect(dialect: Any, _record: Any, cargs: Any, cparams: Any) -> Any:
        try:
            return dialect.connect(*cargs, **cparams)
        except Exception as exc:
            raise DatabaseUnreachable(f"cannot connect: {type(exc).__name__}") from exc
