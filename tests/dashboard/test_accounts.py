"""Sign-up, log-in, log-out, sessions, CSRF and login throttling over HTTP, on both databases."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from argon2 import PasswordHasher
from fastapi import FastAPI
from sqlalchemy import func, select, update

from solarapi.accounts import passwords
from solarapi.accounts.repository import find_user_by_email
from solarapi.dashboard.service import LOGIN_FAILED, SIGNUP_REFUSED
from solarapi.dashboard.sessions import token_hash
from solarapi.dashboard.throttle import LOGIN_PER_ACCOUNT_CLIENT, LOGIN_PER_IP
from solarapi.models import Account, User
from solarapi.models.dashboard import WebSession
from tests.dashboard.helpers import browser_for, csrf_of, log_in, new_email, sign_up, text_of
from tests.support import Tenant, TestClock, random_ip


def test_the_product_hashes_with_rfc_9106_low_memory() -> None:
    """This test process hashes with argon2's cheapest profile (conftest); a process of the
    product's own hashes at full cost."""
    probe = "from solarapi.accounts.passwords import hasher; print(hasher().hash('a password'))"
    hashed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert hashed.startswith("$argon2id$v=19$m=65536,t=3,p=4$")
    assert PasswordHasher().verify(hashed.strip(), "a password")


async def test_sign_up_starts_a_session_on_the_signup_plan(app: FastAPI) -> None:
    email = new_email()
    async with browser_for(app) as client:
        response = await sign_up(client, email.upper(), name="  Zonnepark BV ")
        assert response.status_code == 303
        assert response.headers["location"] == "/overview"
        cookie = response.headers["set-cookie"]
        assert "solar_session=" in cookie
        assert "HttpOnly" in cookie
        assert "SameSite=lax" in cookie
        assert "Secure" not in cookie  # plain HTTP here; see the HTTPS test
        token = client.cookies["solar_session"]
        overview = await client.get("/overview")
    assert overview.status_code == 200
    assert "Zonnepark BV" in overview.text
    async with app.state.sessionmaker() as session:
        user = await find_user_by_email(session, email)
        assert user is not None
        assert user.email == email  # stored lower-cased
        account = await session.get(Account, user.account_id)
        assert account is not None
        assert account.plan == app.state.settings.signup_plan.value
        # The session is stored as an HMAC of the cookie token, never the token itself.
        secret = app.state.settings.effective_secret_key
        stored = await session.scalar(
            select(WebSession).where(WebSession.token_hash == token_hash(token, secret))
        )
        assert stored is not None
        assert stored.user_id == user.id
        assert (
            await session.scalar(
                select(func.count()).select_from(WebSession).where(WebSession.token_hash == token)
            )
            == 0
        )


async def test_session_cookie_is_secure_over_https(app: FastAPI) -> None:
    async with browser_for(app, https=True) as client:
        response = await sign_up(client, new_email())
    assert response.status_code == 303
    assert "Secure" in response.headers["set-cookie"]


async def test_sign_up_validation_messages(app: FastAPI) -> None:
    async with browser_for(app) as client:
        short = await sign_up(client, new_email(), password="123456789")
        assert short.status_code == 400
        assert "Password must be at least 10 characters long." in text_of(short)
        # Ten characters are not enough when they are blank, one repeated or a famous password.
        for weak in (" " * 12, "a" * 16, "1212121212"):
            repeated = await sign_up(client, new_email(), password=weak)
            assert repeated.status_code == 400, weak
            assert "Password must contain at least 4 different characters" in text_of(repeated)
        for common in ("password1234", "Password123", "1234567890", "QWERTYUIOP"):
            famous = await sign_up(client, new_email(), password=common)
            assert famous.status_code == 400, common
            assert "Password is one of the most common passwords" in text_of(famous)
        bad_email = await sign_up(client, "not-an-email")
        assert bad_email.status_code == 400
        assert "is not a valid e-mail address" in text_of(bad_email)
        # The form keeps what was typed, except the password.
        assert 'value="not-an-email"' in bad_email.text
        assert "correct horse battery" not in bad_email.text
        no_name = await sign_up(client, new_email(), name="   ")
        assert no_name.status_code == 400
        assert "Name must be 1–200 characters." in text_of(no_name)
        assert "solar_session" not in client.cookies


