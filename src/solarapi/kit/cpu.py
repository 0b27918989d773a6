"""A process for CPU-bound work that must not stall the event loop: report rendering, and
in an API process the alert rules' sun and clear sky (`off_loop`).

A thread is not enough: drawing a chart and laying out a 300-page PDF is pure Python that
holds the GIL, and while it does the event loop gets a turn only every few milliseconds —
`GET /health` took up to 3.5 s during one report. A separate process has its own interpreter.

One process, at a lower CPU priority (nice 10): embedded mode runs on small machines, and the
API process must win a shared core over a report. It is started (spawned, never forked from
a process with threads) and its imports warmed with `warm()` at start-up, so the first report
does not wait for matplotlib and reportlab. A crashed process (killed, out of memory) breaks
the pool; the next call starts a new one.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import importlib
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import partial
from typing import TypeVar

T = TypeVar("T")

# Set by the job runner inside an API process (`jobs.runner.start_inline_runner`) for its
# jobs: their CPU-bound steps (`off_loop`) then run in the CPU process, not on the event loop
# that answers requests. A `solarapi worker` serves no requests, and runs them in place.
OFF_LOOP: contextvars.ContextVar[bool] = contextvars.ContextVar("cpu_off_loop", default=False)

_pool: ProcessPoolExecutor | None = None
_lock = threading.Lock()
NICENESS = 10
PARENT_CHECK_SECONDS = 1.0


def _init_worker(parent_pid: int) -> None:
    with contextlib.suppress(OSError):  # not permitted here: run at normal priority
        os.nice(NICENESS)
    threading.Thread(
        target=_exit_with_parent, args=(parent_pid,), name="exit-with-parent", daemon=True
    ).start()


def _exit_with_parent(parent_pid: int) -> None:
    # The pool's queues hand the worker both ends of their pipes, so a parent killed outright
    # (SIGKILL, out of memory) never shows here as an end of file: without this check the
    # process would live on, orphaned, after every killed API process or worker.
    while os.getppid() == parent_pid:
        time.sleep(PARENT_CHECK_SECONDS)
    os._exit(0)


def _pool_now() -> ProcessPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ProcessPoolExecutor(
                max_workers=1,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_init_worker,
                initargs=(os.getpid(),),
            )
        return _pool


def _forget(pool: ProcessPoolExecutor) -> None:
    global _pool
    with _lock:
        if _pool is pool:
            _pool = None
    pool.shutdown(wait=False, cancel_futures=True)


async def run_in_process(function: Callable[..., T], *args: object) -> T:
    """`function(*args)` in the CPU process; `function` and its arguments must pickle."""
    pool = _pool_now()
    try:
        return await asyncio.get_running_loop().run_in_executor(pool, partial(function, *args))
    except BrokenProcessPool:
        _forget(pool)
        raise


async def off_loop(function: Callable[..., T], *args: object) -> T:
    """`function(*args)` in the CPU process where `OFF_LOOP` is set, else here and now.

    For steps of a job that hold the GIL for tens of milliseconds (the alert rules' sun and
    clear sky with pvlib and pandas: 15-30 ms an evaluation, 100-220 ms when a system's
    38 days are not yet cached): on the API's event loop every request in flight waited for
    them, and a fleet's uploads queue one evaluation each (bench/fleet/README.md)."""
    if OFF_LOOP.get():
        return await run_in_process(function, *args)
    return function(*args)


def _import(module_names: tuple[str, ...]) -> None:
    for name in module_names:
        importlib.import_module(name)


def warm(*module_names: str) -> Future[None]:
    """Start the process and import `module_names` in it, without waiting."""
    return _pool_now().submit(_import, module_names)


def stop() -> None:
    """Stop the CPU process now, abandoning whatever it is running.

    For shutting down after the job runner has handed its jobs back: waiting for a render
    (the executor's own shutdown, and its exit hook, join the running call) kept a stopping
    worker alive for as long as a 300-page PDF takes, past any orchestrator's grace period.
    """
    global _pool
    with _lock:
        pool, _pool = _pool, None
    if pool is None:
        return
    # ProcessPoolExecutor.terminate_workers() arrives in Python 3.14; until then its process map.
    processes = list((pool._processes or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
    for process in processes:
        process.join()
