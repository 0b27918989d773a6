"""Accounts, users and passwords, and the `/account` endpoint."""
