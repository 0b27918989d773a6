"""The contract's version: the `Api-Version` header of every answer, `/health`'s
`api_version` and the OpenAPI document's `info.version`."""

from __future__ import annotations

API_VERSION = "1.0"
