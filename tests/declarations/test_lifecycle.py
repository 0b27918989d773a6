"""Declarations through HTTP: creation, numbers from readings, validation, overlap, history,
the sandbox decision and system deletion."""

from __future__ import annotations

import math
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from fastapi import FastAPI

from solarapi.kit.plans import Environment
from solarapi.kit.timefmt import utcnow
from tests.declarations.factories import (
    MAY_1,
    create_declaration,
    make_system,
    operator_decides,
    upload,
    upload_days,
)
from tests.support import Tenant, client_for


async def test_create_computes_metered_energy_and_coverage(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as client:
        system = await make_system(client)
        uploaded = await upload_days(client, system, date(2025, 5, 1), date(2025, 5, 2))
        response = await create_declaration(client, system["id"], reference="GO-2025-05")
        assert response.status_code == 201, response.text
        body = response.json()
        assert response.headers["Location"] == f"/api/v1/declarations/{body['id']}"
        assert body["id"].startswith("dcl_")
        assert body["metered_energy_wh"] == round(sum(uploaded.values()), 3)
        assert body["energy_wh"] == body["metered_energy_wh"]
        assert body["coverage"] == 1.0
        assert body["status"] == "draft"
        assert body["certificates"] is None
        assert body["reference"] == "GO-2025-05"
        assert body["submitted_at"] is None
        assert body["decided_at"] is None
        assert body["created_at"].endswith("Z")

        fetched = await client.get(f"/api/v1/declarations/{body['id']}")
        assert fetched.status_code == 200
        assert fetched.json() == body


async def test_metered_energy_equals_the_readings_endpoint_total(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as client:
        system = await make_system(client, timezone="America/New_York")
        # Readings beyond the period on both sides must not count.
        await upload_days(client, system, date(2025, 3, 8), date(2025, 3, 12))
        created = await create_declaration(
            client,
            system["id"],
            type="production_subsidy",
            period_start="2025-03-09",  # the spring-forward day in New York: 23 hours
            period_end="2025-03-11",
        )
        assert created.status_code == 201, created.text
        tz = ZoneInfo("America/New_York")
        start = datetime(2025, 3, 9, tzinfo=tz)
        end = datetime(2025, 3, 12, tzinfo=tz)
        readings = await client.get(
            f"/api/v1/systems/{system['id']}/readings",
            params={"from": start.isoformat(), "to": end.isoformat(), "interval": "1d"},
        )
        assert readings.status_code == 200, readings.text
        totals = readings.json()["meta"]["totals"]
        assert created.json()["metered_energy_wh"] == totals["energy_wh"]
        assert totals["samples"] == 92 + 96 + 96


async def test_a_sydney_day_is_not_a_utc_day(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system = await make_system(client, timezone="Australia/Sydney")
        # Sydney is UTC+10 in May: local 2025-05-01 is [2025-04-30T14:00Z, 2025-05-01T14:00Z).
        base = datetime.fromisoformat("2025-04-30T12:00:00+00:00")
        values = {base + timedelta(minutes=15 * i): 100.0 + i for i in range(26 * 4)}
        await upload(client, system["id"], values)
        first = datetime.fromisoformat("2025-04-30T14:00:00+00:00")
        last = datetime.fromisoformat("2025-05-01T14:00:00+00:00")
        expected = sum(v for at, v in values.items() if first <= at < last)
        created = await create_declaration(
            client, system["id"], period_start="2025-05-01", period_end="2025-05-01"
        )
        assert created.status_code == 201, created.text
        assert created.json()["metered_energy_wh"] == expected
        assert created.json()["coverage"] == 1.0


async def test_coverage_counts_the_quarter_hours_of_dst_days(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as client:
        system = await make_system(client)
        # 2025-10-26 is 25 hours in Amsterdam: 100 quarter-hours. Leave 5 out → 95/100.
        await upload_days(client, system, date(2025, 10, 26), date(2025, 10, 26), skip=5)
        created = await create_declaration(
            client, system["id"], period_start="2025-10-26", period_end="2025-10-26"
        )
        assert created.status_code == 201, created.text
        assert created.json()["coverage"] == 0.95
        # 2025-03-30 is 23 hours: 92 quarter-hours, all present → 1.0 (not 92/96).
        await upload_days(client, system, date(2025, 3, 30), date(2025, 3, 30))
        spring = await create_declaration(
            client, system["id"], period_start="2025-03-30", period_end="2025-03-30"
        )
        assert spring.status_code == 201, spring.text
        assert spring.json()["coverage"] == 1.0


async def test_coverage_below_095_refuses_submit_until_readings_arrive(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as client:
        system = await make_system(client)
        # 2 days = 192 quarter-hours; 10 missing → 182/192 = 0.9479…
        uploaded = await upload_days(client, system, MAY_1, date(2025, 5, 2), skip=10)
        created = await create_declaration(client, system["id"])
        assert created.status_code == 201
        declaration = created.json()
        assert declaration["coverage"] == 0.947  # rounded down, never shown as 0.95
        refused = await client.post(f"/api/v1/declarations/{declaration['id']}/submit")
        assert refused.status_code == 409
        assert refused.json()["code"] == "conflict"
        assert "coverage" in refused.json()["error"]
        assert "182 of 192" in refused.json()["error"]
        still = await client.get(f"/api/v1/declarations/{declaration['id']}")
        assert still.json()["status"] == "draft"

        complete = await upload_days(client, system, MAY_1, date(2025, 5, 2))
        submitted = await client.post(f"/api/v1/declarations/{declaration['id']}/submit")
        assert submitted.status_code == 200, submitted.text
        body = submitted.json()
        assert body["status"] == "submitted"
        assert body["coverage"] == 1.0
        # Recomputed at submit: the late readings count; the declared value stays.
        assert body["metered_energy_wh"] == round(sum(complete.values()), 3)
        assert body["energy_wh"] == round(sum(uploaded.values()), 3)
        assert body["submitted_at"] is not None


async def test_declared_energy_above_metered_is_refused(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system = await make_system(client)
        uploaded = await upload_days(client, system, MAY_1, date(2025, 5, 2))
        metered = round(sum(uploaded.values()), 3)
        above = await create_declaration(client, system["id"], energy_wh=metered + 0.01)
        assert above.status_code == 400
        assert above.json()["code"] == "validation"
        assert "energy_wh" in above.json()["error"]
        below = await create_declaration(client, system["id"], energy_wh=metered - 1000)
        assert below.status_code == 201
        assert below.json()["energy_wh"] == metered - 1000
        assert below.json()["metered_energy_wh"] == metered

        patched = await client.patch(
            f"/api/v1/declarations/{below.json()['id']}", json={"energy_wh": metered + 1}
        )
        assert patched.status_code == 400
        reset = await client.patch(
            f"/api/v1/declarations/{below.json()['id']}", json={"energy_wh": None}
        )
        assert reset.status_code == 200
        assert reset.json()["energy_wh"] == metered


async def test_patch_changes_period_and_recomputes(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system = await make_system(client)
        uploaded = await upload_days(client, system, MAY_1, date(2025, 5, 3))
        created = (await create_declaration(client, system["id"], energy_wh=5.0)).json()
        patched = await client.patch(
            f"/api/v1/declarations/{created['id']}",
            json={"period_end": "2025-05-01", "reference": "R-1"},
        )
        assert patched.status_code == 200, patched.text
        body = patched.json()
        tz = ZoneInfo("Europe/Amsterdam")
        day_end = datetime(2025, 5, 2, tzinfo=tz)
        assert body["metered_energy_wh"] == round(
            sum(v for at, v in uploaded.items() if at < day_end), 3
        )
        assert body["energy_wh"] == 5.0
        assert body["period_end"] == "2025-05-01"
        assert body["reference"] == "R-1"
        assert body["updated_at"] >= created["updated_at"]
        cleared = await client.patch(
            f"/api/v1/declarations/{created['id']}", json={"reference": None}
        )
        assert cleared.json()["reference"] is None
        assert cleared.json()["period_end"] == "2025-05-01"


async def test_period_validation(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system = await make_system(client, timezone="Australia/Sydney")
        today = utcnow().astimezone(ZoneInfo("Australia/Sydney")).date()
        yesterday = today - timedelta(days=1)
        await upload_days(client, system, yesterday, yesterday)
        cases: list[tuple[dict[str, Any], str]] = [
            ({"period_start": "2025-05-03", "period_end": "2025-05-01"}, "period_start"),
            ({"period_start": today.isoformat(), "period_end": today.isoformat()}, "today"),
            ({"period_start": "2025-5-1"}, "period_start"),
            ({"period_end": "2025-05-01T00:00:00Z"}, "period_end"),
            ({"period_end": 20250501}, "period_end"),
            ({"type": "green"}, "type"),
            ({"energy_wh": -1}, "energy_wh"),
            ({"energy_wh": "12"}, "energy_wh"),
            ({"period_start": "2024-05-01"}, "days"),
            ({"owner": "me"}, "owner"),
        ]
        for fields, word in cases:
            response = await create_declaration(client, system["id"], **fields)
            assert response.status_code == 400, (fields, response.text)
            assert response.json()["code"] == "validation"
            assert word in response.json()["error"], (fields, response.json())
        # Yesterday in Sydney is a whole past day there: accepted.
        accepted = await create_declaration(
            client,
            system["id"],
            period_start=yesterday.isoformat(),
            period_end=yesterday.isoformat(),
        )
        assert accepted.status_code == 201, accepted.text
        assert accepted.json()["coverage"] == 1.0
        patched = await client.patch(
            f"/api/v1/declarations/{accepted.json()['id']}", json={"period_start": None}
        )
        assert patched.status_code == 400


async def test_a_draft_may_precede_its_readings_and_submission_waits_for_them(
    app: FastAPI, enterprise: Tenant
) -> None:
    """The contract gates submission on coverage (409), not creation: a draft for a period
    without readings is created with coverage 0 and null energies, never zeros."""
    async with client_for(app, enterprise.live) as client:
        system = await make_system(client)
        created = await create_declaration(client, system["id"], reference="GO-EARLY")
        assert created.status_code == 201, created.text
        draft = created.json()
        assert draft["status"] == "draft"
        assert draft["coverage"] == 0.0
        assert draft["metered_energy_wh"] is None
        assert draft["energy_wh"] is None
        read = await client.get(f"/api/v1/declarations/{draft['id']}")
        assert read.json() == draft

        # Stating more than was metered (nothing yet) is the usual 400.
        over = await create_declaration(client, system["id"], type="feed_in", energy_wh=1000.0)
        assert over.status_code == 400, over.text
        assert "no readings yet" in over.json()["error"]
        # The figure as the user sent it, digits and all (`:g` wrote 1.23457e+07).
        large = await create_declaration(client, system["id"], type="feed_in", energy_wh=12345678.9)
        assert large.status_code == 400, large.text
        assert "energy_wh (12,345,678.9) exceeds" in large.json()["error"]
        zero = await create_declaration(client, system["id"], type="feed_in", energy_wh=0.0)
        assert zero.status_code == 201, zero.text
        assert zero.json()["energy_wh"] == 0.0

        # Submission is what the coverage gates.
        early = await client.post(f"/api/v1/declarations/{draft['id']}/submit")
        assert early.status_code == 409, early.text
        assert early.json()["code"] == "conflict"
        assert "coverage is 0.000" in early.json()["error"]
        assert (await client.get(f"/api/v1/declarations/{draft['id']}")).json() == draft

        # The readings arrive: the draft declares the metered energy when submitted.
        uploaded = await upload_days(client, system, MAY_1, date(2025, 5, 2))
        submitted = await client.post(f"/api/v1/declarations/{draft['id']}/submit")
        assert submitted.status_code == 200, submitted.text
        body = submitted.json()
        assert body["status"] == "submitted"
        assert body["coverage"] == 1.0
        assert body["metered_energy_wh"] == round(sum(uploaded.values()), 3)
        assert body["energy_wh"] == body["metered_energy_wh"]


async def test_a_draft_without_readings_follows_the_metered_energy_when_changed(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as client:
        system = await make_system(client)
        draft = (await create_declaration(client, system["id"])).json()
        uploaded = await upload_days(client, system, MAY_1, MAY_1)
        patched = await client.patch(
            f"/api/v1/declarations/{draft['id']}", json={"reference": "GO-LATER"}
        )
        assert patched.status_code == 200, patched.text
        metered = round(sum(uploaded.values()), 3)
        assert patched.json()["metered_energy_wh"] == metered
        assert patched.json()["energy_wh"] == metered
        assert patched.json()["coverage"] == 0.5


async def test_overlap_rule(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        system = await make_system(client)
        await upload_days(client, system, MAY_1, date(2025, 5, 6))
        first = (
            await create_declaration(
                client, system["id"], period_start="2025-05-01", period_end="2025-05-03"
            )
        ).json()
        overlapping = await create_declaration(
            client, system["id"], period_start="2025-05-03", period_end="2025-05-05"
        )
        assert overlapping.status_code == 409
        assert first["id"] in overlapping.json()["error"]
        # The advice is what frees the period from a draft.
        assert overlapping.json()["error"].endswith(
            "; delete it, or choose a period that does not overlap"
        )
        other_type = await create_declaration(
            client,
            system["id"],
            type="feed_in",
            period_start="2025-05-03",
            period_end="2025-05-05",
        )
        assert other_type.status_code == 201
        adjacent = await create_declaration(
            client, system["id"], period_start="2025-05-04", period_end="2025-05-05"
        )
        assert adjacent.status_code == 201
        # Moving a draft onto a claimed period is refused like creating one.
        moved = await client.patch(
            f"/api/v1/declarations/{adjacent.json()['id']}", json={"period_start": "2025-05-02"}
        )
        assert moved.status_code == 409

        # Submitted still claims the period; withdrawn frees it.
        assert (await client.post(f"/api/v1/declarations/{first['id']}/submit")).status_code == 200
        again = await create_declaration(
            client, system["id"], period_start="2025-05-01", period_end="2025-05-01"
        )
        assert again.status_code == 409
        assert again.json()["error"].endswith(
            "; withdraw it, or choose a period that does not overlap"
        )
        await client.post(f"/api/v1/declarations/{first['id']}/withdraw")
        freed = await create_declaration(
            client, system["id"], period_start="2025-05-01", period_end="2025-05-01"
        )
        assert freed.status_code == 201, freed.text


async def test_rejected_frees_the_period_and_approved_claims_it(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as client:
        system = await make_system(client)
        await upload_days(client, system, MAY_1, date(2025, 5, 2))
        first = (await create_declaration(client, system["id"])).json()
        await client.post(f"/api/v1/declarations/{first['id']}/submit")
        rejected = await operator_decides(app, first["id"], approve=False, reason="wrong meter")
        assert rejected["status"] == "rejected"
        assert rejected["status_reason"] == "wrong meter"
        second = await create_declaration(client, system["id"])
        assert second.status_code == 201
        await client.post(f"/api/v1/declarations/{second.json()['id']}/submit")
        approved = await operator_decides(app, second.json()["id"], approve=True)
        assert approved["status"] == "approved"
        third = await create_declaration(client, system["id"], period_start="2025-05-02")
        assert third.status_code == 409
        # An approved declaration is final: the answer does not tell to withdraw or delete it.
        assert third.json()["error"].endswith(
            "; it is approved, which is final: choose a period that does not overlap"
        )
        assert "withdraw" not in third.json()["error"]
        assert "delete" not in third.json()["error"]


async def test_certificates_for_approved_guarantees_of_origin(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as client:
        system = await make_system(client, capacity_kwp=1000.0)
        await upload_days(client, system, MAY_1, date(2025, 5, 2), scale=100.0)
        go = (await create_declaration(client, system["id"], energy_wh=21_999_999.0)).json()
        subsidy = (await create_declaration(client, system["id"], type="feed_in")).json()
        for declaration in (go, subsidy):
            response = await client.post(f"/api/v1/declarations/{declaration['id']}/submit")
            assert response.json()["certificates"] is None
        decided = await operator_decides(app, go["id"], approve=True)
        assert decided["certificates"] == 21  # whole MWh only
        fetched = await client.get(f"/api/v1/declarations/{go['id']}")
        assert fetched.json()["certificates"] == 21
        assert fetched.json()["decided_at"] is not None
        other = await operator_decides(app, subsidy["id"], approve=True)
        assert other["certificates"] is None


async def test_history_records_every_transition(app: FastAPI, enterprise: Tenant) -> None:
    key_id = enterprise.key_ids[Environment.LIVE]
    async with client_for(app, enterprise.live) as client:
        system = await make_system(client)
        await upload_days(client, system, MAY_1, date(2025, 5, 2))
        declaration = (await create_declaration(client, system["id"])).json()
        path = f"/api/v1/declarations/{declaration['id']}"
        await client.patch(path, json={"reference": "X"})
        await client.post(f"{path}/submit")
        await operator_decides(app, declaration["id"], approve=False, reason="meter not certified")
        history = await client.get(f"{path}/history")
        assert history.status_code == 200
        entries = history.json()["data"]
        assert [(e["action"], e["from"], e["to"], e["actor"]) for e in entries] == [
            ("create", None, "draft", key_id),
            ("update", "draft", "draft", key_id),
            ("submit", "draft", "submitted", key_id),
            ("reject", "submitted", "rejected", "operator"),
        ]
        assert entries[-1]["reason"] == "meter not certified"
        assert [e["at"] for e in entries] == sorted(e["at"] for e in entries)
        assert all(e["at"].endswith("Z") for e in entries)


async def test_sandbox_decides_at_once_both_ways(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.test) as client:
        system = await make_system(client, data_source="metered", capacity_kwp=1000.0)
        uploaded = await upload_days(client, system, MAY_1, date(2025, 5, 2), scale=100.0)
        approved = (await create_declaration(client, system["id"])).json()
        response = await client.post(f"/api/v1/declarations/{approved['id']}/submit")
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["status"] == "approved"
        assert body["decided_at"] is not None
        assert body["certificates"] == math.floor(round(sum(uploaded.values()), 3) / 1e6)
        history = (await client.get(f"/api/v1/declarations/{approved['id']}/history")).json()
        assert [(e["action"], e["actor"]) for e in history["data"][-2:]] == [
            ("submit", enterprise.key_ids[Environment.TEST]),
            ("approve", "sandbox"),
        ]

        # Declare all of May 3, then lower the readings: the submit re-reads and rejects.
        await upload_days(client, system, date(2025, 5, 3), date(2025, 5, 3), scale=100.0)
        rejected = (
            await create_declaration(
                client, system["id"], period_start="2025-05-03", period_end="2025-05-03"
            )
        ).json()
        await upload_days(client, system, date(2025, 5, 3), date(2025, 5, 3), scale=50.0)
        response = await client.post(f"/api/v1/declarations/{rejected['id']}/submit")
        body = response.json()
        assert body["status"] == "rejected"
        assert body["metered_energy_wh"] < body["energy_wh"]
        assert "exceeds" in body["status_reason"]
        assert f"{body['metered_energy_wh']:,.3f}".rstrip("0").rstrip(".") in body["status_reason"]
        assert body["certificates"] is None
        history = (await client.get(f"/api/v1/declarations/{rejected['id']}/history")).json()
        last = history["data"][-1]
        assert (last["action"], last["actor"], last["from"], last["to"]) == (
            "reject",
            "sandbox",
            "submitted",
            "rejected",
        )
        assert last["reason"] == body["status_reason"]


async def test_system_deletion_is_blocked_while_submitted_or_approved(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as client:
        system = await make_system(client)
        await upload_days(client, system, MAY_1, date(2025, 5, 2))
        declaration = (await create_declaration(client, system["id"])).json()
        path = f"/api/v1/declarations/{declaration['id']}"
        await client.post(f"{path}/submit")
        blocked = await client.delete(f"/api/v1/systems/{system['id']}")
        assert blocked.status_code == 409
        await operator_decides(app, declaration["id"], approve=True)
        assert (await client.delete(f"/api/v1/systems/{system['id']}")).status_code == 409

        other = await make_system(client)
        await upload_days(client, other, MAY_1, date(2025, 5, 2))
        withdrawn = (await create_declaration(client, other["id"])).json()
        draft = (await create_declaration(client, other["id"], type="feed_in")).json()
        await client.post(f"/api/v1/declarations/{withdrawn['id']}/submit")
        await client.post(f"/api/v1/declarations/{withdrawn['id']}/withdraw")
        deleted = await client.delete(f"/api/v1/systems/{other['id']}")
        assert deleted.status_code == 204, deleted.text
        # Its draft and withdrawn declarations went with it.
        for gone in (withdrawn, draft):
            assert (await client.get(f"/api/v1/declarations/{gone['id']}")).status_code == 404


async def test_list_filters_and_order(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        one = await make_system(client)
        two = await make_system(client)
        await upload_days(client, one, MAY_1, date(2025, 5, 4))
        await upload_days(client, two, MAY_1, date(2025, 5, 4))
        made: list[dict[str, Any]] = []
        for system, kind, start in [
            (one, "guarantee_of_origin", "2025-05-01"),
            (one, "feed_in", "2025-05-01"),
            (two, "guarantee_of_origin", "2025-05-01"),
            (two, "guarantee_of_origin", "2025-05-03"),
        ]:
            response = await create_declaration(
                client, system["id"], type=kind, period_start=start, period_end=start
            )
            assert response.status_code == 201, response.text
            made.append(response.json())
        await client.post(f"/api/v1/declarations/{made[3]['id']}/submit")

        everything = (await client.get("/api/v1/declarations")).json()
        ordered = sorted(made, key=lambda d: (d["created_at"], d["id"]), reverse=True)
        assert [d["id"] for d in everything["data"]] == [d["id"] for d in ordered]
        assert everything["pagination"]["total"] == 4

        by_system = (
            await client.get("/api/v1/declarations", params={"system_id": two["id"]})
        ).json()
        assert {d["id"] for d in by_system["data"]} == {made[2]["id"], made[3]["id"]}
        by_type = (await client.get("/api/v1/declarations", params={"type": "feed_in"})).json()
        assert [d["id"] for d in by_type["data"]] == [made[1]["id"]]
        by_status = (
            await client.get("/api/v1/declarations", params={"status": "submitted"})
        ).json()
        assert [d["id"] for d in by_status["data"]] == [made[3]["id"]]

        page = await client.get("/api/v1/declarations", params={"limit": 3, "page": 2})
        assert [d["id"] for d in page.json()["data"]] == [ordered[3]["id"]]
        assert page.json()["pagination"]["has_more"] is False
        assert 'rel="prev"' in page.headers["Link"]

        for params in ({"status": "open"}, {"type": "go"}, {"limit": "0"}):
            bad = await client.get("/api/v1/declarations", params=params)
            assert bad.status_code == 400, params
            assert bad.json()["code"] == "validation"
