"""The app a `solarapi serve` worker builds has the sandbox model imported and run once, so
the first sandbox request does not wait seconds for pvlib (it did: 2.75 s) — unless
`SOLARAPI_WARM_START=false` asks it to load on first use."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from solarapi.config import Settings
from tests.support import TEST_SECRET, settings_env

# The sources this test runs (a worktree's, on PYTHONPATH, over the installed ones).
_SOURCES = {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}


def _settings(data_dir: Path) -> Settings:
    return Settings(data_dir=data_dir, secret_key=TEST_SECRET, job_runner="external")


_PROBE = """
import sys
from solarapi.app import serve_app
assert "pvlib" not in sys.modules
serve_app()
print("pvlib" in sys.modules, end=" ")
from solarapi.sandbox import model
print(len(model._months))
"""


@pytest.mark.parametrize("warm", ["true", "false"])
def test_serve_app_warms_the_sandbox_model_unless_told_not_to(tmp_path: Path, warm: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", _PROBE],
        env=settings_env(_settings(tmp_path), SOLARAPI_WARM_START=warm, PATH="/usr/bin:/bin"),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    imported, cached_months = result.stdout.split()
    assert imported == ("True" if warm == "true" else "False")
    assert (int(cached_months) > 0) == (warm == "true")


_FREEZE_PROBE = """
import asyncio
import gc
import sys
from solarapi.app import serve_app
before = gc.get_freeze_count()
app = serve_app()

async def main():
    async with app.router.lifespan_context(app):
        tracked = {id(o) for o in gc.get_objects()}
        unfrozen = [name for name, m in list(sys.modules.items()) if id(vars(m)) in tracked]
        print(before, gc.get_freeze_count(), "matplotlib" in sys.modules, len(unfrozen))

asyncio.run(main())
"""


def test_serve_app_freezes_what_start_up_left_alive(tmp_path: Path) -> None:
    """A worker's start-up objects are frozen, so full collections do not walk them while
    requests wait (the p99 of uncached reads was the collector) — including what the
    lifespan's start-up imports after `serve_app` returned: the inline job runner's handlers
    (matplotlib, reportlab, PIL: ~50k objects, ~400 modules), which stayed in the
    collector's reach when the freeze came before them."""
    result = subprocess.run(
        [sys.executable, "-c", _FREEZE_PROBE],
        env=settings_env(
            _settings(tmp_path),
            SOLARAPI_WARM_START="false",
            SOLARAPI_JOB_RUNNER="inline",
            PATH="/usr/bin:/bin",
            **_SOURCES,
        ),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    before, after, handlers_imported, unfrozen_modules = result.stdout.split()
    assert int(before) == 0
    assert int(after) > 10_000
    assert handlers_imported == "True"  # imported by the lifespan, the case that matters
    assert int(unfrozen_modules) == 0


_MALLOC_PROBE = """
import ctypes

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
from solarapi.app import serve_app
serve_app()
mapped = libc.mallinfo2().hblks
block = bytearray(8 * 2**20)  # over glibc's default threshold, under the worker's
print(libc.mallinfo2().hblks - mapped)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc thresholds")
@pytest.mark.parametrize(
    ("operator_env", "mapped"), [({}, 0), ({"MALLOC_MMAP_THRESHOLD_": "131072"}, 1)]
)
def test_serve_app_keeps_large_blocks_on_the_heap(
    tmp_path: Path, operator_env: dict[str, str], mapped: int
) -> None:
    """A worker's blocks of megabytes (a portfolio body and its pieces) come from malloc's
    heap, kept between requests, not mapped and unmapped each time (a page fault per 4 KiB
    again on every request) — unless the operator set glibc's own variables, which win."""
    result = subprocess.run(
        [sys.executable, "-c", _MALLOC_PROBE],
        env=settings_env(
            _settings(tmp_path),
            SOLARAPI_WARM_START="false",
            PATH="/usr/bin:/bin",
            **_SOURCES,
            **operator_env,
        ),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) == mapped
