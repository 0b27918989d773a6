"""Events: the outbox of state changes that webhooks deliver."""
