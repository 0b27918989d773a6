"""Automatic pagination: iterate a list endpoint and the next page is fetched when needed.

Pages are numbered, so an object created while you iterate can shift a later page by one;
the iterators skip an id they have already yielded, so nothing is yielded twice.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Generic, Protocol, TypeVar

from solarapi_client._core import Page


class Identified(Protocol):
    """Anything listed has an id."""

    @property
    def id(self) -> str: ...


T = TypeVar("T", bound=Identified)


class SyncPager(Generic[T]):
    """`for item in pager` walks every page; `pager.pages()` yields the pages themselves."""

    def __init__(self, fetch: Callable[[int], Page[T]]) -> None:
        self._fetch = fetch

    def pages(self) -> Iterator[Page[T]]:
        number = 1
        while True:
            page = self._fetch(number)
            yield page
            if not page.pagination.has_more or not page.data:
                return
            number += 1

    def __iter__(self) -> Iterator[T]:
        seen: set[str] = set()
        for page in self.pages():
            for item in page.data:
                if item.id not in seen:
                    seen.add(item.id)
                    yield item

    def first_page(self) -> Page[T]:
        return self._fetch(1)

    def to_list(self) -> list[T]:
        return list(self)


class AsyncPager(Generic[T]):
    """`async for item in pager` walks every page; `pager.pages()` yields the pages."""

    def __init__(self, fetch: Callable[[int], Awaitable[Page[T]]]) -> None:
        self._fetch = fetch

    async def pages(self) -> AsyncIterator[Page[T]]:
        number = 1
        while True:
            page = await self._fetch(number)
            yield page
            if not page.pagination.has_more or not page.data:
                return
            number += 1

    async def __aiter__(self) -> AsyncIterator[T]:
        seen: set[str] = set()
        async for page in self.pages():
            for item in page.data:
                if item.id not in seen:
                    seen.add(item.id)
                    yield item

    async def first_page(self) -> Page[T]:
        return await self._fetch(1)

    async def to_list(self) -> list[T]:
        return [item async for item in self]
