"""The loopback-allowing app of the webhook tests, for alert events delivered end to end."""

from tests.webhooks.conftest import loopback_app, loopback_tenant

__all__ = ["loopback_app", "loopback_tenant"]
