"""The operator's metrics endpoint: `solarapi serve` runs it in its main process, on its own
port (`SOLARAPI_METRICS_HOST`:`SOLARAPI_METRICS_PORT`, 127.0.0.1 by default), never on the
API's port. A scrape adds up every worker's values from the multiprocess directory and reads
the job queue from the database.
"""

from __future__ import annotations

import asyncio
import logging
import os
import platform
import threading
from collections.abc import Awaitable, Callable, Collection, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Protocol
from wsgiref.simple_server import WSGIServer

from prometheus_client import PLATFORM_COLLECTOR, PROCESS_COLLECTOR, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector, CollectorRegistry
from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.config import Settings
from solarapi.db import create_oneshot_engine, dispose_engine, sessionmaker_for
from solarapi.kit.timefmt import utcnow
from solarapi.kit.tzdb import TZDATA_VERSION
from solarapi.kit.version import API_VERSION, package_version

log = logging.getLogger("solarapi.metrics")
# A scrape must answer even when the database does not.
_QUERY_TIMEOUT_SECONDS = 5.0


class QueueRow(Protocol):
    """One job kind's queue (`jobs.repository.QueueStats`)."""

    @property
    def kind(self) -> str: ...
    @property
    def due(self) -> int: ...
    @property
    def scheduled(self) -> int: ...
    @property
    def running(self) -> int: ...
    @property
    def oldest_due_at(self) -> datetime | None: ...


# `jobs.repository.queue_stats`, passed in by the command that serves the metrics (the jobs
# area imports this module, so this module does not import it back).
QueueReader = Callable[[AsyncSession, datetime], Awaitable[Sequence[QueueRow]]]
# The job kinds the process knows (asked at each scrape: a worker registers its handlers
# after the metrics server starts).
KnownKinds = Callable[[], Collection[str]]


class JobQueueCollector(Collector):
    """Queue depth and age by job kind, read from the database at scrape time (the queue
    lives there, shared by every API and worker process)."""

    def __init__(
        self, settings: Settings, read_queue: QueueReader, kinds: KnownKinds = tuple
    ) -> None:
        self._settings = settings
        self._read_queue = read_queue
        # Kinds shown (at 0) even with no job of theirs in the table: an idle queue is a
        # series at 0, not a missing series that alert rules cannot tell from a dead scrape.
        self._kinds = kinds

    async def _read(self) -> tuple[Sequence[QueueRow], datetime]:
        engine = create_oneshot_engine(self._settings)
        try:
            async with sessionmaker_for(engine)() as session:
                now = utcnow()
                return await self._read_queue(session, now), now
        finally:
            await dispose_engine(engine)

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "solarapi_metrics_database_up",
            "1 when this scrape could read the job queue from the database, else 0.",
        )
        try:
            # Each scrape runs in its own thread of the metrics server: a loop of its own.
            stats, now = asyncio.run(asyncio.wait_for(self._read(), _QUERY_TIMEOUT_SECONDS))
        except Exception as exc:
            log.warning("metrics: reading the job queue failed: %s", type(exc).__name__)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        families = {
            "due": GaugeMetricFamily(
                "solarapi_jobs_queued",
                "Queued jobs that are due (the backlog), by kind.",
                labels=["kind"],
            ),
            "scheduled": GaugeMetricFamily(
                "solarapi_jobs_scheduled",
                "Queued jobs due later (e.g. webhook retries), by kind.",
                labels=["kind"],
            ),
            "running": GaugeMetricFamily(
                "solarapi_jobs_running", "Jobs being run, by kind.", labels=["kind"]
            ),
            "age": GaugeMetricFamily(
                "solarapi_jobs_oldest_queued_age_seconds",
                "How long the oldest due job has waited past its run time, by kind (0 when "
                "none is waiting).",
                labels=["kind"],
            ),
        }
        seen = {item.kind for item in stats}
        for kind in sorted(set(self._kinds()) - seen):
            for family in families.values():
                family.add_metric([kind], 0)
        for item in stats:
            families["due"].add_metric([item.kind], item.due)
            families["scheduled"].add_metric([item.kind], item.scheduled)
            families["running"].add_metric([item.kind], item.running)
            age = (now - item.oldest_due_at).total_seconds() if item.oldest_due_at else 0.0
            families["age"].add_metric([item.kind], max(age, 0.0))
        yield from families.values()


