"""Webhooks."""
