"""The dashboard's rules: sign-up, log-in, keys and usage, on top of the services the API
uses (accounts, auth, plans, the rate limiter). No rule is implemented twice: this module
only adds what is specific to people in a browser (throttling, enumeration-safe messages).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.accounts import repository as account_repository
from solarapi.accounts.passwords import PasswordChecksBusy
from solarapi.accounts.service import check_login, create_account
from solarapi.alerts import service as alerts_service
from solarapi.alerts.rendering import AlertRecord
from solarapi.audit.service import Actor, AuditAction, record_audit
from solarapi.auth import repository as key_repository
from solarapi.auth.keys import NewKey
from solarapi.auth.principal import Caller
from solarapi.auth.service import create_key, revoke_key
from solarapi.dashboard.errors import FormRejected, sentence
from solarapi.dashboard.sessions import WebUser, start_session
from solarapi.dashboard.throttle import LoginThrottle, Throttled
from solarapi.errors import Conflict, Forbidden, ValidationFailed
from solarapi.kit.grid import (
    EARLIEST,
    LATEST,
    Interval,
    iso_strings,
    local_midnight,
    parse_interval,
)
from solarapi.kit.plans import PLAN_LIMITS, Environment, Plan
from solarapi.kit.timefmt import TimestampError, parse_date
from solarapi.models import ApiKey
from solarapi.models.alerts import AlertType
from solarapi.models.systems import ReadableSystem, System, SystemRecord
from solarapi.performance import service as performance_service
from solarapi.performance.service import Figures
from solarapi.ratelimit.base import RateLimiter
from solarapi.ratelimit.policy import key_windows
from solarapi.readings import service as readings_service
from solarapi.readings.rendering import BucketFigures, Totals
from solarapi.sandbox.provision import ensure_sandbox
from solarapi.systems import repository as systems_repository
from solarapi.systems.access import tenant_system
from solarapi.systems.span import simulated_last_start

LOGIN_FAILED = "E-mail or password is incorrect."
ACCOUNT_DISABLED = (
    "This account is disabled, so it cannot log in. Ask the operator of this service to "
    "enable it again."
)
# Without sending e-mail, a sign-up form cannot hide entirely whether an address is taken;
# it says no more than that, after the same amount of work as a successful sign-up.
SIGNUP_REFUSED = (
    "An account could not be created with this e-mail address. If you already have an "
    "account, log in instead."
)
STARTER_NO_KEYS = (
    "API access needs the Pro plan (read-only) or the Enterprise plan (full access). Your "
    "account is on the Starter plan, which includes the dashboard only, so it cannot create "
    "API keys. Systems, readings uploads and ingest tokens for data loggers work on every "
    "plan, here in the dashboard. To change the plan, the operator of this server runs "
    "`solarapi accounts set-plan <your e-mail> pro` (or `enterprise`); see Settings → Plan."
)


async def sign_up(
    session: AsyncSession,
    throttle: LoginThrottle,
    *,
    name: str,
    email: str,
    password: str,
    plan: Plan,
    ip: str,
    secret: bytes,
    now: datetime,
) -> str:
    """Create an account with its first user and log them in; returns the session token."""
    blocked = await throttle.signup_attempt(ip)
    if blocked is not None:
        raise FormRejected(
            f"Too many sign-ups from your network. Try again in {blocked.minutes} minutes.", 429
        )
    try:
        created = await create_account(
            session, name=name, email=email, password=password, plan=plan, now=now
        )
    except ValidationFailed as exc:
        raise FormRejected(sentence(exc.message)) from None
    except PasswordChecksBusy:
        raise FormRejected(
            "Too many sign-ups and log-ins are being checked at this moment. Try again in a "
            "minute.",
            503,
        ) from None
    except Conflict:
        # create_account hashed the password before finding the e-mail taken, so the
        # refusal costs the same time as a sign-up.
        raise FormRejected(SIGNUP_REFUSED) from None
    await record_audit(
        session,
        AuditAction.ACCOUNT_CREATED,
        actor=Actor.user(created.user.id),
        account_id=created.account.id,
        subject=created.user.email,
        ip=ip,
        now=now,
        details={"plan": plan.value, "via": "dashboard sign-up"},
    )
    return await start_session(session, user_id=created.user.id, secret=secret, now=now)


async def log_in(
    session: AsyncSession,
    throttle: LoginThrottle,
    *,
    email: str,
    password: str,
    ip: str,
    secret: bytes,
    now: datetime,
) -> str:
    """Check the password (same work for unknown e-mails) and start a session."""
    attempt = await throttle.login_attempt(email, ip)  # counted before Argon2 runs
    if isinstance(attempt, Throttled):
        raise FormRejected(
            f"Too many failed log-ins for this e-mail or from your network. Try again in "
            f"{attempt.minutes} minutes.",
            429,
        )
    try:
        user = await check_login(session, email=email, password=password[:1024])
    except PasswordChecksBusy:
        raise FormRejected(
            "Too many log-ins are being checked at this moment. Try again in a minute.", 503
        ) from None
    if user is None:
        await _audit_failed_login(session, email=email, ip=ip, now=now, reason="wrong password")
        raise FormRejected(LOGIN_FAILED, 400)
    account = await account_repository.get_account(session, user.account_id)
    if account is None or account.disabled_at is not None:
        # Said only after the right password: it tells nobody else that the address exists.
        await _audit_failed_login(session, email=email, ip=ip, now=now, reason="disabled")
        raise FormRejected(ACCOUNT_DISABLED, 403)
    await throttle.succeeded(attempt)
    await record_audit(
        session,
        AuditAction.LOGIN_SUCCEEDED,
        actor=Actor.user(user.id),
        account_id=user.account_id,
        subject=user.email,
        ip=ip,
        now=now,
    )
    return await start_session(session, user_id=user.id, secret=secret, now=now)


async def _audit_failed_login(
    session: AsyncSession, *, email: str, ip: str, now: datetime, reason: str
) -> None:
    """A failed log-in names the account when the e-mail belongs to one (the operator sees
    attempts on it); the address is kept as typed, whether or not it exists."""
    known = await account_repository.find_user_by_email(session, email)
    await record_audit(
        session,
        AuditAction.LOGIN_FAILED,
        actor=Actor.anonymous() if known is None else Actor.user(known.id),
        account_id=None if known is None else known.account_id,
        subject=email.strip(),
        ip=ip,
        now=now,
        details={"reason": reason},
    )


# --- keys -------------------------------------------------------------------------------


def can_create_keys(plan: Plan) -> bool:
    return PLAN_LIMITS[plan].api


async def account_keys(session: AsyncSession, account_id: str) -> list[ApiKey]:
    """Active keys first, newest first; revoked ones after them."""
    keys = await key_repository.list_keys(session, account_id)
    keys.sort(key=lambda k: k.created_at, reverse=True)
    keys.sort(key=lambda k: k.revoked_at is not None)
    return keys


async def issue_key(
    session: AsyncSession,
    user: WebUser,
    *,
    name: str,
    environment: Environment,
    secret: bytes,
    ip: str,
    now: datetime,
) -> tuple[ApiKey, NewKey]:
    if not can_create_keys(user.plan):
        raise Forbidden(STARTER_NO_KEYS)
    try:
        record, new = await create_key(
            session,
            account_id=user.account_id,
            name=name,
            environment=environment,
            secret=secret,
            now=now,
        )
    except ValidationFailed as exc:
        raise FormRejected(sentence(exc.message.replace("key name", "Key name"))) from None
    await record_audit(
        session,
        AuditAction.KEY_CREATED,
        actor=Actor.user(user.user_id),
        account_id=user.account_id,
        subject=record.id,
        ip=ip,
        now=now,
        details={"environment": record.environment, "display": record.display},
    )
    return record, new


async def find_own_key(session: AsyncSession, user: WebUser, key_id: str) -> ApiKey | None:
    key = await key_repository.get_key(session, key_id)
    return key if key is not None and key.account_id == user.account_id else None


async def revoke_own_key(
    session: AsyncSession, user: WebUser, key_id: str, *, ip: str, now: datetime
) -> ApiKey:
    found = await find_own_key(session, user, key_id)
    was_active = found is not None and found.revoked_at is None
    key = await revoke_key(session, key_id=key_id, now=now, account_id=user.account_id)
    if was_active:
        await record_audit(
            session,
            AuditAction.KEY_REVOKED,
            actor=Actor.user(user.user_id),
            account_id=user.account_id,
            subject=key.id,
            ip=ip,
            now=now,
            details={"environment": key.environment, "display": key.display},
        )
    return key


# --- usage ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KeyUsage:
    key: ApiKey
    today: int
    per_day: int
    minute: int
    per_minute: int


async def usage_today(
    session: AsyncSession, limiter: RateLimiter, account_id: str, plan: Plan, now: float
) -> list[KeyUsage]:
    """Requests per active key in the current day and minute windows, as the API counts them."""
    windows = key_windows(plan)
    rows: list[KeyUsage] = []
    for key in await account_keys(session, account_id):
        if key.revoked_at is not None:
            continue
        decision = await limiter.peek(f"key:{key.id}", windows, now)
        day, minute = decision.window("day"), decision.window("minute")
        rows.append(
            KeyUsage(
                key=key,
                today=day.used if day else 0,
                per_day=windows[1].limit,
                minute=minute.used if minute else 0,
                per_minute=windows[0].limit,
            )
        )
    return rows


# --- systems and production ---------------------------------------------------------------


async def environment_systems(session: AsyncSession, scope: Caller, now: datetime) -> list[System]:
    """The systems of one environment of the account, oldest first. The sandbox's simulated
    systems appear on first use, whether by key (authentication provisions them) or here."""
    if scope.environment is Environment.TEST:
        account = await account_repository.get_account(session, scope.account_id)
        if account is not None and account.sandbox_provisioned_at is None:
            await ensure_sandbox(session, scope.account_id, now)
    return list(
        await systems_repository.list_for_account(session, scope.account_id, scope.environment)
    )


@dataclass(frozen=True, slots=True)
class SystemCard:
    system: System
    energy_today_wh: float | None
    last_reading_at: datetime | None


async def system_cards(
    session: AsyncSession, systems: Sequence[System], now: datetime
) -> list[SystemCard]:
    """Each system with today's energy and its last reading."""
    return [await _card(session, system, now) for system in systems]


