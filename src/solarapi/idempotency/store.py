"""Idempotency records: taking a key (the unique constraint is the lock), storing the response,
and answering a repeat.

Each step is its own short, committed transaction, separate from the request's own session:
the key must be visibly taken *before* the request runs, so a concurrent duplicate waits on
the unique index and then sees it, on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from solarapi.db import session_backend
from solarapi.kit.text import excerpt
from solarapi.kit.timefmt import format_timestamp
from solarapi.models.webhooks import IdempotencyRecord

Maker = async_sessionmaker[AsyncSession]

# A key answers repeats for this long (contract: 24 h); after that it may be used afresh.
KEY_TTL = timedelta(hours=24)
# No request of this API runs this long: a key still in flight after it belongs to a request
# whose process died, perhaps after its change committed.
ABANDONED_AFTER = timedelta(minutes=10)


async def _without_flush_wait(session: AsyncSession) -> None:
    """Where the database allows it (PostgreSQL), commit this bookkeeping without waiting for the WAL flush (one fsync
    less per step). Safe because WAL is flushed in order: the request's own, synchronous
    commit — the one that matters — makes an earlier key row durable too. A crash can lose
    only a stored response (the key then reads as abandoned: 409, never a second run) or the
    key of a request that changed nothing."""
    await session_backend(session).commit_without_flush_wait(session)


@dataclass(frozen=True, slots=True)
class Holder:
    """Whose Idempotency-Keys these are: an API key's, or an ingest token's (a data logger's
    uploads). Exactly one is set; two holders' keys never meet."""

    api_key_id: str | None = None
    ingest_token_id: str | None = None

    def __post_init__(self) -> None:
        if (self.api_key_id is None) == (self.ingest_token_id is None):
            raise ValueError("an Idempotency-Key belongs to one API key or one ingest token")

    def owns(self) -> ColumnElement[bool]:
        if self.api_key_id is not None:
            return IdempotencyRecord.api_key_id == self.api_key_id
        return IdempotencyRecord.ingest_token_id == self.ingest_token_id


@dataclass(frozen=True, slots=True)
class Acquired:
    record_id: int


@dataclass(frozen=True, slots=True)
class Replay:
    status: int
    headers: list[list[str]]
    body: bytes


@dataclass(frozen=True, slots=True)
class Refused:
    message: str


ClaimOutcome = Acquired | Replay | Refused


async def claim(
    maker: async_sessionmaker[AsyncSession],
    *,
    holder: Holder,
    key: str,
    request_hash: str,
    method: str,
    path: str,
    now: datetime,
) -> ClaimOutcome:
    # A few rounds: an expired record is deleted and the insert tried again, and a rival may
    # win that race, which the next round reports.
    for _ in range(3):
        try:
            async with maker() as session, session.begin():
                await _without_flush_wait(session)
                record = IdempotencyRecord(
                    api_key_id=holder.api_key_id,
                    ingest_token_id=holder.ingest_token_id,
                    idempotency_key=key,
                    request_hash=request_hash,
                    method=method,
                    path=path,
                    created_at=now,
                )
                session.add(record)
                await session.flush()
                return Acquired(record.id)
        except IntegrityError:
            pass
        async with maker() as session, session.begin():
            existing = await session.scalar(
                select(IdempotencyRecord).where(
                    holder.owns(), IdempotencyRecord.idempotency_key == key
                )
            )
            if existing is None:
                continue  # released (a failed first request) in the meantime: try again
            if existing.created_at <= now - KEY_TTL:
                await session.execute(
                    delete(IdempotencyRecord).where(IdempotencyRecord.id == existing.id)
                )
                continue
            return _answer(existing, key, request_hash, now)
    return Refused(
        f"A request with Idempotency-Key '{excerpt(key)}' is still being processed; retry after it "
        "completes to get its response"
    )


def _answer(
    existing: IdempotencyRecord, key: str, request_hash: str, now: datetime
) -> ClaimOutcome:
    if existing.request_hash != request_hash:
        return Refused(
            f"Idempotency-Key '{excerpt(key)}' was already used in the last 24 hours for a different "
            f"request (first: {existing.method} {existing.path}); send a new key with a new "
            "request"
        )
    if existing.completed_at is None or existing.response_status is None:
        if existing.created_at <= now - ABANDONED_AFTER:
            return Refused(
                f"The first request with Idempotency-Key '{excerpt(key)}' (started "
                f"{format_timestamp(existing.created_at)}) never completed, so whether its "
                "change was made is unknown; check, then retry with a new key if needed"
            )
        return Refused(
            f"A request with Idempotency-Key '{excerpt(key)}' is still being processed; retry after "
            "it completes to get its response"
        )
    return Replay(
        existing.response_status,
        [list(pair) for pair in existing.response_headers or []],
        existing.response_body or b"",
    )


async def complete(
    maker: async_sessionmaker[AsyncSession],
    record_id: int,
    *,
    status: int,
    headers: list[list[str]],
    body: bytes,
    now: datetime,
) -> None:
    async with maker() as session, session.begin():
        await _without_flush_wait(session)
        await session.execute(
            update(IdempotencyRecord)
            .where(IdempotencyRecord.id == record_id)
            .values(
                completed_at=now,
                response_status=status,
                response_headers=headers,
                response_body=body,
            )
        )


async def release(maker: async_sessionmaker[AsyncSession], record_id: int) -> None:
    """Forget a key whose request failed on our side, so a retry with it runs again."""
    async with maker() as session, session.begin():
        await session.execute(delete(IdempotencyRecord).where(IdempotencyRecord.id == record_id))


async def purge_expired_keys(session: AsyncSession, now: datetime) -> int:
    result = await session.execute(
        delete(IdempotencyRecord).where(IdempotencyRecord.created_at < now - KEY_TTL)
    )
    return int(getattr(result, "rowcount", 0) or 0)
