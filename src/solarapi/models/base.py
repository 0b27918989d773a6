"""Declarative base and column types shared by every table."""

from __future__ import annotations

import enum
from datetime import UTC, datetime
from typing import Any, TypeVar

from sqlalchemy import DateTime, MetaData, String
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase
from sqlalchemy.types import TypeDecorator

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UtcDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes in and out, on SQLite (which has no zones) and PostgreSQL alike."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


E = TypeVar("E", bound=enum.StrEnum)


class StrEnumType(TypeDecorator[E]):
    """A domain enum stored as its value in a plain `VARCHAR(length)` (the tables' CHECK
    constraints keep the database honest): the enum member in and out, so code compares and
    matches members, never strings. A value that is not a member is refused on the way in
    (a bug, not user input: input is validated before it reaches a model)."""

    impl = String
    cache_ok = True

    def __init__(self, enum_class: type[E], length: int) -> None:
        super().__init__(length)
        self.enum_class = enum_class
        # Every row read converts through here (a page of systems: three columns of 50 rows):
        # a dict lookup costs a twentieth of the enum's own call by value.
        self._members: dict[str, E] = {member.value: member for member in enum_class}

    def process_bind_param(self, value: E | str | None, dialect: Dialect) -> str | None:
        return None if value is None else self.enum_class(value).value

    def process_result_value(self, value: str | None, dialect: Dialect) -> E | None:
        return None if value is None else self._members[value]


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
