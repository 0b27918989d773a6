"""An app whose operator allows loopback receivers (the delivery tests' receiver runs on
127.0.0.1), on the same databases as the shared `app`."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from fastapi import FastAPI

import solarapi.webhooks.jobs  # noqa: F401 - registers the delivery job handler
from solarapi.config import Settings
from solarapi.kit.plans import Plan
from tests.support import Tenant, TestClock, make_tenant, running_app


@pytest.fixture(scope="session")
async def loopback_app(settings: Settings, clock: TestClock) -> AsyncIterator[FastAPI]:
    loopback = settings.model_copy(update={"webhooks_allow_loopback": True})
    async with running_app(loopback, clock) as application:
        yield application


@pytest.fixture
async def loopback_tenant(loopback_app: FastAPI) -> Tenant:
    return await make_tenant(loopback_app, Plan.ENTERPRISE)
