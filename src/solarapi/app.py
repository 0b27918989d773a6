"""`create_app(settings)`: routers, middleware, error handlers and the lifespan."""

from __future__ import annotations

import ctypes
import functools
import gc
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from importlib.resources import files
from typing import Any

from fastapi import FastAPI
from fastapi.middleware.asyncexitstack import AsyncExitStackMiddleware
from fastapi.openapi.docs import get_swagger_ui_html
from starlette.datastructures import State
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.responses import HTMLResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from solarapi.accounts.router import router as account_router
from solarapi.alerts.router import router as alerts_router
from solarapi.auth.principal import Principal
from solarapi.auth.scopes import API_PREFIX
from solarapi.changes.router import router as changes_router
from solarapi.config import Settings
from solarapi.dashboard.errors import http_error_page
from solarapi.dashboard.router import router as dashboard_router
from solarapi.db import create_engine, dispose_engine, sessionmaker_for
from solarapi.declarations.router import router as declarations_router
from solarapi.errors import install_error_handlers
from solarapi.gateway import ApiGateway, AppRoutes, DirectDispatch
from solarapi.health.router import router as health_router
from solarapi.health.service import HealthProbe
from solarapi.idempotency.middleware import IdempotencyMiddleware
from solarapi.ingest.router import router as ingest_router
from solarapi.jobs.runner import start_inline_runner, stop_inline_runner
from solarapi.kit.compression import Compression
from solarapi.kit.jsonresp import OrjsonResponse
from solarapi.kit.version import API_VERSION
from solarapi.kit.versioned import VersionedCache
from solarapi.logs import configure_logging
from solarapi.metrics import recorder_for
from solarapi.openapi import build_openapi
from solarapi.performance.router import router as performance_router
from solarapi.portfolio.router import router as portfolio_router
from solarapi.prices.router import router as prices_router
from solarapi.ratelimit.base import RateLimiter
from solarapi.ratelimit.policy import create_limiter
from solarapi.readings.router import router as readings_router
from solarapi.reports.router import router as reports_router
from solarapi.systems.router import router as systems_router
from solarapi.webhooks.router import router as webhooks_router


