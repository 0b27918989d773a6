"""Dashboard pages: HTTP only (forms in, HTML out). The rules live in service.py and in the
services the API shares."""

from __future__ import annotations

import secrets

from fastapi import APIRouter, Request
from starlette.responses import Response

from solarapi.auth.principal import Caller
from solarapi.dashboard import service
from solarapi.dashboard.cookies import clear_session_cookie, set_session_cookie
from solarapi.dashboard.dependencies import OptionalUserDep, ThrottleDep, UserDep, client_ip
from solarapi.dashboard.errors import DashboardRoute, FormRejected, PageError
from solarapi.dashboard.forms import environment_of, read_form, safe_next
from solarapi.dashboard.rendering import ASSET_VERSIONS, STATIC_DIR, render
from solarapi.dashboard.reports_pages import router as reports_pages
from solarapi.dashboard.responses import redirect, with_security_headers
from solarapi.dashboard.sessions import claim_form_nonce, end_session
from solarapi.dashboard.systems_pages import router as systems_pages
from solarapi.db import SessionDep
from solarapi.kit.plans import PLAN_DESCRIPTIONS, PLAN_LIMITS, Environment, Plan
from solarapi.kit.timefmt import utcnow
from solarapi.portfolio import service as portfolio_service
from solarapi.state import ClockDep, LimiterDep, SettingsDep, settings_of

router = APIRouter(include_in_schema=False, route_class=DashboardRoute)
# Systems: add, edit, delete, upload, and the system page with its chart.
router.include_router(systems_pages)
# Reports (Enterprise): request, list, download.
router.include_router(reports_pages)

_NOTICES = {
    "revoked": "The key was revoked. Requests with it are refused from now on.",
    "already-created": "That form was already sent, so no second key was created. The full "
    "key is shown only once; if you did not copy it, revoke it and create a new one.",
    "logged-out": "You are logged out.",
    "deleted": "The system and its readings were deleted.",
}
_CONTENT_TYPES = {
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}


def _notice(request: Request) -> str | None:
    return _NOTICES.get(request.query_params.get("notice", ""))


@router.get("/static/{name}")
async def static_file(name: str) -> Response:
    # Only the files that ship in static/ (no path traversal possible: names are whitelisted).
    if name not in ASSET_VERSIONS:
        raise PageError(404, "Page not found", "There is no such file.")
    return _static_response(name, "public, max-age=31536000, immutable")


@router.get("/favicon.ico")
async def favicon() -> Response:
    # Browsers ask for /favicon.ico on their own (for the API's JSON answers, for instance);
    # the pages link the versioned SVG. Same icon, not immutable: its URL carries no hash.
    return _static_response("favicon.svg", "public, max-age=86400")


def _static_response(name: str, cache_control: str) -> Response:
    path = STATIC_DIR / name
    response = Response(
        path.read_bytes(),
        media_type=_CONTENT_TYPES.get(path.suffix, "application/octet-stream"),
        headers={"Cache-Control": cache_control},
    )
    return with_security_headers(response, private=False)


@router.get("/")
async def home(user: OptionalUserDep) -> Response:
    return redirect("/overview" if user else "/login")


# --- sign-up, log-in, log-out ---------------------------------------------------------------


@router.get("/signup")
async def signup_page(request: Request, user: OptionalUserDep) -> Response:
    if user is not None:
        return redirect("/overview")
    return render(request, "signup.html", {"form": {"name": "", "email": ""}, "error": None})


@router.post("/signup")
async def signup(
    request: Request,
    session: SessionDep,
    user: OptionalUserDep,
    settings: SettingsDep,
    throttle: ThrottleDep,
) -> Response:
    if user is not None:
        return redirect("/overview")
    form = await read_form(request, None)
    try:
        token = await service.sign_up(
            session,
            throttle,
            name=form.get("name", ""),
            email=form.get("email", ""),
            password=form.get("password", ""),
            plan=settings.signup_plan,
            ip=client_ip(request),
            secret=settings.effective_secret_key,
            now=utcnow(),
        )
    except FormRejected as exc:
        values = {"name": form.get("name", ""), "email": form.get("email", "")}
        return render(
            request,
            "signup.html",
            {"form": values, "error": exc.message},
            status_code=exc.status_code,
        )
    response = redirect("/overview")
    set_session_cookie(request, response, token)
    return response


@router.get("/login")
async def login_page(request: Request, user: OptionalUserDep) -> Response:
    next_url = safe_next(request.query_params.get("next"))
    if user is not None:
        return redirect(next_url)
    return render(
        request,
        "login.html",
        {"email": "", "error": None, "next": next_url, "notice": _notice(request)},
    )


@router.post("/login")
async def login(
    request: Request,
    session: SessionDep,
    user: OptionalUserDep,
    settings: SettingsDep,
    throttle: ThrottleDep,
) -> Response:
    form = await read_form(request, None)
    next_url = safe_next(form.get("next"))
    try:
        token = await service.log_in(
            session,
            throttle,
            email=form.get("email", ""),
            password=form.get("password", ""),
            ip=client_ip(request),
            secret=settings.effective_secret_key,
            now=utcnow(),
        )
    except FormRejected as exc:
        return render(
            request,
            "login.html",
            {
                "email": form.get("email", ""),
                "error": exc.message,
                "next": next_url,
                "notice": None,
            },
            status_code=exc.status_code,
        )
    if user is not None:
        # Logging in as someone else replaces the current session.
        await end_session(session, user.session_id)
    response = redirect(next_url)
    set_session_cookie(request, response, token)
    return response


