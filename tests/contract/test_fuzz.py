"""Property-based fuzzing of the OpenAPI document against a real `solarapi serve` (schemathesis).

For each database, a server is started on a freshly migrated database holding one Enterprise
account, seeded with a system (with readings), a declaration, a completed report and a webhook
in both environments. Then, for a live (`pk_live_`) and a sandbox (`pk_test_`) key, every
operation of `/api/v1/openapi.json` gets `EXAMPLES` generated requests (schema-valid and
schema-invalid ones, derandomized: the same every run), each checked with every schemathesis
check. Path ids are real: seeded ones for reads, and for operations that change or delete what
they are given, a fresh resource made for each request, so no operation starves another.

The test fails on any check failure, on any error line in the server's log, and when an
operation never got a successful answer (an operation reached only with 404s tests nothing).

Run it alone: `.venv/bin/pytest tests/contract/test_fuzz.py` (add `-k sqlite` or
`-k postgres` for one database)."""

from __future__ import annotations

import asyncio
import itertools
import os
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.config import SchemathesisConfig
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import positive_data_acceptance

from solarapi.alerts.service import evaluate_system
from solarapi.config import Settings
from solarapi.jobs.runner import run_pending
from solarapi.kit.plans import Environment, Plan
from solarapi.kit.timefmt import utcnow
from solarapi.reports.service import JOB_KIND as REPORT_JOB
from solarapi.webhooks.service import MAX_ENDPOINTS_PER_ENVIRONMENT
from tests.support import (
    DATABASES,
    Server,
    client_for,
    make_tenant,
    migrated_settings,
    running_app,
    served,
    settings_env,
)

pytestmark = pytest.mark.slow

# Generated requests per operation and key (about half schema-valid, half not).
EXAMPLES = 10
# A deeper campaign than CI's, by hand (CI sets none of these):
# SOLARAPI_FUZZ_EXAMPLES=N generates N requests per operation and key instead of EXAMPLES;
# SOLARAPI_FUZZ_SEED=N draws them from seed N instead of the derandomized ones (`random`: a
# new seed every run); SOLARAPI_FUZZ_OPERATIONS=REGEX fuzzs only the operations whose
# "METHOD /path" (path without /api/v1) the regular expression finds.
FUZZ_EXAMPLES = int(os.environ.get("SOLARAPI_FUZZ_EXAMPLES") or EXAMPLES)
FUZZ_SEED = os.environ.get("SOLARAPI_FUZZ_SEED") or None
FUZZ_OPERATIONS = re.compile(os.environ.get("SOLARAPI_FUZZ_OPERATIONS") or "")
API = "/api/v1"
WEBHOOK_URL = "https://1.1.1.1/hooks/solar"
DAY = {"from": "2025-05-01T00:00:00Z", "to": "2025-05-02T00:00:00Z"}
# A report's calendar: the sandbox's systems (Amsterdam, Berlin, Sydney) have no common one.
REPORT = {"type": "production", "format": "csv", "timezone": "Europe/Amsterdam", **DAY}


def system_body(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "capacity_kwp": 8.4,
        "location": {"latitude": 52.38, "longitude": 4.64, "timezone": "Europe/Amsterdam"},
        "market_zone": "NL",
    }


def readings_of_two_days() -> list[dict[str, Any]]:
    """Every quarter-hour of 1 and 2 May 2025 in Amsterdam: a declaration's whole period."""
    start = datetime(2025, 4, 30, 22, tzinfo=UTC).timestamp()
    return [
        {
            "timestamp": datetime.fromtimestamp(start + 900 * i, UTC).strftime(
                "%Y-%m-%dT%H:%M:%SZ"
            ),
            "energy_wh": 100.0 + i,
        }
        for i in range(192)
    ]


