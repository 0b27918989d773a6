"""Opaque, sortable identifiers: a type prefix and a ULID (`sys_01JC…`)."""

from __future__ import annotations

from typing import Literal

from ulid import ULID

IdPrefix = Literal[
    "sys",
    "dcl",
    "rpt",
    "key",
    "whk",
    "evt",
    "acct",
    "usr",
    "job",
    "req",
    "dlv",
    "ses",
    "alr",
    "aud",
    "itk",
]


def new_id(prefix: IdPrefix) -> str:
    return f"{prefix}_{ULID()}"
