"""Tables of the webhooks area."""

from __future__ import annotations
