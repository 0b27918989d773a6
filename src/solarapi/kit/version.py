"""The contract's version: the `Api-Version` header of every answer, `/health`'s
`api_version` and the OpenAPI document's `info.version`."""

from __future__ import annotations

import functools
from importlib.metadata import version

API_VERSION = "1.0"


@functools.cache
def package_version() -> str:
    """The installed package's version (`pyproject.toml`), as `/health` and `--version` show
    it. Cached: importlib.metadata scans the installed distributions on every call."""
    return version("solarapi")