def create_app(
    settings: Settings | None = None,
    *,
    clock: Callable[[], float] = time.time,
    limiter: RateLimiter | None = None,
    run_jobs: bool | None = None,
    started: Callable[[], None] | None = None,
) -> FastAPI:
    """Build the application. `clock` and `limiter` are injectable for tests; `started` is
    called once the lifespan's start-up is done (the inline job runner, if any, running),
    before the first request."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        inline_jobs = run_jobs if run_jobs is not None else settings.job_runner == "inline"
        if inline_jobs:
            await start_inline_runner(app)
        if started is not None:
            started()
        try:
            yield
        finally:
            if inline_jobs:
                await stop_inline_runner(app)
            await app.state.limiter.close()
            await dispose_engine(app.state.engine)
            if app.state.metrics is not None:
                app.state.metrics.process_exiting()

    app = SolarApi(
        title="Solar Energy Platform API",
        version=API_VERSION,
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
        default_response_class=OrjsonResponse,
        lifespan=lifespan,
        # The app's own metrics are Prometheus (solarapi.metrics); FastAPI's OpenTelemetry
        # would otherwise ask the global providers whether it is wanted on every request.
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.state = AppState()
    engine = create_engine(settings)
    app.state.settings = settings
    app.state.engine = engine
    app.state.sessionmaker = sessionmaker_for(engine, settings)
    # None unless SOLARAPI_METRICS_PORT is set: then the gateway, the limiter and the jobs
    # record into it (see solarapi.metrics).
    app.state.metrics = recorder_for(settings)
    if app.state.metrics is not None:
        app.state.metrics.watch_pool(engine, settings.db_pool_size + 10)
    app.state.limiter = limiter or create_limiter(
        settings,
        on_fallback=app.state.metrics.limiter_fell_back if app.state.metrics else None,
    )
    app.state.clock = clock
    # Callers' Principals by key hash, while no key or account changes (the auth epoch of
    # `db.committed_version`, kept with `kit.versioned`).
    app.state.principals = VersionedCache[Principal](maxsize=10_000)
    # The key hashes whose `last_used_at` a request is writing now (gateway.authentication).
    app.state.touching = set[str]()

    install_error_handlers(app, outside_api=http_error_page)
    _include_routers(app)
    _install_docs(app)

    app.state.health = HealthProbe(engine, app.state.limiter)
    return app


class AppState(State):
    """`app.state` with its values as the object's own attributes.

    Starlette's `State` keeps them in a dict behind `__getattr__`, which Python calls only
    after the ordinary look-up failed — and that failure formats an `AttributeError` first:
    ~5.8 k instructions per `app.state.<name>`, read ~11 times per API request by the gateway
    alone (64 k of a kept read's 741 k; bench/fleet/README.md). Here the ordinary look-up
    finds them. Everything else is `State`'s: `state[name]`, the same `AttributeError` for a
    name never set."""

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        object.__delattr__(self, name)

    def __init__(self) -> None:  # no `State.__init__`: its dict is the instance's own
        pass

    @property
    def _state(self) -> dict[str, Any]:  # type: ignore[override]
        return self.__dict__


class SolarApi(FastAPI):
    """FastAPI with its request path written down here, in one place.

    FastAPI wraps the app in ServerErrorMiddleware, a telemetry middleware and a body-limit
    middleware before the app's own: the gateway does their work (it turns anything that
    escapes into the `{error, code}` 500 or 503 and bounds bodies itself), so here it is the
    outermost layer and /health (which it answers) passes through nothing else: with its
    cheaper probe, several times less CPU per /health (measured in bench/foundation/README.md).
    """

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """What `FastAPI.__call__` does for an HTTP request with its telemetry off (as
        `create_app` builds it: `enabled()` is then False whatever is configured globally) —
        the root path, then `Starlette.__call__` — in one frame instead of two and that
        check (every request's; pinned in tests/gateway/test_fast_paths.py). Anything else,
        or telemetry on, is FastAPI's own."""
        if scope["type"] != "http" or self._telemetry_on:
            await super().__call__(scope, receive, send)
            return
        if self.root_path:
            scope["root_path"] = self.root_path
        scope["app"] = self
        stack = self.middleware_stack
        if stack is None:
            stack = self.middleware_stack = self.build_middleware_stack()
        await stack(scope, receive, send)

    @functools.cached_property
    def _telemetry_on(self) -> bool:
        config = self._telemetry
        return bool(config["tracing"] or config["metrics"] or config["logs"])

    def build_middleware_stack(self) -> ASGIApp:
        handlers = {
            key: handler
            for key, handler in self.exception_handlers.items()
            if key not in (500, Exception)
        }
        endpoint = ExceptionMiddleware(AsyncExitStackMiddleware(self.router), handlers=handlers)
        return ApiGateway(
            # Level 4, not Starlette's 9: on a year of hourly JSON (780 KB) level 9 takes
            # ~90 ms for a 9 % smaller body, level 4 ~4 ms for the size of level 6
            # (bench/prices/README.md).
            Compression(
                # The gateway's `@direct` endpoints (kit.direct_endpoints) skip everything below.
                DirectDispatch(
                    IdempotencyMiddleware(endpoint)  # inside the gateway: needs its principal
                ),
                minimum_size=1000,
                compresslevel=4,
            )
        )


def serve_app() -> FastAPI:
    """The app of one `solarapi serve` worker process. Logging is configured here, in the
    process that serves, not only in the command: with `--workers N` uvicorn starts each
    worker as a fresh (spawned) interpreter that inherits none of its parent's handlers, and
    a worker without them wrote no request line and printed its errors as plain text."""
    settings = Settings()
    configure_logging(settings.log_level)
    if settings.warm_start:
        _warm_sandbox()
    # Frozen once the lifespan's start-up is done, not here: the inline job runner imports
    # its handlers (matplotlib, reportlab: ~50k objects) there, after this returns.
    app = create_app(settings, started=_freeze_startup_objects)
    _keep_freed_memory()
    return app


def _freeze_startup_objects() -> None:
    """Move everything alive after start-up (modules, pvlib's tables, the job handlers'
    matplotlib and reportlab, the app) out of the garbage collector's reach. A worker holds
    ~270k such objects; without this every full collection walks them all and stalls the
    event loop for >100 ms — the p99 of uncached fleet reads was the collector, not the
    request (bench/fleet figures in bench/README.md). Called at the end of the lifespan's
    start-up: frozen when `serve_app` returned, the ~58k objects of the job handlers, imported
    by the lifespan after it, stayed in reach, and each full collection still walked them
    (24 ms on an idle worker, 60-120 ms under the fleet's W2/W3; bench/fleet/README.md).
    Objects created later are collected as usual, but a full collection comes after 100
    collections of the middle generation instead of 10: what an uncached read leaves alive
    (kept bodies, frames, keys) filled the quarter of the old generation that triggers one
    every ~1.5 s under load, each walking ~70k objects for 20-45 ms — 4 % of the worker's
    CPU for ~0 objects freed (bench/fleet W3: 11-12 full collections in 15 s, 0.65-0.79 s of
    it, against 1 with this, 0.10-0.15 s). Young cycles are still freed by the two younger
    generations; only cyclic garbage that outlived them waits longer."""
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, _FULL_COLLECTION_AFTER)


