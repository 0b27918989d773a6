"""Operator metrics (Prometheus). Off unless `SOLARAPI_METRICS_PORT` is set.

This module is light on purpose: `recorder_for` is what the areas call, and it imports
`prometheus_client` only when metrics are on. `solarapi serve` prepares the multiprocess
directory (`prepare_multiprocess_dir`) before any worker imports `prometheus_client`, which
reads `PROMETHEUS_MULTIPROC_DIR` once, at import.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from solarapi.config import Settings

if TYPE_CHECKING:
    from solarapi.metrics.recorder import Recorder

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def recorder_for(settings: Settings) -> Recorder | None:
    """The process's recorder when metrics are on, else None (and nothing is recorded)."""
    if settings.metrics_port is None:
        return None
    # prometheus_client costs ~90 ms to import (-X importtime); without metrics it is skipped.
    from solarapi.metrics.recorder import RECORDER

    return RECORDER


def prepare_multiprocess_dir() -> Path:
    """The directory where every worker process writes its metric values, empty.

    An operator's `PROMETHEUS_MULTIPROC_DIR` is used (and its old `*.db` files removed: values
    of processes of an earlier run would otherwise be added in); without one, a private
    temporary directory is made and removed when the server exits. Set in the environment, so
    the workers `serve` starts inherit it.
    """
    configured = os.environ.get(MULTIPROC_ENV)
    if configured:
        directory = Path(configured)
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("*.db"):
            stale.unlink(missing_ok=True)
        return directory
    directory = Path(tempfile.mkdtemp(prefix="solarapi-metrics-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    os.environ[MULTIPROC_ENV] = str(directory)
    return directory