class CountingHasher:
    """The real Argon2 hasher, counting its (deliberately slow) operations: equal work is
    what makes equal time, and a count does not depend on how busy the machine is."""

    def __init__(self, real: passwords.Hasher) -> None:
        self.real = real
        self.calls: list[str] = []

    def hash(self, password: str) -> str:
        self.calls.append("hash")
        return self.real.hash(password)

    def verify(self, password_hash: str, password: str) -> bool:
        self.calls.append("verify")
        return self.real.verify(password_hash, password)


@pytest.fixture
def argon2() -> Iterator[CountingHasher]:
    counting = CountingHasher(passwords.hasher())
    previous = passwords.use_hasher(counting)
    yield counting
    passwords.use_hasher(previous)


async def test_sign_up_with_a_taken_email_says_little_and_does_as_much(
    app: FastAPI, argon2: CountingHasher
) -> None:
    taken = new_email()
    async with browser_for(app) as client:
        assert (await sign_up(client, taken)).status_code == 303
    async with browser_for(app) as client:
        form = await client.get("/signup")
        data = {"csrf": csrf_of(form), "name": "X", "password": "another password 1"}
        argon2.calls.clear()
        refused = await client.post("/signup", data={**data, "email": taken})
        for_taken = list(argon2.calls)
        assert refused.status_code == 400
        assert SIGNUP_REFUSED in text_of(refused)
        assert taken not in refused.text.replace(f'value="{taken}"', "")
        argon2.calls.clear()
        created = await client.post("/signup", data={**data, "email": new_email()})
        for_fresh = list(argon2.calls)
        assert created.status_code == 303
    # A taken address costs one Argon2 hash too (without it, it answered ~50x faster).
    assert for_taken.count("hash") == for_fresh.count("hash") == 1
    async with app.state.sessionmaker() as session:
        assert await session.scalar(select(func.count()).where(User.email == taken)) == 1


async def test_wrong_password_and_unknown_email_look_the_same(
    app: FastAPI, starter: Tenant, argon2: CountingHasher
) -> None:
    async with browser_for(app) as client:
        form = await client.get("/login")
        argon2.calls.clear()
        wrong = await client.post(
            "/login",
            data={"csrf": csrf_of(form), "email": starter.email, "password": "wrong one!"},
        )
        for_wrong = list(argon2.calls)
        argon2.calls.clear()
        unknown = await client.post(
            "/login",
            data={"csrf": csrf_of(form), "email": new_email(), "password": "wrong one!"},
        )
        for_unknown = list(argon2.calls)
    assert wrong.status_code == unknown.status_code == 400
    assert LOGIN_FAILED in wrong.text
    assert LOGIN_FAILED in unknown.text
    assert "solar_session" not in client.cookies
    # An unknown address is checked against a dummy hash: the same Argon2 work. (Counted per
    # kind: the hasher is process-wide, and another test's task may hash meanwhile.)
    assert for_wrong.count("verify") == for_unknown.count("verify") == 1


async def test_log_in_goes_to_next_page_and_refuses_open_redirects(
    app: FastAPI, starter: Tenant
) -> None:
    async with browser_for(app) as client:
        gated = await client.get("/settings/plan")
        assert gated.status_code == 303
        assert gated.headers["location"] == "/login?next=/settings/plan"
        ok = await log_in(client, starter.email, starter.password, "/settings/plan")
        assert ok.status_code == 303
        assert ok.headers["location"] == "/settings/plan"
    for evil in ("//evil.example/x", "https://evil.example/", "/\\evil.example", "/api/v1/account"):
        async with browser_for(app) as client:
            response = await log_in(client, starter.email, starter.password, evil)
            assert response.headers["location"] == "/overview", evil


async def test_log_out_ends_the_session_on_the_server(app: FastAPI, starter: Tenant) -> None:
    async with browser_for(app) as client:
        await log_in(client, starter.email, starter.password)
        token = client.cookies["solar_session"]
        page = await client.get("/overview")
        out = await client.post("/logout", data={"csrf": csrf_of(page)})
        assert out.status_code == 303
        assert out.headers["location"] == "/login?notice=logged-out"
        assert 'solar_session=""' in out.headers["set-cookie"]
    # Replaying the old cookie does not work: the session is gone server-side.
    async with browser_for(app) as replay:
        replay.cookies.set("solar_session", token)
        response = await replay.get("/overview")
        assert response.status_code == 303
        assert response.headers["location"].startswith("/login")


