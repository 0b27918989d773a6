"""Tables of the prices area."""

from __future__ import annotations
