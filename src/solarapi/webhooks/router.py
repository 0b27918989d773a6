"""HTTP endpoints of webhooks: request parsing and response shaping only."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel
from starlette.responses import Response

from solarapi.auth.principal import PrincipalDep
from solarapi.db import SessionDep
from solarapi.events.router import add_routes
from solarapi.idempotency.middleware import replay_without
from solarapi.kit.bodylimit import SMALL_BODY, body_limit
from solarapi.kit.jsonresp import OrjsonResponse
from solarapi.kit.pagination import PageDep, Pagination, page_response
from solarapi.kit.timefmt import utcnow
from solarapi.state import SettingsDep
from solarapi.webhooks import service
from solarapi.webhooks.schemas import (
    DeliveryOut,
    WebhookCreate,
    WebhookOut,
    WebhookUpdate,
    WebhookWithSecret,
)
from solarapi.webhooks.service import WebhookConfig

router = APIRouter(tags=["Webhooks"])
# The app includes one router per area; events are listed beside the webhooks that carry them.
add_routes(router)


class WebhookPage(BaseModel):
    data: list[WebhookOut]
    pagination: Pagination


class DeliveryPage(BaseModel):
    data: list[DeliveryOut]
    pagination: Pagination


def _config(settings: SettingsDep) -> WebhookConfig:
    return WebhookConfig.from_settings(settings)


ConfigDep = Annotated[WebhookConfig, Depends(_config)]


def _location(endpoint_id: str) -> str:
    return f"/api/v1/webhooks/{endpoint_id}"


@router.post(
    "/webhooks",
    status_code=201,
    response_model=WebhookWithSecret,
    summary="Create a webhook endpoint",
    description="The response carries the signing `secret` (`whsec_…`), shown only here: a "
    "replay of the same request (`Idempotency-Key`) answers without it. The "
    "URL must be https and must not be, or resolve to, a private, loopback, link-local or "
    "metadata address.",
)
@body_limit(SMALL_BODY)
async def create_webhook(
    request: Request,
    config: ConfigDep,
    body: WebhookCreate,
    principal: PrincipalDep,
    session: SessionDep,
) -> Response:
    now = utcnow()
    issued = await service.create_endpoint(session, principal, body, config, now)
    replay_without(request, "secret")  # shown once: a replay answers without it
    return OrjsonResponse(
        issued.render(), status_code=201, headers={"Location": _location(issued.endpoint.id)}
    )


@router.get(
    "/webhooks",
    response_model=WebhookPage,
    summary="List webhook endpoints",
    description="Ordered by `created_at`, `id` ascending.",
)
async def list_webhooks(
    request: Request, principal: PrincipalDep, session: SessionDep, page: PageDep
) -> Response:
    rows, total = await service.list_endpoints(session, principal, page, utcnow())
    return page_response(request, [row.render() for row in rows], total, page)


@router.get("/webhooks/{webhook_id}", response_model=WebhookOut, summary="A webhook endpoint")
async def get_webhook(webhook_id: str, principal: PrincipalDep, session: SessionDep) -> Response:
    endpoint = await service.get_endpoint(session, principal, webhook_id, utcnow())
    return OrjsonResponse(endpoint.render())


@router.patch(
    "/webhooks/{webhook_id}",
    response_model=WebhookOut,
    summary="Change a webhook endpoint",
    description="Changes `url`, `events`, `description` or `status` (`enabled` | `disabled`); "
    "re-enable an endpoint that a 410 response disabled with `status: enabled`.",
)
@body_limit(SMALL_BODY)
async def update_webhook(
    config: ConfigDep,
    webhook_id: str,
    body: WebhookUpdate,
    principal: PrincipalDep,
    session: SessionDep,
) -> Response:
    now = utcnow()
    endpoint = await service.update_endpoint(session, principal, webhook_id, body, config, now)
    return OrjsonResponse(endpoint.render())


@router.delete(
    "/webhooks/{webhook_id}",
    status_code=204,
    response_class=Response,
    summary="Delete a webhook endpoint and its delivery log",
)
async def delete_webhook(webhook_id: str, principal: PrincipalDep, session: SessionDep) -> Response:
    await service.delete_endpoint(session, principal, webhook_id)
    return Response(status_code=204)


@router.post(
    "/webhooks/{webhook_id}/rotate-secret",
    response_model=WebhookWithSecret,
    summary="Replace the signing secret",
    description="Returns the new secret (shown only here: a replay of the same request "
    "(`Idempotency-Key`) answers without it). For 24 hours deliveries carry two "
    "signatures, one per secret, so receivers can switch without missing events.",
)
@body_limit(SMALL_BODY)
async def rotate_webhook_secret(
    request: Request,
    config: ConfigDep,
    webhook_id: str,
    principal: PrincipalDep,
    session: SessionDep,
) -> Response:
    now = utcnow()
    issued = await service.rotate_secret(session, principal, webhook_id, config, now)
    replay_without(request, "secret")  # shown once: a replay answers without it
    return OrjsonResponse(issued.render())


@router.get(
    "/webhooks/{webhook_id}/deliveries",
    response_model=DeliveryPage,
    summary="Delivery attempts of a webhook endpoint",
    description="Newest first (`attempted_at`, `id` descending): attempt number, time, the "
    "receiver's status code (null when none arrived), latency and error.",
)
async def list_webhook_deliveries(
    request: Request,
    webhook_id: str,
    principal: PrincipalDep,
    session: SessionDep,
    page: PageDep,
) -> Response:
    items, total = await service.list_deliveries(session, principal, webhook_id, page)
    return page_response(request, [item.render() for item in items], total, page)
