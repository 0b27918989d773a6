"""Idempotency-Key for POST requests: replay the first response, refuse a different request."""
