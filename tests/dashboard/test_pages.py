"""Security headers, HTML error pages, no inline script, on both databases."""

from __future__ import annotations

import re

import httpx
from fastapi import FastAPI

from tests.dashboard.helpers import browser_for, log_in
from tests.support import Tenant

PAGES = ["/overview", "/overview?env=test", "/usage", "/settings/api", "/settings/plan"]
_INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.I)
_INLINE_HANDLER = re.compile(r"\son[a-z]+\s*=", re.I)
_STYLE_ATTR = re.compile(r"\sstyle\s*=", re.I)


def _assert_security_headers(response: httpx.Response) -> None:
    csp = response.headers["content-security-policy"]
    assert "default-src 'self'" in csp
    assert "script-src 'self'" in csp
    assert "unsafe-inline" not in csp
    assert "frame-ancestors 'none'" in csp
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "same-origin"


async def test_every_page_has_the_headers_and_no_inline_script(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with browser_for(app) as client:
        for path in ("/login", "/signup"):
            response = await client.get(path)
            assert response.status_code == 200
            _assert_security_headers(response)
        await log_in(client, enterprise.email, enterprise.password)
        for path in PAGES:
            response = await client.get(path)
            assert response.status_code == 200, path
            _assert_security_headers(response)
            head = await client.head(path)  # what an uptime monitor asks
            assert head.status_code == 200, path
            _assert_security_headers(head)
            assert response.headers["cache-control"] == "no-store"
            assert not _INLINE_SCRIPT.search(response.text), path
            assert not _INLINE_HANDLER.search(response.text), path
            assert not _STYLE_ATTR.search(response.text), path
            # No asset from outside the server.
            assert not re.search(r'(src|href)="(https?:)?//', response.text), path


async def test_static_assets_are_served_with_headers_and_long_caching(app: FastAPI) -> None:
    async with browser_for(app) as client:
        page = await client.get("/login")
        assets = re.findall(r'(?:src|href)="(/static/[^"]+)"', page.text)
        assert len(assets) == 3
        for url in assets:
            response = await client.get(url)
            assert response.status_code == 200
            assert "immutable" in response.headers["cache-control"]
            _assert_security_headers(response)
            head = await client.head(url)  # RFC 9110: a GET resource answers HEAD too
            assert head.status_code == 200
            assert head.headers["content-type"] == response.headers["content-type"]
        assert (await client.get("/static/../router.py")).status_code == 404
        assert (await client.get("/static/nothing.js")).status_code == 404


async def test_every_page_links_the_favicon_and_it_is_served(app: FastAPI) -> None:
    async with browser_for(app) as client:
        for path in ("/login", "/signup", "/no/such/page"):
            page = await client.get(path)
            links = re.findall(r'<link rel="icon" type="image/svg\+xml" href="([^"]+)">', page.text)
            assert len(links) == 1, path
            icon = await client.get(links[0])
            assert icon.status_code == 200
            assert icon.headers["content-type"] == "image/svg+xml"
            assert icon.content.startswith(b"<svg ")
        # Browsers also ask for /favicon.ico by themselves: the same icon, not a 404.
        fallback = await client.get("/favicon.ico")
        assert fallback.status_code == 200
        assert fallback.headers["content-type"] == "image/svg+xml"
        assert fallback.content == icon.content
        _assert_security_headers(fallback)


async def test_unknown_pages_are_html_but_the_api_keeps_json(app: FastAPI) -> None:
    async with browser_for(app) as client:
        page = await client.get("/no/such/page")
        assert page.status_code == 404
        assert page.headers["content-type"].startswith("text/html")
        assert "Page not found" in page.text
        assert 'href="/static/dashboard.css' in page.text  # the same look as every page
        _assert_security_headers(page)
        wrong_method = await client.delete("/settings/plan")
        assert wrong_method.status_code == 405
        assert wrong_method.headers["content-type"].startswith("text/html")
        api = await client.get("/api/v1/no/such/endpoint")
        assert api.status_code == 404
        assert api.json() == {
            "error": "No such endpoint: /api/v1/no/such/endpoint",
            "code": "not_found",
        }


async def test_pages_need_a_session(app: FastAPI) -> None:
    async with browser_for(app) as client:
        for path in PAGES:
            response = await client.get(path)
            assert response.status_code == 303, path
            assert response.headers["location"].startswith("/login?next=")
        home = await client.get("/")
        assert home.headers["location"] == "/login"


async def test_a_logged_in_person_keeps_their_navigation_on_a_404(
    app: FastAPI, pro: Tenant
) -> None:
    async with browser_for(app) as client:
        await log_in(client, pro.email, pro.password)
        page = await client.get("/no/such/page")
    assert page.status_code == 404
    assert "Log out" in page.text
    assert 'href="/settings/api"' in page.text
