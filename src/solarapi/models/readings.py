"""Tables of the readings area."""

from __future__ import annotations