async def _card(session: AsyncSession, system: System, now: datetime) -> SystemCard:
    # Today's quarter-hours from the readings endpoint's own aggregation. Not the summary:
    # for a simulated system that also simulates the year to date and the lifetime, which
    # costs seconds on a cold cache, for numbers this page does not show.
    tz = ZoneInfo(system.timezone)
    today = now.astimezone(tz).date()
    start = datetime.fromtimestamp(local_midnight(today, tz), UTC)
    end = datetime.fromtimestamp(local_midnight(today + timedelta(days=1), tz), UTC)
    readings = await readings_service.aggregate(session, system, start, end, Interval.MIN15, now)
    last_reading_at = system.last_reading_at
    if system.data_source == "simulated":
        # The model's readings are not stored: its last one is the API's (`last_reading_at`
        # of the system), the last quarter-hour that has ended — yesterday's in the first
        # quarter-hour of a local day, which today's buckets do not hold.
        last = simulated_last_start(system.installed_on, system.timezone, now)
        last_reading_at = None if last is None else datetime.fromtimestamp(last, UTC)
    return SystemCard(system, readings.totals.energy_wh, last_reading_at)


@dataclass(frozen=True, slots=True)
class OpenAlert:
    alert: AlertRecord
    system_name: str


ALERT_TITLES = {
    AlertType.OFFLINE: "Offline",
    AlertType.ZERO_PRODUCTION: "No production in daylight",
    AlertType.UNDERPERFORMING: "Underperforming",
}


