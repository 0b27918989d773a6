"""The database layer: engines, the request's session, and what SQLite and PostgreSQL do
differently, behind one `Backend` chosen once per engine (`backend_of`).

Modules: `backend` (the interface), `sqlite` and `postgres` (its two implementations),
`engine` (engines and session makers, each engine's backend), `session` (the request's unit
of work), `version` (`committed_version`), `query` (reads straight through the driver),
`schema` (the schema revision, outages), `horizon` and `texttime` (SQL expressions compiled
per database).

Who commits, and why:
- an API request's writes: its session dependency (`get_session`), once, when the endpoint
  returns — or never, when the request touched nothing; a readings upload of only new
  quarter-hours on PostgreSQL is one statement of its own instead, committed by itself
  (`readings.store.ReadingStore.store_new`);
- a job's writes: the job worker (`jobs.runner`), per step of the job;
- idempotency bookkeeping (`idempotency.store`): short transactions of its own beside the
  request's session (taking the key, storing the response, releasing it on failure: up to
  four per POST), because a concurrent duplicate must see the key taken *before* the
  request's own transaction commits;
- webhook deliveries, report jobs, the dashboard's log-in and CLI commands: their own
  sessions, each a unit of work of its own.
Repositories and services never commit.
"""

from solarapi.db.backend import (
    Backend,
    CommittedVersion,
    DatabaseVersions,
    LogPage,
    driver_connection,
)
from solarapi.db.engine import (
    backend_of,
    create_engine,
    create_oneshot_engine,
    dispose_engine,
    session_backend,
    sessionmaker_for,
)
from solarapi.db.postgres import POSTGRESQL, pg_reader
from solarapi.db.query import DriverQuery, fetch_rows
from solarapi.db.schema import is_outage, schema_revision
from solarapi.db.session import (
    DATA_VERSION,
    REQUEST_SESSION,
    LazySession,
    RequestSession,
    SessionDep,
    get_session,
    lazy_session,
    untouched,
)
from solarapi.db.sqlite import SQLITE, sqlite_fetchall
from solarapi.db.texttime import api_time
from solarapi.db.version import committed_version

__all__ = [
    "DATA_VERSION",
    "POSTGRESQL",
    "REQUEST_SESSION",
    "SQLITE",
    "Backend",
    "CommittedVersion",
    "DatabaseVersions",
    "DriverQuery",
    "LazySession",
    "LogPage",
    "RequestSession",
    "SessionDep",
    "api_time",
    "backend_of",
    "committed_version",
    "create_engine",
    "create_oneshot_engine",
    "dispose_engine",
    "driver_connection",
    "fetch_rows",
    "get_session",
    "is_outage",
    "lazy_session",
    "pg_reader",
    "schema_revision",
    "session_backend",
    "sessionmaker_for",
    "sqlite_fetchall",
    "untouched",
]
