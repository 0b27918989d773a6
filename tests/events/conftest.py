"""The loopback-allowing app of the webhook tests, for end-to-end event deliveries."""

from tests.webhooks.conftest import loopback_app, loopback_tenant

__all__ = ["loopback_app", "loopback_tenant"]
