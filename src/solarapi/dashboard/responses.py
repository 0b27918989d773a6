"""What every dashboard response carries (security headers, no caching of private pages),
and the redirect after a form."""

from __future__ import annotations

from starlette.responses import RedirectResponse, Response

# No inline script or style anywhere: every script and stylesheet is a file of this server.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
SECURITY_HEADERS: dict[str, str] = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=()",
}


def with_security_headers(response: Response, *, private: bool = True) -> Response:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    if private:
        # Pages show account data (and once, a key): never store them in any cache.
        response.headers.setdefault("Cache-Control", "no-store")
    return response


def redirect(url: str) -> RedirectResponse:
    response = RedirectResponse(url, status_code=303)
    with_security_headers(response)
    return response
