"""The synchronous clients are generated from the asynchronous ones: the committed `_sync.py`
is exactly what `make sdk-sync` (clients/python/scripts/generate_sync.py) writes from
`_async.py`, so the two cannot drift apart."""

from __future__ import annotations

import ast
import importlib.util
from types import ModuleType

from tests.support import ROOT

SCRIPT = ROOT / "clients" / "python" / "scripts" / "generate_sync.py"
SYNC = ROOT / "clients" / "python" / "src" / "solarapi_client" / "_sync.py"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("generate_sync", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_sync_client_is_what_the_generator_writes() -> None:
    generated: str = _generator().generate()
    # The generator did its work (a broken one writing nothing would pass the comparison
    # only if the committed file were empty too).
    assert "class Client(_Connection):" in generated
    assert "class IngestClient(_Connection):" in generated
    assert "class SyncPager(Generic[H]):" in generated
    asynchronous = (ast.AsyncFunctionDef, ast.Await, ast.AsyncFor, ast.AsyncWith)
    assert not [node for node in ast.walk(ast.parse(generated)) if isinstance(node, asynchronous)]
    assert SYNC.read_text() == generated, (
        "_sync.py differs from what clients/python/scripts/generate_sync.py makes of _async.py: "
        "change _async.py only, then run `make sdk-sync`"
    )


def test_each_async_class_has_its_sync_name() -> None:
    names = _generator().replacements(
        "class AsyncClient:\nclass AsyncPager:\nclass AsyncReports:\n"
    )
    assert names["AsyncClient"] == "Client"
    assert names["AsyncReports"] == "Reports"
    assert "AsyncPager" not in names  # unasync's own rule: SyncPager, the exported name
