"""The request id: the client's `X-Request-ID` when it is a sane token, else a new one."""

from __future__ import annotations

import re

from solarapi.kit.ids import new_id

_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")


def request_id(incoming: str | None) -> str:
    return incoming if incoming and _REQUEST_ID.fullmatch(incoming) else new_id("req")
