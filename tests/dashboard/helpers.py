"""Driving the dashboard over HTTP like a browser would: cookies, CSRF tokens, forms."""

from __future__ import annotations

import html
import re
import uuid

import httpx
from fastapi import FastAPI

from tests.support import client_for

_CSRF = re.compile(r'name="csrf" value="([^"]+)"')
_NONCE = re.compile(r'name="nonce" value="([^"]+)"')


def browser_for(app: FastAPI, ip: str | None = None, https: bool = False) -> httpx.AsyncClient:
    """A cookie-keeping client on the ASGI app, without an API key, from its own IP."""
    client = client_for(app, ip=ip)
    if https:
        client.base_url = httpx.URL("https://testserver")
    return client


def csrf_of(page: httpx.Response) -> str:
    match = _CSRF.search(page.text)
    assert match, f"no CSRF token on {page.url}"
    return match.group(1)


def nonce_of(page: httpx.Response) -> str:
    match = _NONCE.search(page.text)
    assert match, f"no form nonce on {page.url}"
    return match.group(1)


def text_of(page: httpx.Response) -> str:
    return html.unescape(page.text)


def new_email() -> str:
    return f"d-{uuid.uuid4().hex[:12]}@example.com"


async def sign_up(
    client: httpx.AsyncClient,
    email: str,
    password: str = "correct horse battery",
    name: str = "Dashboard Test",
) -> httpx.Response:
    form = await client.get("/signup")
    return await client.post(
        "/signup",
        data={"csrf": csrf_of(form), "name": name, "email": email, "password": password},
    )


async def log_in(
    client: httpx.AsyncClient, email: str, password: str, next_url: str = ""
) -> httpx.Response:
    form = await client.get("/login")
    return await client.post(
        "/login",
        data={"csrf": csrf_of(form), "email": email, "password": password, "next": next_url},
    )


async def create_key(
    client: httpx.AsyncClient, name: str, environment: str = "live"
) -> httpx.Response:
    page = await client.get("/settings/api")
    return await client.post(
        "/settings/api/keys",
        data={
            "csrf": csrf_of(page),
            "nonce": nonce_of(page),
            "name": name,
            "environment": environment,
        },
    )
