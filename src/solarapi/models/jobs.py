"""Tables of the jobs area."""

from __future__ import annotations
