"""`make run` as the README tells a reader to use it when port 8000 is taken: `make run
PORT=…` migrates, creates the demo accounts and serves on that port, prints that address, and
the demo's keys work there; a `PORT` in the environment is not make's."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.support import ROOT, SERVER_START_SECONDS, free_port

pytestmark = pytest.mark.slow

# `make run` creates the demo's year of readings for six systems before it serves.
DEMO_SECONDS = 180


def test_make_run_serves_on_the_port_given_on_the_command_line(tmp_path: Path) -> None:
    port = free_port()
    data = tmp_path / "data"
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("SOLARAPI_") and name != "MAKEFLAGS"
    }
    env |= {
        "SOLARAPI_DATA_DIR": str(data),
        "SOLARAPI_DATABASE_URL": f"sqlite:///{data / 'solar.db'}",
        "SOLARAPI_WARM_START": "false",
        "PORT": str(free_port()),  # another program's setting: make run must not take it
    }
    log = tmp_path / "make-run.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["make", "--no-print-directory", "run", f"PORT={port}"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # make and the server it starts: one group to stop
        )
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + DEMO_SECONDS + SERVER_START_SECONDS
            while True:
                assert process.poll() is None, log.read_text()
                try:
                    health = httpx.get(f"{base}/api/v1/health", timeout=5)
                    break
                except httpx.HTTPError:
                    assert time.monotonic() < deadline, log.read_text()
                    time.sleep(0.2)
            assert health.json()["status"] == "ok"
            printed = log.read_text()
            assert f"Dashboard: http://127.0.0.1:{port}/ " in printed
            assert f"API docs:  http://127.0.0.1:{port}/api/v1/docs" in printed
            assert "http://127.0.0.1:8000" not in printed
            # The key the README tells the reader to try: the Pro account's sandbox key.
            found = re.search(r"^  pro .*\n.*\n\s+test: (pk_test_\w+)$", printed, re.MULTILINE)
            assert found is not None, printed
            account = httpx.get(
                f"{base}/api/v1/account",
                headers={"Authorization": f"Bearer {found.group(1)}"},
                timeout=30,
            )
            assert account.status_code == 200, account.text
            assert (account.json()["plan"], account.json()["environment"]) == ("pro", "test")
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
