"""The limiter interface and the decision it returns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol


@dataclass(frozen=True, slots=True)
class Window:
    name: str  # "minute" | "day"
    limit: int
    seconds: int

    def start(self, now: float) -> int:
        """Where the window that holds `now` began. Clock-aligned: a minute window resets at
        each whole UTC minute, a day window at 00:00Z."""
        return int(now // self.seconds) * self.seconds


# WindowState and Decision are made on every request (a decision and one or two windows):
# named tuples, which are built in C, where a frozen dataclass sets each field through
# `object.__setattr__` (~10,000 instructions for a WindowState, ~8,600 for a Decision, against
# ~3,000; callgrind, bench/fleet/README.md). Read-only and compared by value either way.
class WindowState(NamedTuple):
    name: str
    limit: int
    seconds: int
    used: int
    reset: int  # Unix epoch seconds

    @property
    def remaining(self) -> int:
        return max(self.limit - self.used, 0)

    def seconds_to_reset(self, now: float) -> int:
        """Whole seconds from `now` until the window resets (the reset is a whole second, so
        this is the ceiling of the wait)."""
        return self.reset - int(now)


class Decision(NamedTuple):
    allowed: bool
    windows: tuple[WindowState, ...]
    now: float
    degraded: bool = False

    @property
    def binding(self) -> WindowState:
        """The window with the fewest requests left; a tie goes to the one resetting later
        (of equals, the first). A loop: every answer's headers name it."""
        return binding_of(self.windows)

    @property
    def waited_for(self) -> WindowState:
        """The window a refused client waits for: of the exhausted windows (the binding one
        when none is), the one that resets last — the request can go through only once every
        exhausted window has reset. Named by the 429's message, its `Retry-After` and the
        metrics."""
        blocked = [w for w in self.windows if w.used >= w.limit] or [self.binding]
        return max(blocked, key=lambda w: w.reset)

    @property
    def retry_after(self) -> int:
        return max(1, self.waited_for.seconds_to_reset(self.now))

    def window(self, name: str) -> WindowState | None:
        for window in self.windows:
            if window.name == name:
                return window
        return None


def binding_of(windows: Sequence[WindowState]) -> WindowState:
    """`Decision.binding` of these windows (`remaining` computed in place: a property read
    is a Python call, and every answer's headers ask for it)."""
    best = windows[0]
    _, limit, _, used, reset = best
    best_key = (max(limit - used, 0), -reset)
    for window in windows[1:]:
        _, limit, _, used, reset = window
        key = (max(limit - used, 0), -reset)
        if key < best_key:
            best, best_key = window, key
    return best


def decide(
    windows: Sequence[Window], counts: Sequence[int], now: float, allowed: bool, degraded: bool
) -> Decision:
    # Loops, not generator expressions: one or two windows, on every request. The named
    # tuples are made by `tuple.__new__` (in C): `WindowState(...)` runs the class's `__new__`,
    # a Python function, for each one.
    states = []
    for w, used in zip(windows, counts, strict=True):
        seconds = w.seconds
        states.append(
            _new(WindowState, (w.name, w.limit, seconds, used, (int(now // seconds) + 1) * seconds))
        )
    return _new(Decision, (allowed, tuple(states), now, degraded))


_new = tuple.__new__


class RateLimiter(Protocol):
    async def hit(self, bucket: str, windows: Sequence[Window], now: float) -> Decision:
        """Count one request in every window if all allow it; count nothing otherwise."""

    async def peek(self, bucket: str, windows: Sequence[Window], now: float) -> Decision:
        """The windows' state without counting."""

    async def check(self) -> str:
        """'ok', or 'degraded' when the shared store is unreachable."""

    async def close(self) -> None: ...