@dataclass
class World:
    """One key and the ids it can reach: seeded ones, and factories for fresh ones."""

    key: str
    http: httpx.Client
    seeded: dict[str, str]
    made: Iterator[int] = field(default_factory=itertools.count)

    def create(self, path: str, body: dict[str, Any], status: int = 201) -> dict[str, Any]:
        response = self.http.post(API + path, json=body)
        assert response.status_code == status, (path, response.text)
        return response.json()  # type: ignore[no-any-return]

    def fresh_system(self) -> str:
        return str(self.create("/systems", system_body(f"Fuzz {next(self.made)}"))["id"])

    def draft_body(self) -> dict[str, Any]:
        """A new declaration's body, on a fresh system with the period's readings."""
        system = self.fresh_system()
        # Submitting needs the period's readings (live; the sandbox simulates them).
        self.http.post(
            f"{API}/systems/{system}/readings", json={"readings": readings_of_two_days()}
        )
        return {
            "system_id": system,
            "type": "guarantee_of_origin",
            "period_start": "2025-05-01",
            "period_end": "2025-05-02",
        }

    def fresh_draft(self) -> str:
        return str(self.create("/declarations", self.draft_body())["id"])

    def fresh_submitted(self) -> str:
        declaration = self.fresh_draft()
        self.create(f"/declarations/{declaration}/submit", {}, 200)
        return declaration

    def fresh_report(self) -> str:
        return str(self.create("/reports", REPORT, 202)["id"])

    def fresh_webhook(self) -> str:
        self.room_for_webhook()
        return str(
            self.create("/webhooks", {"url": WEBHOOK_URL, "events": ["system.created"]})["id"]
        )

    def room_for_webhook(self) -> None:
        """Room for one more endpoint: an environment holds at most 20 (then 409), and past
        a few dozen examples the fuzzer's creations fill them; the unseeded ones go."""
        listed = self.http.get(f"{API}/webhooks", params={"limit": 100}).json()["data"]
        if len(listed) < MAX_ENDPOINTS_PER_ENVIRONMENT:
            return
        for hook in listed:
            if hook["id"] != self.seeded["webhook_id"]:
                assert self.http.delete(f"{API}/webhooks/{hook['id']}").status_code == 204


# Which id each path parameter takes: the seeded one, unless the operation changes or deletes
# what it is given (then a fresh one per request, so later requests and operations still
# find theirs). Keyed by (method, path template).
FRESH: dict[tuple[str, str], Callable[[World], str]] = {
    ("PATCH", "/systems/{system_id}"): World.fresh_system,
    ("DELETE", "/systems/{system_id}"): World.fresh_system,
    ("PATCH", "/declarations/{declaration_id}"): World.fresh_draft,
    ("DELETE", "/declarations/{declaration_id}"): World.fresh_draft,
    ("POST", "/declarations/{declaration_id}/submit"): World.fresh_draft,
    ("POST", "/declarations/{declaration_id}/withdraw"): World.fresh_submitted,
    ("DELETE", "/reports/{report_id}"): World.fresh_report,
    ("PATCH", "/webhooks/{webhook_id}"): World.fresh_webhook,
    ("DELETE", "/webhooks/{webhook_id}"): World.fresh_webhook,
}


