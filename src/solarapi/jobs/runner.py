"""Placeholder for the in-process job runner (reports and webhook deliveries)."""

from __future__ import annotations

from fastapi import FastAPI


async def start_inline_runner(app: FastAPI) -> None:
    """Start background job processing inside the API process (embedded mode)."""
    return None


async def stop_inline_runner(app: FastAPI) -> None:
    return None
