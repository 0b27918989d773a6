"""Automatic pagination: iterate a list endpoint and the next page is fetched when needed.

Pages are numbered, so an object created while you iterate can shift a later page by one;
the pagers skip an id they have already yielded, so nothing is yielded twice. `SyncPager`
(`Client`) is generated from `AsyncPager` (`AsyncClient`), see `_async.py`.
"""

from __future__ import annotations

from solarapi_client._async import AsyncPager
from solarapi_client._core import Identified
from solarapi_client._sync import SyncPager

__all__ = ["AsyncPager", "Identified", "SyncPager"]