async def test_a_planted_session_cookie_is_never_adopted(app: FastAPI, starter: Tenant) -> None:
    planted = "attacker-chosen-value-123456"
    async with browser_for(app) as client:
        client.cookies.set("solar_session", planted)
        assert (await client.get("/overview")).status_code == 303  # unknown token: no session
        response = await log_in(client, starter.email, starter.password)
    assert response.status_code == 303
    issued = response.headers["set-cookie"].split(";", 1)[0].removeprefix("solar_session=")
    assert len(issued) >= 40
    assert issued != planted


async def test_idle_and_expired_sessions_end(app: FastAPI, starter: Tenant) -> None:
    async with browser_for(app) as client:
        await log_in(client, starter.email, starter.password)
        secret = app.state.settings.effective_secret_key
        hashed = token_hash(client.cookies["solar_session"], secret)
        async with app.state.sessionmaker() as session, session.begin():
            stored = await session.scalar(select(WebSession).where(WebSession.token_hash == hashed))
            assert stored is not None
            await session.execute(
                update(WebSession)
                .where(WebSession.id == stored.id)
                .values(last_seen_at=stored.last_seen_at - timedelta(hours=13))
            )
        response = await client.get("/overview")
        assert response.status_code == 303
        assert response.headers["location"].startswith("/login")


async def test_every_post_needs_the_csrf_token(app: FastAPI, pro: Tenant) -> None:
    async with browser_for(app) as client:
        await client.get("/login")
        no_token = await client.post("/login", data={"email": pro.email, "password": pro.password})
        assert no_token.status_code == 403
        assert "Form expired" in no_token.text
        assert "solar_session" not in client.cookies
        signup = await client.post(
            "/signup", data={"name": "x", "email": new_email(), "password": "0123456789ab"}
        )
        assert signup.status_code == 403

        await log_in(client, pro.email, pro.password)
        page = await client.get("/settings/api")
        token = csrf_of(page)
        # Logging out needs it too (no forced log-outs from other sites).
        forged = await client.post("/logout", data={"csrf": "0" * 64})
        assert forged.status_code == 403
        assert (await client.get("/overview")).status_code == 200
        # The right token, but the browser says the form came from another site.
        cross = await client.post(
            "/settings/api/keys",
            data={"csrf": token, "name": "x", "environment": "live"},
            headers={"Origin": "https://evil.example"},
        )
        assert cross.status_code == 403

    # A token is bound to its session: another session's token is refused.
    async with browser_for(app) as other:
        await log_in(other, pro.email, pro.password)
        refused = await other.post(
            "/settings/api/keys", data={"csrf": token, "name": "x", "environment": "live"}
        )
        assert refused.status_code == 403
        assert "x" not in [k for k in (await other.get("/settings/api")).text.split() if k == "x"]


async def test_failed_log_ins_are_throttled_per_account_and_client(
    app: FastAPI, pro: Tenant, clock: TestClock
) -> None:
    clock.pinned = time.time()
    ip = random_ip()
    async with browser_for(app, ip=ip) as client:
        for _ in range(LOGIN_PER_ACCOUNT_CLIENT.limit):
            failed = await log_in(client, pro.email, "wrong password")
            assert failed.status_code == 400
        blocked = await log_in(client, pro.email, pro.password)
        assert blocked.status_code == 429
        assert "Too many failed log-ins" in blocked.text
        assert "solar_session" not in client.cookies
    # Another address from the same network is not affected by this one's failures.
    async with browser_for(app, ip=ip) as client:
        other = await sign_up(client, new_email())
        assert other.status_code == 303
    # An unknown address is throttled exactly like a known one (no enumeration).
    unknown = new_email()
    async with browser_for(app, ip=random_ip()) as client:
        for _ in range(LOGIN_PER_ACCOUNT_CLIENT.limit):
            assert (await log_in(client, unknown, "wrong password")).status_code == 400
        assert (await log_in(client, unknown, "wrong password")).status_code == 429
    # The window is clock-aligned: once it has passed, the right password works again.
    clock.pinned += LOGIN_PER_ACCOUNT_CLIENT.seconds
    async with browser_for(app, ip=ip) as client:
        assert (await log_in(client, pro.email, pro.password)).status_code == 303


