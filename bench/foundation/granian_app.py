"""The app under granian for the server comparison: the same factory and JSON request log as
`solarapi serve` (granian is not a project dependency; see README.md)."""

from __future__ import annotations

from fastapi import FastAPI

from solarapi.app import create_app
from solarapi.config import Settings
from solarapi.logs import configure_logging


def create() -> FastAPI:
    settings = Settings()
    configure_logging(settings.log_level)
    return create_app(settings)
