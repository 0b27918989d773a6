"""HTTP endpoints of declarations: request parsing and response shaping only."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
