"""The metrics the service records, and the one `Recorder` that records them.

In `solarapi serve` every worker process writes its values to files in
`PROMETHEUS_MULTIPROC_DIR` and the server adds them up at scrape time; elsewhere (tests,
`solarapi worker`) they live in this process's default registry.
"""

from __future__ import annotations

import os

from prometheus_client import Counter, Gauge, Histogram, multiprocess
from prometheus_client.registry import REGISTRY, CollectorRegistry
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from solarapi.metrics import MULTIPROC_ENV

_LATENCY_BUCKETS = (0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_REPORT_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0)
# Any other method (a client may send anything) is counted as "other": labels stay bounded.
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class Recorder:
    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.requests = Counter(
            "solarapi_http_requests",
            "HTTP requests answered, by route template, method and status.",
            ["route", "method", "status"],
            registry=registry,
        )
        self.latency = Histogram(
            "solarapi_http_request_duration_seconds",
            "Time from receiving a request to finishing its response, by route template and "
            "method.",
            ["route", "method"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.refusals = Counter(
            "solarapi_rate_limit_refusals",
            "Requests refused with 429, by the window that refused them (minute or day) and the "
            "caller (key, or anonymous: per client IP).",
            ["window", "caller"],
            registry=registry,
        )
        self.limiter_unavailable = Counter(
            "solarapi_rate_limiter_unavailable",
            "Rate-limit decisions taken by per-process fallback counters because Redis was "
            "unreachable (the API fails open).",
            registry=registry,
        )
        self.database_unavailable = Counter(
            "solarapi_database_unavailable",
            "Requests answered 503 because the database was unreachable.",
            registry=registry,
        )
        self.webhook_deliveries = Counter(
            "solarapi_webhook_deliveries",
            "Webhook delivery attempts by outcome: delivered (2xx), retrying (failed, another "
            "attempt is scheduled), gave_up (failed, no attempt left), gone (410: endpoint "
            "disabled).",
            ["outcome"],
            registry=registry,
        )
        self.report_seconds = Histogram(
            "solarapi_report_generation_seconds",
            "Time to generate a completed report (reading, rendering, storing), by type and "
            "format.",
            ["type", "format"],
            buckets=_REPORT_BUCKETS,
            registry=registry,
        )
        # Connections of this process's pool in use; in `serve`, summed over live workers.
        self.pool_in_use = Gauge(
            "solarapi_db_pool_connections_in_use",
            "Database connections checked out of the pool (a request or job is using them, or, "
            "on PostgreSQL, up to 5 per process are kept between lone reads), summed over the "
            "live processes.",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.pool_capacity = Gauge(
            "solarapi_db_pool_connections_max",
            "Connections the pools may open (SOLARAPI_DB_POOL_SIZE + 10 overflow per process), "
            "summed over the live processes.",
            registry=registry,
            multiprocess_mode="livesum",
        )
        # labels() validates and locks on every call; the request path looks its children
        # up here instead (route templates, methods and statuses are few).
        self._request_children: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}

    def request(self, route: str, method: str, status: int, seconds: float) -> None:
        children = self._request_children.get((route, method, status))
        if children is None:
            if method not in _METHODS:
                method = "other"
            children = (
                self.requests.labels(route, method, str(status)),
                self.latency.labels(route, method),
            )
            self._request_children[(route, method, status)] = children
        children[0].inc()
        children[1].observe(seconds)

    def refused(self, window: str, caller: str) -> None:
        self.refusals.labels(window, caller).inc()

    def limiter_fell_back(self) -> None:
        self.limiter_unavailable.inc()

    def database_down(self) -> None:
        self.database_unavailable.inc()

    def webhook_delivery(self, outcome: str) -> None:
        self.webhook_deliveries.labels(outcome).inc()

    def report_generated(self, report_type: str, report_format: str, seconds: float) -> None:
        self.report_seconds.labels(report_type, report_format).observe(seconds)

    def watch_pool(self, engine: AsyncEngine, capacity: int) -> None:
        """Count the engine's checked-out connections (SQLAlchemy's pool events: no cost on
        the request path beyond an increment)."""
        self.pool_capacity.inc(capacity)
        pool = engine.sync_engine.pool
        event.listen(pool, "checkout", lambda *_: self.pool_in_use.inc())
        event.listen(pool, "checkin", lambda *_: self.pool_in_use.dec())

    def process_exiting(self) -> None:
        """On a worker's exit (`mark_process_dead`): drop its live-gauge files; its counters
        and histograms stay in the sum."""
        if os.environ.get(MULTIPROC_ENV):
            multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]


RECORDER = Recorder()
