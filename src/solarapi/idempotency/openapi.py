"""How the Idempotency-Key header appears in the OpenAPI document (on every POST)."""

from __future__ import annotations

from typing import Any

IDEMPOTENCY_PARAMETER: dict[str, Any] = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "1–255 printable ASCII characters, unique per intended operation (a UUID "
    "is ideal). A repeat with the same key, method, path and body within 24 hours returns the "
    "first response again with `Idempotent-Replayed: true`; the same key with a different "
    "request, or while the first is still running, answers 409 `conflict`. Keys are scoped to "
    "the API key (on `POST /ingest/readings`, to the ingest token). Responses with status 500 "
    "or above are not kept, so a retry runs again.",
    # Printable ASCII; first and last not a space, as HTTP strips those from a header value.
    "schema": {
        "type": "string",
        "minLength": 1,
        "maxLength": 255,
        "pattern": "^[!-~](?:[ -~]*[!-~])?$",
    },
}


def document_idempotency(operation: dict[str, Any]) -> None:
    operation.setdefault("parameters", []).append(dict(IDEMPOTENCY_PARAMETER))
    operation["responses"].setdefault(
        "409",
        {
            "description": "Conflict (`conflict`), including an Idempotency-Key reused with a "
            "different request or still in flight",
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        },
    )
