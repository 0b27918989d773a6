"""Tables of the dashboard area."""

from __future__ import annotations