class BuildInfoCollector(Collector):
    """`solarapi_build_info{version, api_version, python, tzdata} 1`: what runs, for joins."""

    def collect(self) -> Iterator[Metric]:
        info = GaugeMetricFamily(
            "solarapi_build_info",
            "The running release: package version, API version, Python, shipped tzdata.",
            labels=["version", "api_version", "python", "tzdata"],
        )
        # The IANA release, as `/health` reports it (e.g. "2026f", not the package's "2026.6").
        info.add_metric(
            [package_version(), API_VERSION, platform.python_version(), TZDATA_VERSION], 1
        )
        yield info


class WorkerProcessCollector(Collector):
    """`process_*` (CPU, memory, open files, start time) of every process writing to the
    multiprocess directory, labelled by `pid`, and of this one: prometheus_client's
    multiprocess mode has no process metrics of the workers at all."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory

    def _pids(self) -> list[int]:
        pids = {os.getpid()}
        for path in self._directory.glob("*.db"):
            tail = path.stem.rsplit("_", 1)[-1]
            if tail.isdigit() and Path(f"/proc/{tail}").exists():
                pids.add(int(tail))
        return sorted(pids)

    def collect(self) -> Iterator[Metric]:
        merged: dict[str, Metric] = {}
        for pid in self._pids():
            reader = ProcessCollector(pid=lambda pid=pid: pid, registry=None)  # type: ignore[misc]
            for family in reader.collect():
                target = merged.get(family.name)
                if target is None:
                    target = Metric(family.name, family.documentation, family.type)
                    merged[family.name] = target
                for sample in family.samples:
                    target.add_sample(sample.name, {**sample.labels, "pid": str(pid)}, sample.value)
        yield from merged.values()


def metrics_registry(
    settings: Settings,
    multiproc_dir: Path | None,
    read_queue: QueueReader,
    kinds: KnownKinds = tuple,
) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(BuildInfoCollector())
    if multiproc_dir is not None:
        MultiProcessCollector(registry, path=str(multiproc_dir))  # type: ignore[no-untyped-call]
        registry.register(WorkerProcessCollector(multiproc_dir))
    else:
        # Not at module level: importing the recorder registers its metrics, and under
        # PROMETHEUS_MULTIPROC_DIR every process that does so writes value files of its own;
        # the process that only serves the multiprocess files must not add one.
        from solarapi.metrics.recorder import RECORDER

        for metric in (
            RECORDER.requests,
            RECORDER.latency,
            RECORDER.refusals,
            RECORDER.limiter_unavailable,
            RECORDER.database_unavailable,
            RECORDER.webhook_deliveries,
            RECORDER.report_seconds,
            RECORDER.pool_in_use,
            RECORDER.pool_capacity,
        ):
            registry.register(metric)
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR):
            registry.register(collector)
    registry.register(JobQueueCollector(settings, read_queue, kinds))
    return registry


def start_metrics_server(
    settings: Settings,
    multiproc_dir: Path | None,
    read_queue: QueueReader,
    kinds: KnownKinds = tuple,
) -> tuple[WSGIServer, threading.Thread]:
    """Serve `/metrics` on the operator port in a daemon thread; raises OSError when the port
    cannot be bound."""
    assert settings.metrics_port is not None
    return start_http_server(
        settings.metrics_port,
        addr=settings.metrics_host,
        registry=metrics_registry(settings, multiproc_dir, read_queue, kinds),
    )
