"""Tables of the declarations area."""

from __future__ import annotations
