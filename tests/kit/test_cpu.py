"""The CPU process (`kit.cpu`) dies with the process that started it, even one killed outright,
and `cpu.stop()` ends it at once even while it runs something that would never finish."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

# A parent that starts the CPU process, prints its pid, then waits to be killed.
PARENT = """
import asyncio, os, sys, threading
from solarapi.kit import cpu
print(asyncio.run(cpu.run_in_process(os.getpid)), flush=True)
threading.Event().wait()
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"  # a zombie has exited; only its parent (or init) has not reaped it yet


def test_the_cpu_process_exits_when_its_parent_is_killed() -> None:
    with subprocess.Popen(
        [sys.executable, "-c", PARENT], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as parent:
        try:
            assert parent.stdout is not None
            assert parent.stderr is not None
            line = parent.stdout.readline()
            assert line, parent.stderr.read().decode()
            worker = int(line)
            assert worker != parent.pid
            assert _alive(worker)
            os.kill(parent.pid, signal.SIGKILL)
            parent.wait()
            # Polled with a deadline (the check runs once a second; a loaded machine is slower).
            deadline = time.monotonic() + 60
            while _alive(worker) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not _alive(worker), f"CPU process {worker} outlived its killed parent"
        finally:
            if parent.poll() is None:
                parent.kill()
                parent.wait()


def _announce_and_wait(parent_pid: int) -> None:
    """Runs in the CPU process: tell the parent the call has started, then never return."""
    os.kill(parent_pid, signal.SIGUSR1)
    signal.pause()


# A parent that keeps the CPU process busy with a call that never returns, then stops it.
BUSY_PARENT = """
import asyncio, os, signal
from solarapi.kit import cpu
from tests.kit.test_cpu import _announce_and_wait

async def main():
    print(await cpu.run_in_process(os.getpid), flush=True)
    started = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, started.set)
    busy = asyncio.ensure_future(cpu.run_in_process(_announce_and_wait, os.getpid()))
    await started.wait()
    cpu.stop()
    busy.cancel()

asyncio.run(main())
print("stopped", flush=True)
"""


def test_stop_ends_the_cpu_process_while_it_runs_a_call() -> None:
    with subprocess.Popen(
        [sys.executable, "-c", BUSY_PARENT], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as parent:
        try:
            assert parent.stdout is not None
            assert parent.stderr is not None
            worker = int(parent.stdout.readline() or 0)
            assert worker, parent.stderr.read().decode()
            # A hang guard, not a timing assertion: without stop() the parent's exit would
            # wait for signal.pause() forever.
            try:
                parent.wait(timeout=120)
            except subprocess.TimeoutExpired:
                raise AssertionError(
                    "the parent never exited: stop() waited for the call"
                ) from None
            assert parent.returncode == 0, parent.stderr.read().decode()
            assert parent.stdout.read().strip() == b"stopped"
            assert not _alive(worker)
        finally:
            if parent.poll() is None:
                parent.kill()
                parent.wait()