async def open_alerts(
    session: AsyncSession, scope: Caller, systems: Sequence[ReadableSystem]
) -> list[OpenAlert]:
    """The open alerts of these systems of the scope, newest first, with their system's
    name."""
    names = {system.id: system.name for system in systems}
    alerts = await alerts_service.open_alerts_of_account(
        session, scope.account_id, scope.environment
    )
    return [
        OpenAlert(alert, names[alert.system_id]) for alert in alerts if alert.system_id in names
    ]


async def own_system(session: AsyncSession, account_id: str, system_id: str) -> SystemRecord:
    """A system of the account, in either environment (a person sees both)."""
    return tenant_system(
        await systems_repository.get_record(session, system_id),
        system_id,
        account_id=account_id,
        environment=None,
    )


def scope_of(user: WebUser, system: ReadableSystem) -> Caller:
    """The person acting on the system's environment of their account."""
    return Caller(user.account_id, Environment(system.environment))


@dataclass(frozen=True, slots=True)
class ProductionQuery:
    first_day: date  # local, inclusive
    last_day: date  # local, inclusive
    interval: Interval

    def time_span(self, tz: ZoneInfo) -> tuple[datetime, datetime]:
        """The instants of the first day's midnight and of the one after the last day."""
        start = datetime.fromtimestamp(local_midnight(self.first_day, tz), UTC)
        end = datetime.fromtimestamp(local_midnight(self.last_day + timedelta(days=1), tz), UTC)
        return start, end