async def seed(settings: Settings) -> dict[Environment, tuple[str, dict[str, str]]]:
    """An Enterprise account; per environment its key and the ids of what was made for it."""
    worlds: dict[Environment, tuple[str, dict[str, str]]] = {}
    async with running_app(settings) as app:
        tenant = await make_tenant(app, Plan.ENTERPRISE)
        for env in Environment:
            key = tenant.keys[env]
            async with client_for(app, key) as http:
                # Metered in the sandbox too, so uploading readings to it succeeds there
                # (a simulated system refuses them).
                body = {**system_body("Seeded"), "data_source": "metered"}
                if env is Environment.LIVE:
                    body.pop("data_source")
                system = await http.post(f"{API}/systems", json=body)
                assert system.status_code == 201, system.text
                system_id = system.json()["id"]
                uploaded = await http.post(
                    f"{API}/systems/{system_id}/readings",
                    json={"readings": readings_of_two_days()},
                )
                assert uploaded.status_code == 200, uploaded.text
                declaration = await http.post(
                    f"{API}/declarations",
                    json={"system_id": system_id, "type": "guarantee_of_origin",
                          "period_start": "2025-05-01", "period_end": "2025-05-02"},
                )  # fmt: skip
                assert declaration.status_code == 201, declaration.text
                report = await http.post(f"{API}/reports", json=REPORT)
                assert report.status_code == 202, report.text
                hook = await http.post(
                    f"{API}/webhooks", json={"url": WEBHOOK_URL, "events": ["system.created"]}
                )
                assert hook.status_code == 201, hook.text
                # Its readings stopped long ago: the evaluation opens an offline alert.
                async with app.state.sessionmaker() as session, session.begin():
                    await evaluate_system(session, system_id, utcnow())
                alerts = await http.get(f"{API}/alerts")
                assert alerts.json()["data"], alerts.text
                # Deleted by the first DELETE that reaches it; later ones are a 404.
                token = await http.post(
                    f"{API}/systems/{system_id}/ingest-tokens", json={"name": "fuzz logger"}
                )
                assert token.status_code == 201, token.text
            worlds[env] = (
                key,
                {
                    "system_id": system_id,
                    "declaration_id": declaration.json()["id"],
                    "report_id": report.json()["id"],
                    "webhook_id": hook.json()["id"],
                    "alert_id": alerts.json()["data"][0]["id"],
                    "token_id": token.json()["id"],
                },
            )
        # The reports are generated here, so downloading one answers 200. The server runs no
        # jobs: webhook deliveries (to generated URLs) are never attempted.
        await run_pending(app.state.sessionmaker, "fuzz-seed", kinds=[REPORT_JOB])
    return worlds


@pytest.fixture(params=DATABASES)
def fuzz_settings(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Settings]:
    """A new, migrated database of this test's own."""
    with migrated_settings(request.param, tmp_path, prefix="fuzz") as settings:
        yield settings


def fuzz_env(settings: Settings) -> dict[str, str]:
    """The environment of the fuzzed server."""
    return settings_env(
        settings,
        # Hundreds of requests a minute from one key and one address (the checks resend
        # requests without a key): the limits are tested elsewhere.
        SOLARAPI_RATE_LIMIT_SCALE="100",
        SOLARAPI_ANONYMOUS_PER_MINUTE="100000",
        # The server runs no jobs, so every report asked for stays queued: the per-account
        # quota (tested in tests/jobs/test_fairness.py) would refuse the fuzzer's after ten.
        SOLARAPI_REPORTS_PENDING_PER_ACCOUNT="100000",
        SOLARAPI_REPORTS_KEPT_PER_ACCOUNT="100000",
        # As shipped: the first sandbox request does not wait seconds for the model's imports.
        SOLARAPI_WARM_START="true",
        **(
            {"SOLARAPI_DB_POOL_SIZE": "4"} if settings.database_url.startswith("postgresql") else {}
        ),
    )


@dataclass
class Outcome:
    statuses: dict[tuple[str, str, str], list[int]] = field(
        default_factory=lambda: defaultdict(list)
    )
    failures: list[str] = field(default_factory=list)


