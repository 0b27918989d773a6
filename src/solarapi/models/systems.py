"""Tables of the systems area."""

from __future__ import annotations
