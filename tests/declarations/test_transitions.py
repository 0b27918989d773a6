"""Every (status, action) pair of the state machine through the real interfaces, generated
from the table: a new status or action cannot go untested. Plus the races."""

from __future__ import annotations

import asyncio
from datetime import date
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from solarapi.auth.principal import Caller
from solarapi.declarations.schemas import DeclarationCreate
from solarapi.declarations.service import create_declaration as create_declaration_in_service
from solarapi.declarations.service import submit_declaration
from solarapi.declarations.statemachine import (
    EXISTING_ACTIONS,
    DeclarationAction,
    DeclarationStatus,
    is_allowed,
    transition_for,
)
from solarapi.errors import Conflict
from solarapi.kit.plans import Environment
from solarapi.kit.timefmt import utcnow
from tests.declarations.factories import (
    MAY_1,
    create_declaration,
    make_system,
    operator_decides,
    upload_days,
)
from tests.support import Tenant, client_for

# How a test brings a fresh draft into each status (live environment).
_ROUTE: dict[DeclarationStatus, list[DeclarationAction]] = {
    DeclarationStatus.DRAFT: [],
    DeclarationStatus.SUBMITTED: [DeclarationAction.SUBMIT],
    DeclarationStatus.APPROVED: [DeclarationAction.SUBMIT, DeclarationAction.APPROVE],
    DeclarationStatus.REJECTED: [DeclarationAction.SUBMIT, DeclarationAction.REJECT],
    DeclarationStatus.WITHDRAWN: [DeclarationAction.SUBMIT, DeclarationAction.WITHDRAW],
}

# The HTTP status each allowed action answers with.
_SUCCESS: dict[DeclarationAction, int] = {
    DeclarationAction.UPDATE: 200,
    DeclarationAction.DELETE: 204,
    DeclarationAction.SUBMIT: 200,
    DeclarationAction.WITHDRAW: 200,
    DeclarationAction.APPROVE: 200,
    DeclarationAction.REJECT: 200,
}


def test_every_status_has_a_route_and_every_action_a_performer() -> None:
    assert set(_ROUTE) == set(DeclarationStatus)
    assert set(_SUCCESS) == set(EXISTING_ACTIONS)
    for status, route in _ROUTE.items():
        current = DeclarationStatus.DRAFT
        for action in route:
            target = transition_for(current, action).target
            assert target is not None
            current = target
        assert current is status


async def perform(
    app: FastAPI, client: httpx.AsyncClient, declaration_id: str, action: DeclarationAction
) -> tuple[int, str]:
    """Do `action` the way its actor does it: a client over HTTP, or the operator's CLI code.
    Returns (HTTP-equivalent status, error message or '')."""
    path = f"/api/v1/declarations/{declaration_id}"
    if action in (DeclarationAction.APPROVE, DeclarationAction.REJECT):
        try:
            await operator_decides(
                app,
                declaration_id,
                approve=action is DeclarationAction.APPROVE,
                reason="tested" if action is DeclarationAction.REJECT else None,
            )
        except Conflict as refused:
            return 409, refused.message
        return 200, ""
    if action is DeclarationAction.UPDATE:
        response = await client.patch(path, json={"reference": "changed"})
    elif action is DeclarationAction.DELETE:
        response = await client.delete(path)
    else:
        response = await client.post(f"{path}/{action.value}")
    error = response.json()["error"] if response.status_code >= 400 else ""
    return response.status_code, error


@pytest.mark.parametrize("action", EXISTING_ACTIONS, ids=str)
@pytest.mark.parametrize("status", list(DeclarationStatus), ids=str)
async def test_every_status_action_pair(
    app: FastAPI, enterprise: Tenant, status: DeclarationStatus, action: DeclarationAction
) -> None:
    async with client_for(app, enterprise.live) as client:
        system = await make_system(client)
        await upload_days(client, system, MAY_1, date(2025, 5, 2))
        created = await create_declaration(client, system["id"])
        declaration_id = created.json()["id"]
        for step in _ROUTE[status]:
            code, error = await perform(app, client, declaration_id, step)
            assert code == _SUCCESS[step], error
        before = await client.get(f"/api/v1/declarations/{declaration_id}")
        assert before.json()["status"] == status.value
        history_before = (
            await client.get(f"/api/v1/declarations/{declaration_id}/history")
        ).json()["data"]

        code, error = await perform(app, client, declaration_id, action)
        after = await client.get(f"/api/v1/declarations/{declaration_id}")
        if is_allowed(status, action):
            assert code == _SUCCESS[action], error
            target = transition_for(status, action).target
            if target is None:
                assert after.status_code == 404
            else:
                assert after.json()["status"] == target.value
                history = (
                    await client.get(f"/api/v1/declarations/{declaration_id}/history")
                ).json()["data"]
                assert len(history) == len(history_before) + 1
                assert (history[-1]["action"], history[-1]["from"], history[-1]["to"]) == (
                    action.value,
                    status.value,
                    target.value,
                )
        else:
            assert code == 409, error
            assert f"'{status.value}'" in error  # names the current status
            assert declaration_id in error
            # Nothing changed, not even the history.
            assert after.json() == before.json()
            history = (await client.get(f"/api/v1/declarations/{declaration_id}/history")).json()[
                "data"
            ]
            assert history == history_before


