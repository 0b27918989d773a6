"""The Jinja environment of the pages (templates/, the static files' versioned URLs, the
filters) and `render`, which turns a template and its values into the page's response."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

import jinja2
from fastapi import Request
from starlette.responses import HTMLResponse

from solarapi.dashboard.chart import format_energy
from solarapi.dashboard.cookies import form_token, keep_presession_cookie
from solarapi.dashboard.responses import with_security_headers
from solarapi.dashboard.sessions import WebUser
from solarapi.kit.timefmt import as_utc, parse_timestamp

_HERE = Path(__file__).parent
STATIC_DIR = _HERE / "static"


def _asset_versions() -> dict[str, str]:
    # Content hashes in asset URLs let browsers cache the files forever and still see changes.
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()[:12]
        for path in STATIC_DIR.iterdir()
        if path.is_file()
    }


ASSET_VERSIONS = _asset_versions()


def asset_url(name: str) -> str:
    return f"/static/{name}?v={ASSET_VERSIONS[name]}"


def _when(value: datetime | str | None, empty: str = "never") -> str:
    if value is None:
        return empty
    if isinstance(value, str):  # an API timestamp ("…Z")
        value = parse_timestamp(value)
    return as_utc(value).strftime("%Y-%m-%d %H:%M UTC")


def _number(value: float | None, decimals: int = 0) -> str:
    if value is None:
        return "–"
    return f"{value:,.{decimals}f}"


templates = jinja2.Environment(
    loader=jinja2.FileSystemLoader(_HERE / "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
templates.globals["asset_url"] = asset_url
templates.globals["format_energy"] = format_energy
templates.filters["when"] = _when
templates.filters["number"] = _number


def render(
    request: Request,
    template: str,
    context: Mapping[str, object] | None = None,
    *,
    status_code: int = 200,
    user: WebUser | None = None,
) -> HTMLResponse:
    full: dict[str, object] = {
        "user": user,
        "path": request.url.path,
        "csrf": form_token(request, user),
        "request_id": request.scope.get("state", {}).get("request_id", ""),
        "base_url": str(request.base_url).rstrip("/"),
    }
    full.update(context or {})
    html = templates.get_template(template).render(full)
    response = HTMLResponse(html, status_code=status_code)
    keep_presession_cookie(request, response, user)
    with_security_headers(response)
    return response
