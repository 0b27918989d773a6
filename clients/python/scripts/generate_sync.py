"""Generate the SDK's synchronous clients (`_sync.py`) from the asynchronous ones (`_async.py`).

    python clients/python/scripts/generate_sync.py          # (re)write _sync.py
    python clients/python/scripts/generate_sync.py --check  # exit 1, with a diff, if stale

`make sdk-sync` runs the first. unasync (a development dependency) removes `async` and
`await` and renames tokens; ruff then sorts the imports and formats the result, so the
generated file reads like the rest of the package. Only `_async.py` is edited by hand.
"""

from __future__ import annotations

import argparse
import difflib
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import unasync

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "clients" / "python" / "src" / "solarapi_client"
SOURCE = PACKAGE / "_async.py"
TARGET = PACKAGE / "_sync.py"
HEADER = (
    "# Generated from _async.py by clients/python/scripts/generate_sync.py (make sdk-sync).\n"
    "# Do not edit: change _async.py and generate again.\n"
)
# A class of `_async.py` named `AsyncFoo` is `Foo` in the sync code (Client, IngestClient,
# Systems, ChangeFeed, …), except these, which keep unasync's `SyncFoo`: the name the package
# has always exported.
KEEP_SYNC_PREFIX = frozenset({"AsyncPager"})


def replacements(source: str) -> dict[str, str]:
    """Tokens renamed beyond unasync's own (`__aenter__`, `AsyncIterator`, `AsyncFoo` →
    `SyncFoo`, …): the classes defined here, `aclose`, and `asyncio` (the default sleep)."""
    classes = re.findall(r"^class (Async[A-Z]\w*)", source, re.MULTILINE)
    renamed = {name: name.removeprefix("Async") for name in classes if name not in KEEP_SYNC_PREFIX}
    return {**renamed, "aclose": "close", "asyncio": "time"}


def _ruff(args: list[str], text: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", *args, "--stdin-filename", str(TARGET), "-"],
        input=text,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"ruff {' '.join(args)} failed on the generated code:\n{done.stderr}")
    return done.stdout


def generate() -> str:
    """The text `_sync.py` must have."""
    source = SOURCE.read_text()
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / SOURCE.name
        copy.write_text(source)
        rule = unasync.Rule(SOURCE.name, TARGET.name, additional_replacements=replacements(source))
        unasync.unasync_files([str(copy)], [rule])
        text = (Path(folder) / TARGET.name).read_text()
    text = _ruff(["check", "--quiet", "--select", "I", "--fix", "--exit-zero"], HEADER + text)
    return _ruff(["format", "--quiet"], text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 if stale")
    check = parser.parse_args().check
    expected = generate()
    current = TARGET.read_text() if TARGET.exists() else ""
    if current == expected:
        print(f"{TARGET.relative_to(ROOT)} is up to date")
        return 0
    if check:
        diff = difflib.unified_diff(
            current.splitlines(keepends=True),
            expected.splitlines(keepends=True),
            "_sync.py (committed)",
            "_sync.py (generated)",
        )
        sys.stdout.writelines(diff)
        return 1
    TARGET.write_text(expected)
    print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
