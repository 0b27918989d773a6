"""`solarapi serve --workers 2`: every worker writes the JSON request line, and an unhandled
error is a JSON record carrying the request id the 500 body tells the user to quote."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from solarapi.config import Settings
from solarapi.kit.plans import Plan
from solarapi.migrate import upgrade
from tests.support import (
    REDIS_URL,
    TEST_SECRET,
    Server,
    admin,
    database_url,
    make_tenant,
    need_service,
    postgres_available,
    redis_available,
    running_app,
    scratch_database,
    served,
    settings_env,
)
from tests.systems.factories import system_body

pytestmark = [pytest.mark.services, pytest.mark.slow]

# A real fault inside the database (not a mock): inserting a system raises a PL/pgSQL error,
# which no code of ours classifies, so it is the unhandled 500 path end to end.
_FAULT = """
CREATE FUNCTION refuse_systems() RETURNS trigger LANGUAGE plpgsql AS
$$ BEGIN RAISE EXCEPTION 'injected fault'; END $$;
CREATE TRIGGER refuse_systems BEFORE INSERT ON systems
FOR EACH ROW EXECUTE FUNCTION refuse_systems();
"""


async def test_every_worker_logs_json_requests_and_errors(tmp_path: Path) -> None:
    need_service("PostgreSQL", postgres_available())
    need_service("Redis", redis_available())
    async with scratch_database() as name:
        url = database_url(name)
        settings = Settings(
            database_url=url, secret_key=TEST_SECRET, data_dir=tmp_path, job_runner="external"
        )
        await asyncio.to_thread(upgrade, settings)
        async with running_app(settings) as app:
            tenant = await make_tenant(app, Plan.ENTERPRISE)
        # Limits scaled up: on a loaded machine one worker can take every new connection for
        # many rounds, and the rounds would otherwise spend the key's 300 a minute (a 429 once).
        env = settings_env(settings, SOLARAPI_REDIS_URL=REDIS_URL, SOLARAPI_RATE_LIMIT_SCALE="100")
        with served(env, "--workers", "2") as server:
            headers = {"Authorization": f"Bearer {tenant.live}"}
            pids: set[object] = set()
            sent = 0
            # New connections each time so the kernel hands them to either worker; polled
            # until both answered, with a generous deadline on a loaded machine.
            limits = httpx.Limits(max_keepalive_connections=0)
            async with httpx.AsyncClient(base_url=server.base, limits=limits, timeout=30) as client:
                deadline = asyncio.get_running_loop().time() + 120
                while len(pids) < 2:
                    assert asyncio.get_running_loop().time() < deadline, pids
                    ids = [f"worker-log-{sent + n}" for n in range(20)]
                    responses = await asyncio.gather(
                        *(
                            client.get("/api/v1/account", headers={**headers, "X-Request-Id": i})
                            for i in ids
                        )
                    )
                    assert {r.status_code for r in responses} == {200}
                    sent += len(ids)
                    wanted = set(ids)
                    for line in await _settled(server, wanted):
                        pids.add(line["pid"])
                line = next(
                    line for line in server.lines() if line.get("request_id") == "worker-log-0"
                )
                assert line["msg"] == "request"
                assert line["route"] == "/api/v1/account"
                assert line["status"] == 200
                assert isinstance(line["latency_ms"], float | int)
                assert line["key"] == tenant.live[:12] + "…" + tenant.live[-4:]
                assert tenant.live not in server.text()

                await admin(_FAULT, name)
                failed = await client.post(
                    "/api/v1/systems",
                    headers={**headers, "X-Request-Id": "worker-log-boom"},
                    json=system_body(),
                )
            assert failed.status_code == 500
            assert failed.json()["code"] == "server_error"
            assert "worker-log-boom" in failed.json()["error"]
            # Nothing in plain text: every line any process wrote is a JSON record.
            plain = [line for line in server.text().splitlines() if not line.startswith("{")]
            assert plain == []
            records = [
                line
                for line in await _settled(server, {"worker-log-boom"}, count=2)
                if line.get("request_id") == "worker-log-boom"
            ]
        error = next(r for r in records if r["level"] == "error")
        assert error["msg"] == "unhandled error"
        assert "injected fault" in error["exc"]
        request = next(r for r in records if r["msg"] == "request")
        assert request["status"] == 500
        assert request["route"] == "/api/v1/systems"


async def _settled(server: Server, request_ids: set[str], count: int = 1) -> list[dict[str, Any]]:
    """The log lines of `request_ids` once each has `count` lines (a worker writes its
    request line just after the response is sent)."""
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        lines = [line for line in server.lines() if line.get("request_id") in request_ids]
        seen = [str(line["request_id"]) for line in lines]
        if all(seen.count(i) >= count for i in request_ids):
            return lines
        assert asyncio.get_running_loop().time() < deadline, (request_ids, seen)
        await asyncio.sleep(0.05)
