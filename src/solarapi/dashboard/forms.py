"""Reading what a browser sends: POSTed forms and file uploads (after the CSRF and origin
checks every dashboard POST passes), and the few values pages take from the address."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

from fastapi import Request

from solarapi.dashboard.cookies import secret_key, submitted_binding
from solarapi.dashboard.csrf import csrf_valid, session_binding
from solarapi.dashboard.errors import CsrfRejected, PageError
from solarapi.dashboard.sessions import WebUser
from solarapi.kit.plans import Environment
from solarapi.kit.text import NUL_MESSAGE

MAX_FORM_BYTES = 64 * 1024
MAX_UPLOAD_BYTES = 10 * 1024 * 1024


async def read_form(request: Request, user: WebUser | None) -> dict[str, str]:
    """The POSTed form, after the CSRF and origin checks. Every dashboard POST goes here."""
    content_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if content_type != "application/x-www-form-urlencoded":
        raise PageError(415, "Unsupported form", "Forms must be sent as ordinary HTML forms.")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise PageError(413, "Too much data", "This form sent more data than forms here use.")
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError:
        raise PageError(400, "That request did not work", "The form was not UTF-8.") from None
    form: dict[str, str] = {}
    for name, value in pairs:
        if "\x00" in name or "\x00" in value:
            raise PageError(400, "That request did not work", f"Form fields: {NUL_MESSAGE}.")
        form.setdefault(name, value)
    _check_origin(request)
    if not csrf_valid(secret_key(request), submitted_binding(request, user), form.get("csrf")):
        raise CsrfRejected
    return form


async def read_upload(request: Request, user: WebUser, field: str) -> tuple[dict[str, str], bytes]:
    """A POSTed file form (multipart, one file in `field`, at most 10 MiB) after the same
    CSRF and origin checks as `read_form`: its text fields and the file's bytes."""
    content_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if content_type != "multipart/form-data":
        raise PageError(415, "Unsupported form", "Files must be sent from the page's form.")
    length = request.headers.get("content-length", "")
    if not length.isdigit():
        raise PageError(411, "That request did not work", "The upload must state its length.")
    if int(length) > MAX_UPLOAD_BYTES:
        raise PageError(
            413,
            "Too much data",
            f"The file is larger than {MAX_UPLOAD_BYTES // 2**20} MiB; split it into several "
            "files or use `solarapi readings import`.",
        )
    _check_origin(request)
    async with request.form(max_files=1, max_fields=8) as posted:
        fields: dict[str, str] = {}
        data = b""
        for name, value in posted.multi_items():
            if isinstance(value, str):
                if "\x00" in name or "\x00" in value:
                    raise PageError(
                        400, "That request did not work", f"Form fields: {NUL_MESSAGE}."
                    )
                fields.setdefault(name, value)
            elif name == field:
                data = await value.read()
    if not csrf_valid(secret_key(request), session_binding(user.session_id), fields.get("csrf")):
        raise CsrfRejected
    return fields, data


def _check_origin(request: Request) -> None:
    # Defence in depth beside the token: browsers send Origin on cross-site POSTs.
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        if origin == "null":
            raise CsrfRejected
        return
    host = request.headers.get("host", "")
    if urlsplit(origin).netloc.lower() != host.lower():
        raise CsrfRejected


def safe_next(target: str | None) -> str:
    """A same-site path to go to after log-in; anything else (open redirects) → overview."""
    if not target or not target.startswith("/") or target.startswith(("//", "/\\")):
        return "/overview"
    if target.startswith("/api/") or "\\" in target or any(ord(c) < 32 for c in target):
        return "/overview"
    return target


def environment_of(text: str | None) -> Environment:
    """The environment a page or form names (`env=test` or `environment=test`): live unless
    it says test."""
    return Environment.TEST if text == "test" else Environment.LIVE
