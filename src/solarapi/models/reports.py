"""Tables of the reports area."""

from __future__ import annotations