@router.post("/logout")
async def logout(request: Request, session: SessionDep, user: OptionalUserDep) -> Response:
    if user is not None:
        await read_form(request, user)
        await end_session(session, user.session_id)
    response = redirect("/login?notice=logged-out")
    clear_session_cookie(request, response)
    return response


# --- Settings → API -------------------------------------------------------------------------


@router.get("/settings/api")
async def api_keys_page(request: Request, session: SessionDep, user: UserDep) -> Response:
    return await _render_keys(request, session, user, error=None, status_code=200)


async def _render_keys(
    request: Request,
    session: SessionDep,
    user: UserDep,
    *,
    error: str | None,
    status_code: int,
    name: str = "",
) -> Response:
    keys = await service.account_keys(session, user.account_id)
    return render(
        request,
        "api_keys.html",
        {
            "keys": keys,
            "can_create": service.can_create_keys(user.plan),
            "starter_message": service.STARTER_NO_KEYS,
            "nonce": secrets.token_urlsafe(16),
            "notice": _notice(request),
            "error": error,
            "name": name,
        },
        status_code=status_code,
        user=user,
    )


@router.post("/settings/api/keys")
async def create_api_key(request: Request, session: SessionDep, user: UserDep) -> Response:
    form = await read_form(request, user)
    nonce = form.get("nonce", "")[:64]
    if not service.can_create_keys(user.plan):
        return await _render_keys(
            request, session, user, error=service.STARTER_NO_KEYS, status_code=403
        )
    if nonce and not await claim_form_nonce(session, session_id=user.session_id, nonce=nonce):
        return redirect("/settings/api?notice=already-created")
    try:
        record, new = await service.issue_key(
            session,
            user,
            name=form.get("name", ""),
            environment=_key_environment(form.get("environment", "")),
            secret=settings_of(request).effective_secret_key,
            ip=client_ip(request),
            now=utcnow(),
        )
    except FormRejected as exc:
        return await _render_keys(
            request,
            session,
            user,
            error=exc.message,
            status_code=exc.status_code,
            name=form.get("name", ""),
        )
    return render(request, "key_created.html", {"record": record, "key": new.key}, user=user)


def _key_environment(text: str) -> Environment:
    try:
        return Environment(text)
    except ValueError:
        raise FormRejected("Choose live or test for the key's environment.") from None


@router.get("/settings/api/keys/{key_id}/revoke")
async def revoke_confirm(
    request: Request, key_id: str, session: SessionDep, user: UserDep
) -> Response:
    key = await service.find_own_key(session, user, key_id)
    if key is None:
        raise PageError(404, "Key not found", "This account has no API key with that id.")
    return render(request, "revoke_confirm.html", {"key": key}, user=user)


@router.post("/settings/api/keys/{key_id}/revoke")
async def revoke(request: Request, key_id: str, session: SessionDep, user: UserDep) -> Response:
    await read_form(request, user)
    await service.revoke_own_key(session, user, key_id, ip=client_ip(request), now=utcnow())
    return redirect("/settings/api?notice=revoked")


# --- Settings → Plan, Usage -----------------------------------------------------------------


@router.get("/settings/plan")
async def plan_page(request: Request, user: UserDep) -> Response:
    plans = [
        {
            "plan": plan,
            "limits": PLAN_LIMITS[plan],
            "description": PLAN_DESCRIPTIONS[plan],
            "current": plan is user.plan,
        }
        for plan in Plan
    ]
    return render(request, "plan.html", {"plans": plans}, user=user)


@router.get("/usage")
async def usage_page(
    request: Request, session: SessionDep, user: UserDep, limiter: LimiterDep, clock: ClockDep
) -> Response:
    rows = await service.usage_today(session, limiter, user.account_id, user.plan, clock())
    return render(
        request,
        "usage.html",
        {"rows": rows, "limits": PLAN_LIMITS[user.plan], "has_api": PLAN_LIMITS[user.plan].api},
        user=user,
    )


# --- Overview and system pages --------------------------------------------------------------


@router.get("/overview")
async def overview_page(request: Request, session: SessionDep, user: UserDep) -> Response:
    scope = Caller(user.account_id, environment_of(request.query_params.get("env")))
    now = utcnow()
    systems = await service.environment_systems(session, scope, now)
    cards = await service.system_cards(session, systems, now)
    alerts = await service.open_alerts(session, scope, systems)
    # The fleet's totals are `GET /portfolio/summary`'s `meta.totals` for the same systems.
    # In the sandbox they simulate each system's year to date (about 0.2 s per system on a
    # cold model cache, off the event loop; then kept by the model).
    totals = (await portfolio_service.summaries(session, systems, now))[1] if systems else None
    return render(
        request,
        "overview.html",
        {
            "cards": cards,
            "environment": scope.environment,
            "alerts": alerts,
            "alert_titles": service.ALERT_TITLES,
            "fleet": totals,
            "notice": _notice(request),
        },
        user=user,
    )