# Collections of the middle generation between two full ones (CPython's default: 10).
_FULL_COLLECTION_AFTER = 100

# glibc's mallopt parameters, and what a worker sets them to.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_TRIM_THRESHOLD = 64 * 2**20
_MMAP_THRESHOLD = 32 * 2**20  # glibc's largest on 64-bit


def _keep_freed_memory() -> None:
    """Let glibc's malloc keep memory a request freed for the next one, instead of giving
    it back to the kernel and taking it again (zeroed, a page fault per 4 KiB) on every
    large request. By default a block over 128 KiB (numpy arrays of a few thousand rows, a
    megabytes-long body and its pieces) is mapped for itself and unmapped when freed, and
    the heap's free top is returned above 128 KiB (both thresholds then move with what was
    freed, but not far enough: a `GET /portfolio/readings` of 1,000 systems × 31 days still
    paid ~4-9 ms of kernel time per request for it, a fifth of its CPU). Now blocks up to
    32 MiB come from the heap and up to 64 MiB of free heap are kept: the worker's resident
    memory grew by ~12 MB on that benchmark (bench/portfolio/README.md). Best effort: only
    glibc has these knobs, and the operator's `MALLOC_*_` environment wins."""
    if os.environ.keys() & {"MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_"}:
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return  # no C library to ask (elsewhere than glibc the call does nothing)
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)
    mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)


def _warm_sandbox() -> None:
    """Import the sandbox's model and simulate one day before serving: the first sandbox
    request of a process otherwise waited ~2.75 s for pvlib, pandas and scipy to import and
    for pvlib's first run. Done here, not in `create_app`: tests build hundreds of apps."""
    # Function-level: pvlib + pandas + scipy are seconds of import the metered-only paths
    # (and the CLI) never need.
    from solarapi.sandbox import model

    day = datetime(2025, 6, 1, tzinfo=UTC)
    params = model.PvParams(
        system_id="warm-up", latitude=52.0, longitude=5.0, timezone="Europe/Amsterdam",
        capacity_kwp=1.0, inverter_capacity_kw=None, tilt_deg=30.0, azimuth_deg=180.0,
    )  # fmt: skip
    model.simulate(params, day, day + timedelta(days=1))


def _include_routers(app: FastAPI) -> None:
    for router in (
        health_router,
        account_router,
        # Before systems: the fuzz test runs operations in this order, and systems it creates
        # in the sandbox (installed 2000-01-01, hypothesis's favourite date) would each make a
        # fleet summary simulate 26 years (docs/portfolio.md).
        portfolio_router,
        systems_router,
        readings_router,
        changes_router,
        performance_router,
        prices_router,
        declarations_router,
        reports_router,
        webhooks_router,
        ingest_router,
        alerts_router,
    ):
        app.include_router(router, prefix=API_PREFIX)
    app.include_router(dashboard_router)
    # The gateway's routing table: derived from the app's routes, whatever adds them.
    app.state.route_table = AppRoutes(app.router.routes)


def _install_docs(app: FastAPI) -> None:
    # Swagger UI 5 (OpenAPI 3.1 support) as shipped inside the fastapi-swagger wheel: served
    # from the installed package, never a CDN. (swagger-ui-bundle stops at Swagger UI 4,
    # which refuses to render an OpenAPI 3.1 document.)
    assets = str(files("fastapi_swagger") / "resources")
    app.mount(f"{API_PREFIX}/docs/assets", StaticFiles(directory=assets), name="swagger-assets")

    @app.get(f"{API_PREFIX}/openapi.json", include_in_schema=False)
    async def openapi_document() -> Response:
        return OrjsonResponse(build_openapi(app))

    @app.get(f"{API_PREFIX}/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=f"{API_PREFIX}/openapi.json",
            title="Solar Energy Platform API — docs",
            swagger_js_url=f"{API_PREFIX}/docs/assets/swagger-ui-bundle.js",
            swagger_css_url=f"{API_PREFIX}/docs/assets/swagger-ui.css",
            swagger_favicon_url=f"{API_PREFIX}/docs/assets/favicon-32x32.png",
            # Swagger UI would otherwise send the document to validator.swagger.io.
            swagger_ui_parameters={"validatorUrl": None},
        )