async def test_failed_log_ins_are_throttled_per_ip(
    app: FastAPI, pro: Tenant, clock: TestClock
) -> None:
    clock.pinned = time.time()
    ip = random_ip()
    async with browser_for(app, ip=ip) as client:
        form = await client.get("/login")
        token = csrf_of(form)
        for _ in range(LOGIN_PER_IP.limit):
            response = await client.post(
                "/login", data={"csrf": token, "email": new_email(), "password": "guess 123456"}
            )
            assert response.status_code == 400
        blocked = await client.post(
            "/login", data={"csrf": token, "email": pro.email, "password": pro.password}
        )
        assert blocked.status_code == 429
    async with browser_for(app) as elsewhere:
        assert (await log_in(elsewhere, pro.email, pro.password)).status_code == 303


async def test_concurrent_wrong_passwords_are_counted_before_argon2(
    app: FastAPI, pro: Tenant, clock: TestClock, argon2: CountingHasher
) -> None:
    """40 wrong passwords at once from one client (issue 28: all 40 were checked, the
    throttle peeked, Argon2 ran, then it counted): exactly the allowance is checked, the
    rest is refused before any Argon2 work."""
    import asyncio

    clock.pinned = time.time()
    async with browser_for(app, ip=random_ip()) as client:
        token = csrf_of(await client.get("/login"))
        argon2.calls.clear()
        responses = await asyncio.gather(
            *(
                client.post(
                    "/login", data={"csrf": token, "email": pro.email, "password": f"wrong {i}"}
                )
                for i in range(40)
            )
        )
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [400] * LOGIN_PER_ACCOUNT_CLIENT.limit + [429] * (
        40 - LOGIN_PER_ACCOUNT_CLIENT.limit
    )
    assert argon2.calls.count("verify") == LOGIN_PER_ACCOUNT_CLIENT.limit


async def test_a_stranger_cannot_lock_the_user_out(
    app: FastAPI, pro: Tenant, clock: TestClock
) -> None:
    """Wrong passwords from other addresses — 5 from one, then one from each of 30 more, past
    the account's own window — never refuse the right password from the user's address
    (issue 28: 5 wrong passwords from anywhere locked the user out for 15 minutes, renewable
    forever). A client that failed is refused; a fresh one gets one try while it lasts."""
    clock.pinned = time.time()
    async with browser_for(app, ip=random_ip()) as stranger:
        for _ in range(LOGIN_PER_ACCOUNT_CLIENT.limit):
            assert (await log_in(stranger, pro.email, "wrong password")).status_code == 400
        assert (await log_in(stranger, pro.email, "wrong password")).status_code == 429
    botnet = [random_ip() for _ in range(30)]
    for ip in botnet:
        async with browser_for(app, ip=ip) as bot:
            assert (await log_in(bot, pro.email, "wrong password")).status_code == 400
    # The account is under attack now: a client that failed once is refused at once.
    async with browser_for(app, ip=botnet[0]) as bot:
        assert (await log_in(bot, pro.email, "wrong password")).status_code == 429
    async with browser_for(app, ip=random_ip()) as user:
        assert (await log_in(user, pro.email, pro.password)).status_code == 303


async def test_own_log_ins_do_not_use_up_the_attempts(
    app: FastAPI, pro: Tenant, clock: TestClock
) -> None:
    clock.pinned = time.time()
    ip = random_ip()
    for _ in range(LOGIN_PER_ACCOUNT_CLIENT.limit * 2):
        async with browser_for(app, ip=ip) as client:
            assert (await log_in(client, pro.email, pro.password)).status_code == 303


def test_argon2_runs_in_a_bounded_pool_of_its_own() -> None:
    """Not on the default pool (where the sandbox model and DNS run), at most half the CPUs'
    worth of checks at once, at a lower CPU priority."""
    import asyncio
    import os
    import threading

    niceness: set[int] = set()

    async def burst() -> set[str]:
        names: set[str] = set()

        def verify_and_note(password_hash: str | None, password: str) -> bool:
            names.add(threading.current_thread().name)
            niceness.add(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
            return passwords._verify(password_hash, password)

        await asyncio.gather(
            *(passwords._in_pool(verify_and_note, None, "wrong") for _ in range(12))
        )
        return names

    names = asyncio.run(burst())
    assert all(name.startswith("argon2") for name in names)
    assert 1 <= len(names) <= max(1, (os.cpu_count() or 2) // 2) == passwords.ARGON2_THREADS
    # Lower CPU priority than the event loop's thread (the lane threads inherit it), so a burst
    # of log-ins takes what API reads leave over (bench/dashboard/bench_login_burst.py).
    assert niceness == {min(19, os.getpriority(os.PRIO_PROCESS, 0) + passwords.ARGON2_NICE)}