async def _draft(client: httpx.AsyncClient, **fields: Any) -> tuple[dict[str, Any], str]:
    system = await make_system(client)
    await upload_days(client, system, MAY_1, date(2025, 5, 4))
    created = await create_declaration(client, system["id"], **fields)
    assert created.status_code == 201, created.text
    return system, created.json()["id"]


async def test_concurrent_creates_cannot_both_claim_a_period(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as client:
        system = await make_system(client)
        await upload_days(client, system, MAY_1, date(2025, 5, 4))
        periods = [("2025-05-01", "2025-05-02"), ("2025-05-02", "2025-05-03")] * 3
        responses = await asyncio.gather(
            *(
                create_declaration(client, system["id"], period_start=s, period_end=e)
                for s, e in periods
            )
        )
        codes = sorted(r.status_code for r in responses)
        assert codes == [201, 409, 409, 409, 409, 409], [r.text for r in responses]
        listed = (
            await client.get("/api/v1/declarations", params={"system_id": system["id"]})
        ).json()
        assert listed["pagination"]["total"] == 1


async def test_concurrent_submits_and_withdraws_one_wins(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        _, declaration_id = await _draft(client)
        path = f"/api/v1/declarations/{declaration_id}"
        submits = await asyncio.gather(*(client.post(f"{path}/submit") for _ in range(4)))
        assert sorted(r.status_code for r in submits) == [200, 409, 409, 409]
        for refused in (r for r in submits if r.status_code == 409):
            assert "'submitted'" in refused.json()["error"]

        withdraws = await asyncio.gather(*(client.post(f"{path}/withdraw") for _ in range(4)))
        assert sorted(r.status_code for r in withdraws) == [200, 409, 409, 409]
        history = (await client.get(f"{path}/history")).json()["data"]
        assert [e["action"] for e in history] == ["create", "submit", "withdraw"]


async def test_withdraw_racing_the_operator_decision(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        _, declaration_id = await _draft(client)
        path = f"/api/v1/declarations/{declaration_id}"
        assert (await client.post(f"{path}/submit")).status_code == 200

        async def decide() -> str:
            try:
                return str((await operator_decides(app, declaration_id, approve=True))["status"])
            except Conflict:
                return "refused"

        withdraw, decision = await asyncio.gather(client.post(f"{path}/withdraw"), decide())
        final = (await client.get(path)).json()["status"]
        if withdraw.status_code == 200:
            assert decision == "refused"
            assert final == "withdrawn"
        else:
            assert withdraw.status_code == 409
            assert decision == "approved"
            assert final == "approved"


async def test_concurrent_submit_and_delete(app: FastAPI, enterprise: Tenant) -> None:
    async with client_for(app, enterprise.live) as client:
        _, declaration_id = await _draft(client)
        path = f"/api/v1/declarations/{declaration_id}"
        submit, delete = await asyncio.gather(client.post(f"{path}/submit"), client.delete(path))
        after = await client.get(path)
        if delete.status_code == 204:
            # The submit lost: it found nothing (404) or saw the deletion under the lock (409).
            assert submit.status_code in (404, 409), submit.text
            assert after.status_code == 404
        else:
            assert (submit.status_code, delete.status_code) == (200, 409)
            assert "'submitted'" in delete.json()["error"]
            assert after.json()["status"] == "submitted"


async def test_concurrent_creates_in_the_service_without_the_gateway(
    app: FastAPI, enterprise: Tenant
) -> None:
    """The same race one layer down: on SQLite the gateway's own key bookkeeping can happen to
    serialize HTTP requests, so this drives the service from parallel sessions directly."""
    async with client_for(app, enterprise.live) as client:
        system = await make_system(client)
        await upload_days(client, system, MAY_1, date(2025, 5, 4))
    caller = Caller(enterprise.account_id, Environment.LIVE)
    actor = enterprise.key_ids[Environment.LIVE]
    body = DeclarationCreate.model_validate(
        {
            "system_id": system["id"],
            "type": "feed_in",
            "period_start": "2025-05-02",
            "period_end": "2025-05-03",
        }
    )

    async def create() -> str:
        try:
            async with app.state.sessionmaker() as session, session.begin():
                created = await create_declaration_in_service(
                    session, caller, body, utcnow(), actor=actor
                )
                return created.id
        except Conflict:
            return "conflict"

    outcomes = await asyncio.gather(*(create() for _ in range(6)))
    assert sorted(o == "conflict" for o in outcomes) == [False] + [True] * 5, outcomes


async def test_concurrent_submits_in_the_service_without_the_gateway(
    app: FastAPI, enterprise: Tenant
) -> None:
    async with client_for(app, enterprise.live) as client:
        _, declaration_id = await _draft(client)
    caller = Caller(enterprise.account_id, Environment.LIVE)
    actor = enterprise.key_ids[Environment.LIVE]

    async def submit() -> str:
        try:
            async with app.state.sessionmaker() as session, session.begin():
                return (
                    await submit_declaration(session, caller, declaration_id, utcnow(), actor=actor)
                ).status
        except Conflict:
            return "conflict"

    outcomes = await asyncio.gather(*(submit() for _ in range(5)))
    assert sorted(outcomes) == ["conflict"] * 4 + ["submitted"], outcomes
