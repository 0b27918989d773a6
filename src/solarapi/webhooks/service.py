"""Webhook endpoint rules: destinations, secrets and rotation, limits, and what a client sees."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from solarapi.auth.principal import Caller
from solarapi.config import Settings
from solarapi.errors import Conflict, NotFound, ValidationFailed
from solarapi.kit.ids import new_id
from solarapi.kit.pagination import PageParams
from solarapi.kit.text import excerpt
from solarapi.models.webhooks import WebhookEndpoint
from solarapi.webhooks import repository
from solarapi.webhooks.addresses import ForbiddenDestination, validate_destination
from solarapi.webhooks.schemas import WebhookCreate, WebhookUpdate
from solarapi.webhooks.signing import derive_secret, new_salt
from solarapi.webhooks.views import DeliveryView, IssuedSecret, WebhookView

# Enough for any integration we know of; a bound keeps one event from fanning out unboundedly.
MAX_ENDPOINTS_PER_ENVIRONMENT = 20
# After a rotation the old secret keeps signing (beside the new one) this long, so receivers
# can switch without dropping deliveries.
ROTATION_OVERLAP = timedelta(hours=24)


@dataclass(frozen=True, slots=True)
class WebhookConfig:
    allow_loopback: bool
    server_secret: bytes

    @classmethod
    def from_settings(cls, settings: Settings) -> WebhookConfig:
        return cls(settings.webhooks_allow_loopback, settings.effective_secret_key)


def signing_secrets(endpoint: WebhookEndpoint, server_secret: bytes, now: datetime) -> list[str]:
    """The secrets that sign a delivery now: the current one, and the previous one while the
    rotation overlap lasts."""
    current = [derive_secret(server_secret, endpoint.secret_salt)]
    if (
        endpoint.previous_secret_salt is not None
        and endpoint.previous_salt_expires_at is not None
        and endpoint.previous_salt_expires_at > now
    ):
        current.append(derive_secret(server_secret, endpoint.previous_secret_salt))
    return current


async def _checked_url(raw: str, config: WebhookConfig) -> str:
    try:
        return (await validate_destination(raw, allow_loopback=config.allow_loopback)).url
    except (ValueError, ForbiddenDestination) as exc:
        raise ValidationFailed(f"url: {exc}") from None


def _unique(events: list[str]) -> list[str]:
    return list(dict.fromkeys(events))


async def create_endpoint(
    session: AsyncSession, caller: Caller, body: WebhookCreate, config: WebhookConfig, now: datetime
) -> IssuedSecret:
    """The endpoint and its secret (which is never shown again)."""
    url = await _checked_url(body.url, config)
    existing = await repository.count_endpoints(
        session, account_id=caller.account_id, environment=caller.environment
    )
    if existing >= MAX_ENDPOINTS_PER_ENVIRONMENT:
        raise Conflict(
            f"This environment already has {existing} webhook endpoints, the maximum; delete "
            "one or subscribe an existing endpoint to more events"
        )
    endpoint = WebhookEndpoint(
        id=new_id("whk"),
        account_id=caller.account_id,
        environment=caller.environment,
        url=url,
        description=body.description,
        events=_unique(body.events),
        enabled=True,
        disabled_reason=None,
        secret_salt=new_salt(),
        previous_secret_salt=None,
        previous_salt_expires_at=None,
        created_at=now,
        updated_at=now,
    )
    await repository.add(session, endpoint)
    return _issued(endpoint, config, now)


async def get_endpoint(
    session: AsyncSession, caller: Caller, endpoint_id: str, now: datetime
) -> WebhookView:
    return WebhookView.of(await _owned_endpoint(session, caller, endpoint_id), now)


async def _owned_endpoint(
    session: AsyncSession, caller: Caller, endpoint_id: str
) -> WebhookEndpoint:
    endpoint = await repository.get_endpoint(
        session, endpoint_id, account_id=caller.account_id, environment=caller.environment
    )
    if endpoint is None:
        raise NotFound(f"No webhook endpoint {excerpt(endpoint_id)} in this environment")
    return endpoint


async def list_endpoints(
    session: AsyncSession, caller: Caller, page: PageParams, now: datetime
) -> tuple[list[WebhookView], int]:
    total = await repository.count_endpoints(
        session, account_id=caller.account_id, environment=caller.environment
    )
    rows = await repository.list_endpoints(
        session,
        account_id=caller.account_id,
        environment=caller.environment,
        offset=page.offset,
        limit=page.limit,
    )
    return [WebhookView.of(row, now) for row in rows], total


async def update_endpoint(
    session: AsyncSession,
    caller: Caller,
    endpoint_id: str,
    body: WebhookUpdate,
    config: WebhookConfig,
    now: datetime,
) -> WebhookView:
    given = body.model_fields_set
    for name in ("url", "events", "status"):
        if name in given and getattr(body, name) is None:
            raise ValidationFailed(f"{name}: must not be null")
    endpoint = await _owned_endpoint(session, caller, endpoint_id)
    if body.url is not None:
        endpoint.url = await _checked_url(body.url, config)
    if body.events is not None:
        endpoint.events = _unique(body.events)
    if "description" in given:
        endpoint.description = body.description
    if body.status is not None:
        endpoint.enabled = body.status == "enabled"
        endpoint.disabled_reason = None if endpoint.enabled else "disabled by the account"
    endpoint.updated_at = now
    await session.flush()
    return WebhookView.of(endpoint, now)


async def delete_endpoint(session: AsyncSession, caller: Caller, endpoint_id: str) -> None:
    """Deletes the endpoint and its delivery log; queued retries find it gone and stop."""
    endpoint = await _owned_endpoint(session, caller, endpoint_id)
    await repository.delete_endpoint(session, endpoint)


async def rotate_secret(
    session: AsyncSession, caller: Caller, endpoint_id: str, config: WebhookConfig, now: datetime
) -> IssuedSecret:
    """A new secret (returned once); the one it replaces keeps signing for 24 h. Rotating
    again within the overlap drops the oldest secret: only two ever sign."""
    endpoint = await _owned_endpoint(session, caller, endpoint_id)
    endpoint.previous_secret_salt = endpoint.secret_salt
    endpoint.previous_salt_expires_at = now + ROTATION_OVERLAP
    endpoint.secret_salt = new_salt()
    endpoint.updated_at = now
    await session.flush()
    return _issued(endpoint, config, now)


def _issued(endpoint: WebhookEndpoint, config: WebhookConfig, now: datetime) -> IssuedSecret:
    secret = derive_secret(config.server_secret, endpoint.secret_salt)
    return IssuedSecret(WebhookView.of(endpoint, now), secret)


async def list_deliveries(
    session: AsyncSession, caller: Caller, endpoint_id: str, page: PageParams
) -> tuple[list[DeliveryView], int]:
    endpoint = await _owned_endpoint(session, caller, endpoint_id)
    rows, total = await repository.list_deliveries(
        session, endpoint.id, offset=page.offset, limit=page.limit
    )
    views = [DeliveryView.of(row) for row in rows]
    if not endpoint.enabled:
        # A disabled endpoint's queued retries do not run (the job finds it disabled): none
        # is due while it stays so. Re-enabled in time, a retry runs and shows again.
        views = [view.without_retry() for view in views]
    return views, total
