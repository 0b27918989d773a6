"""Imported by a `solarapi worker --handlers tests.reports.slow_render` subprocess: rendering
creates the file REPORT_RENDER_STARTED (when set) and waits REPORT_RENDER_DELAY seconds first,
so a test can kill the worker mid-report. The file is produced in a thread of the worker itself
(not its CPU process), so killing the worker kills the rendering too, and the slowed `render` is
the one that runs."""

from __future__ import annotations

import os
import time
from pathlib import Path

from solarapi.reports import jobs
from tests.reports.helpers import in_thread

_real_render = jobs.render


def _slow_render(*args: object) -> None:
    if started := os.environ.get("REPORT_RENDER_STARTED"):
        Path(started).touch()
    time.sleep(float(os.environ.get("REPORT_RENDER_DELAY", "0")))
    _real_render(*args)  # type: ignore[arg-type]


jobs.render = _slow_render  # type: ignore[assignment]
jobs.run_in_process = in_thread
