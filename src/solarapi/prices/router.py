"""HTTP endpoints of prices: request parsing and response shaping only."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
