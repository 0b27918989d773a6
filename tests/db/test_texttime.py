"""`db.api_time` on SQLite: the stored text cut by the reader gives what SQLite's `strftime`
gave (and what the API writes for one system, `kit.timefmt.format_timestamp`), for every form
a UTC timestamp is stored in: SQLAlchemy's, with and without a fraction, and ISO's `T`."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Column, MetaData, String, Table, select
from sqlalchemy.dialects import postgresql, sqlite

from solarapi.db import api_time
from solarapi.kit.timefmt import format_timestamp

_STAMPS = Table("stamps", MetaData(), Column("at", String))
_MOMENTS = st.datetimes(
    min_value=datetime(1970, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59, 999999)
)


def _stored_forms(moment: datetime) -> list[str]:
    return [
        moment.strftime("%Y-%m-%d %H:%M:%S.%f"),  # as SQLAlchemy's SQLite DateTime writes it
        moment.strftime("%Y-%m-%d %H:%M:%S"),
        moment.isoformat(" "),  # the sqlite3 module's own adapter (no fraction when zero)
        moment.strftime("%Y-%m-%dT%H:%M:%S.%f"),
    ]


@given(_MOMENTS)
def test_the_cut_text_is_what_strftime_and_the_api_give(moment: datetime) -> None:
    statement = select(api_time(_STAMPS.c.at))
    compiled = statement.compile(dialect=sqlite.dialect())
    process = api_time(_STAMPS.c.at).type.result_processor(sqlite.dialect(), None)
    assert process is not None
    expected = format_timestamp(moment.replace(tzinfo=UTC))
    with sqlite3.connect(":memory:") as db:
        db.execute("CREATE TABLE stamps (at TEXT)")
        for stored in _stored_forms(moment):
            db.execute("DELETE FROM stamps")
            db.execute("INSERT INTO stamps VALUES (?)", (stored,))
            (raw,) = db.execute(str(compiled)).fetchone()
            (by_sqlite,) = db.execute(
                "SELECT strftime('%Y-%m-%dT%H:%M:%SZ', at) FROM stamps"
            ).fetchone()
            assert process(raw) == by_sqlite == expected, stored


def test_null_stays_null_and_postgresql_formats_in_the_statement() -> None:
    process = api_time(_STAMPS.c.at).type.result_processor(sqlite.dialect(), None)
    assert process is not None
    with sqlite3.connect(":memory:") as db:
        db.execute("CREATE TABLE stamps (at TEXT)")
        db.execute("INSERT INTO stamps VALUES (NULL)")
        sql = str(select(api_time(_STAMPS.c.at)).compile(dialect=sqlite.dialect()))
        assert db.execute(sql).fetchone() == (None,)  # DriverQuery converts no None
    assert api_time(_STAMPS.c.at).type.result_processor(postgresql.dialect(), None) is None
    assert "to_char" in str(select(api_time(_STAMPS.c.at)).compile(dialect=postgresql.dialect()))