def production_query(
    system: ReadableSystem,
    from_text: str | None,
    to_text: str | None,
    interval_text: str | None,
    now: datetime,
) -> ProductionQuery:
    """The chart's range as local calendar days (default: the last 7 days, daily buckets)."""
    today = now.astimezone(ZoneInfo(system.timezone)).date()
    try:
        interval = parse_interval(interval_text or None, default=Interval.DAY)
    except ValidationFailed as exc:
        raise FormRejected(sentence(exc.message)) from None
    try:
        last_day = parse_date(to_text) if to_text else today
        first_day = parse_date(from_text) if from_text else last_day - timedelta(days=6)
    except TimestampError as exc:
        raise FormRejected(sentence(str(exc))) from None
    if first_day > last_day:
        raise FormRejected("The first day must not be after the last day.")
    check_days(first_day, last_day)
    return ProductionQuery(first_day, last_day, interval)


# The local days a form may name: those of the API's range (EARLIEST to LATEST, UTC).
FIRST_DAY, LAST_DAY = EARLIEST.date(), LATEST.date() - timedelta(days=1)
DAYS_OUT_OF_RANGE = f"Choose days between {FIRST_DAY} and {LAST_DAY}."


def check_days(first: date, last: date) -> None:
    """The form's refusal of days outside the API's range — before any midnight of them is
    computed (year 1 or 9999 is out of the datetime's range: a 500, not an answer)."""
    if first < FIRST_DAY or last > LAST_DAY:
        raise FormRejected(DAYS_OUT_OF_RANGE)


@dataclass(frozen=True, slots=True)
class Production:
    """What `GET /systems/{id}/readings` answers for the chart's days, as values: each
    bucket's figures as the body writes them, the totals, and the range widened to the
    grid (the body's `meta.from` and `meta.to`)."""

    buckets: tuple[BucketFigures, ...]
    totals: Totals
    start: str
    end: str


async def production(
    session: AsyncSession, system: ReadableSystem, query: ProductionQuery, now: datetime
) -> Production:
    start, end = query.time_span(ZoneInfo(system.timezone))
    try:
        readings = await readings_service.aggregate(
            session, system, start, end, query.interval, now
        )
    except ValidationFailed as exc:
        raise FormRejected(sentence(exc.message)) from None
    labels = iso_strings(readings.time_range.edges())
    return Production(tuple(readings.each_bucket()), readings.totals, labels[0], labels[-1])


@dataclass(frozen=True, slots=True)
class ExpectedAgainstActual:
    """The system page's second series and KPIs, from the service `GET /performance` answers
    with: each chart bucket's figures by its start (the readings body's `start`), the chart
    range's, and those of the calendar month of the range's last day."""

    buckets: dict[str, Figures]
    total: Figures
    month: Figures
    month_first_day: date


async def expected_against_actual(
    session: AsyncSession, system: ReadableSystem, query: ProductionQuery, now: datetime
) -> ExpectedAgainstActual:
    tz = ZoneInfo(system.timezone)
    start, end = query.time_span(tz)
    first = query.last_day.replace(day=1)
    following = (first + timedelta(days=31)).replace(day=1)
    try:
        chart = await performance_service.performance(
            session, system, start, end, query.interval, now
        )
        month = await performance_service.performance(
            session,
            system,
            datetime.fromtimestamp(local_midnight(first, tz), UTC),
            datetime.fromtimestamp(local_midnight(following, tz), UTC),
            Interval.MONTH,
            now,
        )
    except ValidationFailed as exc:
        raise FormRejected(sentence(exc.message)) from None
    starts = iso_strings(chart.time_range.edges())
    return ExpectedAgainstActual(
        buckets=dict(zip(starts, chart.figures(), strict=False)),
        total=chart.total(),
        month=month.total(),
        month_first_day=first,
    )
