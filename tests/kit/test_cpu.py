"""The CPU process (`kit.cpu`) dies with the process that started it, even one killed outright."""

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