def fuzz_operation(
    operation: Any, world: World, env: Environment, server: Server, outcome: Outcome
) -> None:
    method, path = operation.method.upper(), operation.path.removeprefix(API)
    names = [p.name for p in operation.path_parameters]
    fixed = {name: world.seeded[name] for name in names}
    headers = {"Authorization": f"Bearer {world.key}"}
    fresh = FRESH.get((method, path))
    excluded = (
        [positive_data_acceptance]
        if (method, path) in CROSS_FIELD_RULES or (method, path, env) in KEY_RULES
        else []
    )
    session = requests.Session()
    strategy = st.one_of(
        operation.as_strategy(GenerationMode.POSITIVE, path_parameters=fixed),
        operation.as_strategy(GenerationMode.NEGATIVE, path_parameters=fixed),
    )

    @settings(
        max_examples=FUZZ_EXAMPLES,
        derandomize=FUZZ_SEED is None,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def run(case: Any) -> None:
        if (method, path) == ("POST", "/webhooks"):
            world.room_for_webhook()  # a generated creation is not refused for the count
        if fresh is not None:
            # One valid id for another: the case stays as valid (or invalid) as generated.
            for name in names:
                case.path_parameters[name] = fresh(world)
        try:
            response = case.call_and_validate(
                base_url=server.base, session=session, headers=headers, excluded_checks=excluded
            )
        except (Exception, FailureGroup) as failure:
            outcome.failures.append(f"{method} {path} [{env.value}]\n{failure}")
            return
        outcome.statuses[(method, path, env.value)].append(response.status_code)
        if (leak := python_internals(response)) is not None:
            outcome.failures.append(f"{method} {path} [{env.value}]: {leak}")

    if FUZZ_SEED is not None and FUZZ_SEED != "random":
        run = hypothesis_seed(int(FUZZ_SEED))(run)
    run()
    if (method, path) == ("POST", "/webhooks"):
        world.room_for_webhook()
    if (good := KNOWN_GOOD.get((method, path))) is not None:
        # A request known to be valid, checked like the generated ones (with every check).
        made = good(world)
        made["path_parameters"] = {**fixed, **made.get("path_parameters", {})}
        case = operation.Case(media_type="application/json", **made)
        try:
            response = case.call_and_validate(
                base_url=server.base, session=session, headers=headers
            )
        except (Exception, FailureGroup) as failure:
            outcome.failures.append(f"{method} {path} [{env.value}], known good\n{failure}")
            return
        outcome.statuses[(method, path, env.value)].append(response.status_code)


# What an error message must never show (issue 28 item 18): Python's reprs and exception texts
# ("timedelta(hours=24)", "Invalid isoformat string: '…'", "datetime.date(…)", tracebacks),
# instead of the rule in our words.
PYTHON_INTERNALS = re.compile(
    r"timedelta\(|datetime\.|date\(\d|Decimal\(|isoformat|Traceback|NoneType|object at 0x"
    r"|<class |Error\(|\bint\(\)|invalid literal for|could not convert string"
)


def python_internals(response: Any) -> str | None:
    """The error message of a 4xx/5xx answer if it shows a Python internal, else None."""
    if response.status_code < 400 or "json" not in response.headers.get("content-type", ""):
        return None
    try:
        message = str(response.json().get("error", ""))
    except ValueError:
        return None
    return (
        f"Python internals in the message: {message!r}"
        if PYTHON_INTERNALS.search(message)
        else None
    )


# positive_data_acceptance ("a schema-valid request is accepted") is off for these operations
# only: each has a rule JSON Schema cannot state, so some schema-valid requests are rightly
# answered 400. Every other check runs on them, and every check on every other operation.
CROSS_FIELD_RULES: dict[tuple[str, str], str] = {
    ("GET", "/systems/{system_id}/readings"): "`from` before `to`, a bounded range",
    ("GET", "/systems/{system_id}/market-value"): "`from` before `to`, a bounded range",
    ("GET", "/market-prices"): "`from` before `to`, a bounded range",
    ("GET", "/systems/{system_id}/performance"): "`from` before `to`, a bounded range",
    ("GET", "/systems/{system_id}/irradiance"): "`from` before `to`, at most 31 days",
    ("POST", "/systems/{system_id}/irradiance"): "no quarter-hour in the future, no repeat",
    ("POST", "/systems/{system_id}/readings"): "energy at most the system's capacity × 375, "
    "no reading in the future",
    ("POST", "/reports"): "`from` before `to`; `interval` not with declarations reports; "
    "`timezone` when the systems' clocks differ",
    ("POST", "/declarations"): "start before end, at most 366 days, ending before today",
    ("PATCH", "/declarations/{declaration_id}"): "start before end, at most 366 days, "
    "ending before today",
    ("POST", "/webhooks"): "the URL must not resolve to a private address (depends on DNS)",
    ("PATCH", "/webhooks/{webhook_id}"): "the URL must not resolve to a private address",
    ("GET", "/readings/changes"): "a cursor must carry this server's signature",
    ("GET", "/portfolio/readings"): "`from` before `to`, bounded ranges and pages; "
    "`system_ids` without repeats, at most 1,000",
    ("GET", "/portfolio/summary"): "`system_ids` without repeats, at most 1,000",
    ("GET", "/portfolio/market-value"): "`from` before `to`, bounded ranges and pages; "
    "`system_ids` without repeats, at most 1,000",
}

# For those rules, random requests seldom meet them: one valid request each, so the operation
# is seen succeeding (and its answer checked) too.
KNOWN_GOOD: dict[tuple[str, str], Callable[[World], dict[str, Any]]] = {
    ("GET", "/readings/changes"): lambda _: {"query": {"limit": 10}},
    ("GET", "/portfolio/readings"): lambda _: {"query": DAY},
    ("GET", "/portfolio/summary"): lambda _: {"query": {"limit": 10}},
    ("GET", "/portfolio/market-value"): lambda _: {"query": DAY},
    ("GET", "/systems/{system_id}/readings"): lambda _: {"query": DAY},
    ("GET", "/systems/{system_id}/market-value"): lambda _: {"query": DAY},
    ("GET", "/market-prices"): lambda _: {"query": {"zone": "NL", **DAY}},
    ("GET", "/systems/{system_id}/performance"): lambda _: {"query": DAY},
    ("GET", "/systems/{system_id}/irradiance"): lambda _: {"query": DAY},
    ("POST", "/systems/{system_id}/irradiance"): lambda _: {
        "body": {"readings": [{"timestamp": "2025-05-03T00:00:00Z", "poa_w_m2": 612.5}]}
    },
    ("POST", "/systems/{system_id}/readings"): lambda _: {
        "body": {"readings": [{"timestamp": "2025-05-03T00:00:00Z", "energy_wh": 12.5}]}
    },
    ("POST", "/reports"): lambda _: {"body": REPORT},
    ("POST", "/declarations"): lambda world: {"body": world.draft_body()},
    ("PATCH", "/declarations/{declaration_id}"): lambda world: {
        "path_parameters": {"declaration_id": world.fresh_draft()},
        "body": {"period_end": "2025-05-01"},
    },
    ("POST", "/webhooks"): lambda _: {"body": {"url": WEBHOOK_URL, "events": ["system.created"]}},
    ("PATCH", "/webhooks/{webhook_id}"): lambda world: {
        "path_parameters": {"webhook_id": world.fresh_webhook()},
        "body": {"url": WEBHOOK_URL},
    },
}

# The same, for one kind of key: the document is one for both.
KEY_RULES: dict[tuple[str, str, Environment], str] = {
    ("POST", "/systems", Environment.LIVE): "`data_source: simulated` is for sandbox systems",
}

# Operations that cannot succeed with one kind of key, and the answer they give instead: in
# the sandbox a submitted declaration is decided at once, and a decided one cannot be withdrawn.
INSTEAD: dict[tuple[str, str, Environment], int] = {
    ("POST", "/declarations/{declaration_id}/withdraw", Environment.TEST): 409,
    # The fuzzer holds API keys; a logger's upload takes an ingest token only
    # (tests/ingest/test_ingest_tokens.py sends real ones).
    ("POST", "/ingest/readings", Environment.LIVE): 401,
    ("POST", "/ingest/readings", Environment.TEST): 401,
}


def _lines_of_requests(errors: list[str], lines: list[dict[str, Any]]) -> list[str]:
    """The log lines (the request line with its method and path among them) of every request
    an error line names: the error alone does not say which request caused it."""
    ids = {orjson.loads(e).get("request_id") for e in errors if e.startswith("{")} - {None}
    return [orjson.dumps(line).decode() for line in lines if line.get("request_id") in ids]


def test_schemathesis_finds_nothing(fuzz_settings: Settings, tmp_path: Path) -> None:
    worlds = asyncio.run(seed(fuzz_settings))
    outcome = Outcome()
    with served(fuzz_env(fuzz_settings)) as server:
        # The contract ignores unknown query parameters, so requests that add some are not
        # schema-violating ones (schemathesis would expect them refused).
        config = SchemathesisConfig.from_dict({"generation": {"allow-extra-parameters": False}})
        schema = schemathesis.openapi.from_url(f"{server.base}{API}/openapi.json", config=config)
        operations = [result.ok() for result in schema.get_all_operations()]
        assert len(operations) >= 30
        operations = [
            op
            for op in operations
            if FUZZ_OPERATIONS.search(f"{op.method.upper()} {op.path.removeprefix(API)}")
        ]
        for env, (key, ids) in worlds.items():
            with httpx.Client(
                base_url=server.base, headers={"Authorization": f"Bearer {key}"}, timeout=60
            ) as http:
                world = World(key, http, ids)
                # The sandbox model simulates a system's year so far on its first summary
                # (seconds per system on a busy machine, then kept): warm it for the fleet
                # summary, whose first answer would otherwise outlast the fuzzer's 10 s.
                assert http.get(f"{API}/portfolio/summary").status_code == 200
                for operation in operations:
                    fuzz_operation(operation, world, env, server, outcome)
        errors = server.errors()
        lines = server.lines()
    # What was sent, for a deeper campaign's record (`pytest -rP` shows it).
    print(f"requests and statuses per operation and key ({FUZZ_EXAMPLES=}, {FUZZ_SEED=}):")
    for (method, path, on), statuses in sorted(outcome.statuses.items()):
        counts = ", ".join(f"{s}×{n}" for s, n in sorted(Counter(statuses).items()))
        print(f"  {method} {path} [{on}]: {len(statuses)}: {counts}")
    assert not outcome.failures, (
        f"{len(outcome.failures)} schemathesis failures:\n\n" + "\n\n".join(outcome.failures)
    )
    assert not errors, (
        "error lines in the server's log:\n"
        + "\n".join(errors)
        + "\n\nevery log line of those requests:\n"
        + "\n".join(_lines_of_requests(errors, lines))
    )
    every = {(op.method.upper(), op.path.removeprefix(API)) for op in operations}
    for env in worlds:
        reached = {
            (method, path)
            for (method, path, on), statuses in outcome.statuses.items()
            if on == env.value and any(200 <= status < 300 for status in statuses)
        }
        instead = {(m, p) for (m, p, on) in INSTEAD if on is env} & every
        missing = every - reached - instead
        assert not missing, (env.value, sorted(missing), dict(outcome.statuses))
        for method, path in instead:
            answered = outcome.statuses[(method, path, env.value)]
            assert INSTEAD[(method, path, env)] in answered, (method, path, env, answered)


def test_the_internals_check_recognises_python_reprs() -> None:
    """The check above can fail: these are the texts issue 28 item 18 found in messages."""

    class Answer:
        status_code = 400

        def __init__(self, message: str) -> None:
            self.message = message
            self.headers = {"content-type": "application/json"}

        def json(self) -> dict[str, str]:
            return {"error": self.message, "code": "invalid_parameter"}

    assert python_internals(Answer("range longer than timedelta(hours=24)")) is not None
    assert python_internals(Answer("Invalid isoformat string: '2026-13-01'")) is not None
    assert python_internals(Answer("`from` must be before `to`")) is None
