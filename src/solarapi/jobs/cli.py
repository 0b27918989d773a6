"""`solarapi worker`: run queued jobs (reports, webhook deliveries) out of the API process."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import signal
from typing import Annotated

import typer

from solarapi.cli_support import load_settings, startup_summary
from solarapi.db import create_engine, dispose_engine, sessionmaker_for
from solarapi.jobs.queue import HANDLERS
from solarapi.jobs.repository import queue_stats
from solarapi.jobs.runner import (
    JobRunner,
    RunnerSettings,
    load_handlers,
    new_worker_id,
    run_pending,
    warm_render_process,
)
from solarapi.kit import cpu
from solarapi.logs import configure_logging


def register(app: typer.Typer) -> None:
    """Add this area's commands to `app`."""
    app.command()(worker)


def worker(
    concurrency: Annotated[int, typer.Option(min=1, help="Jobs run at once")] = 4,
    poll: Annotated[float, typer.Option(min=0.05, help="Seconds between polls when idle")] = 1.0,
    lease: Annotated[
        float, typer.Option(min=1.0, help="Lease seconds; a silent worker loses its jobs after it")
    ] = 30.0,
    once: Annotated[
        bool, typer.Option("--once", help="Run the jobs due now, one by one, then exit")
    ] = False,
    handlers: Annotated[
        list[str] | None,
        typer.Option("--handlers", help="Extra module to import that registers job handlers"),
    ] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=65535,
            help="Serve this worker's Prometheus metrics on this port of SOLARAPI_METRICS_HOST",
        ),
    ] = None,
) -> None:
    """Run report and webhook jobs. Start any number of these against one PostgreSQL database
    (and set SOLARAPI_JOB_RUNNER=external on the API servers); each job runs in one of them."""
    # Only an explicit --metrics-port turns metrics on here: SOLARAPI_METRICS_PORT belongs to
    # `solarapi serve`, which may run on the same host.
    settings = load_settings().model_copy(update={"metrics_port": metrics_port})
    configure_logging(settings.log_level)
    logging.getLogger("solarapi.startup").info(
        "starting",
        extra={"config": startup_summary(settings, "worker", concurrency=concurrency, once=once)},
    )
    if metrics_port is not None:
        # prometheus_client costs ~90 ms to import (-X importtime): only with --metrics-port.
        from solarapi.metrics.exposition import start_metrics_server

        try:
            start_metrics_server(settings, None, queue_stats, HANDLERS.keys)
        except OSError as exc:
            typer.echo(f"error: cannot serve metrics on port {metrics_port}: {exc}", err=True)
            raise typer.Exit(2) from None
    load_handlers()
    warm_render_process()
    for module in handlers or []:
        importlib.import_module(module)
    runner_settings = RunnerSettings(lease_seconds=lease)
    worker_id = new_worker_id("worker")

    async def main() -> None:
        engine = create_engine(settings)
        maker = sessionmaker_for(engine, settings)
        try:
            if once:
                ran = await run_pending(maker, worker_id, settings=runner_settings)
                typer.echo(f"ran {ran} job(s)", err=True)
                return
            runner = JobRunner(
                maker,
                worker_id=worker_id,
                concurrency=concurrency,
                poll_seconds=poll,
                settings=runner_settings,
            )
            loop = asyncio.get_running_loop()
            stop = asyncio.Event()
            for signum in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(NotImplementedError):
                    loop.add_signal_handler(signum, stop.set)
            typer.echo(f"worker {worker_id} started", err=True)
            runner.start()
            await stop.wait()
            typer.echo(f"worker {worker_id} stopping", err=True)
            await runner.stop(grace_seconds=lease / 2)
            cpu.stop()  # its jobs are handed back: a render still going is abandoned
        finally:
            await dispose_engine(engine)

    asyncio.run(main())
