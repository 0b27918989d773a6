"""Instructions of the readings renderer alone, counted in-process with callgrind.

    # the renderer's instructions per body: two runs, the second rendering N bodies more
    valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        .venv/bin/python bench/readings/render_count.py W2 200 prep
    valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        .venv/bin/python bench/readings/render_count.py W2 200 render
    # (render − prep) ÷ 200 = instructions per body; `digest` prints a digest of the bodies

Kinds, as the fleet benchmark asks them (ten European zones, a different window and zone
per body, so a body's frame is made anew — what the fleet's uncached requests mostly do):
W1 24 h of `15m` on the quarter-hour, W2 24 h of `1h` on the hour, W3 30 local days of `1d`;
`P` the portfolio's `render_many` of 1,000 systems × 31 local days of `1d` in four zones
(as bench/portfolio builds them; N such pages, each its own 31 days). The same kinds with a
`-hit` suffix render the same windows again (every frame kept). Series: daylight energy with
three or more decimals, 0 at night, a gap now and then, full sample counts but where a gap
or a short bucket falls.
"""

from __future__ import annotations

import hashlib
import random
import sys
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np

from solarapi.kit.grid import EnergySeries, Interval, ManyBuckets, widen_range
from solarapi.readings.rendering import ManyReadings, Readings, render, render_many

ZONES = [
    "Europe/Amsterdam", "Europe/Athens", "Europe/Berlin", "Europe/Dublin", "Europe/Helsinki",
    "Europe/Lisbon", "Europe/London", "Europe/Madrid", "Europe/Paris", "Europe/Warsaw",
]  # fmt: skip
PORTFOLIO_ZONES = ["Europe/Amsterdam", "Europe/London", "America/New_York", "Asia/Tokyo"]
BASE = datetime(2026, 10, 1, tzinfo=UTC)


def series(edges: np.ndarray, rng: random.Random) -> tuple[np.ndarray, ...]:
    count = len(edges) - 1
    expected = np.diff(edges) // 900
    hours = (edges[:-1] // 3600) % 24
    energy = np.array([rng.uniform(0, 4000) if 6 <= h <= 18 else 0.0 for h in hours.tolist()])
    energy *= expected / expected.max()
    samples = expected.copy()
    power = energy * 4 * np.array([rng.uniform(1.0, 1.5) for _ in range(count)])
    for _ in range(max(1, count // 40)):
        i = rng.randrange(count)
        if rng.random() < 0.5:
            energy[i], power[i], samples[i] = np.nan, np.nan, 0
        else:
            samples[i] = max(1, int(samples[i]) - 1)
    return energy, samples.astype(np.int64), power


def one(kind: str, k: int, rng: random.Random) -> Readings:
    zone = ZoneInfo(ZONES[k % len(ZONES)])
    if kind == "W1":
        end = BASE + timedelta(minutes=15 * (k // len(ZONES)))
        start, interval = end - timedelta(days=1), Interval.MIN15
    elif kind == "W2":
        start = BASE + timedelta(hours=k // len(ZONES))
        end, interval = start + timedelta(days=1), Interval.HOUR
    else:
        day = BASE.date() + timedelta(days=k // len(ZONES))
        start = datetime(day.year, day.month, day.day, tzinfo=zone)
        end, interval = start + timedelta(days=30), Interval.DAY
    time_range = widen_range(start, end, interval, zone)
    edges = time_range.edges()
    energy, samples, power = series(edges, rng)
    return Readings(
        f"sys_{k:026d}", zone.key, time_range, EnergySeries(edges[:-1], energy, samples, power)
    )


def page(k: int, rng: random.Random) -> ManyReadings:
    ranges = []
    for zone_name in PORTFOLIO_ZONES:
        zone = ZoneInfo(zone_name)
        day = BASE.date() + timedelta(days=k)
        start = datetime(day.year, day.month, day.day, tzinfo=zone)
        ranges.append(widen_range(start, start + timedelta(days=31), Interval.DAY, zone))
    time_ranges, parts = [], []
    for s in range(1000):
        time_range = ranges[s % len(ranges)]
        time_ranges.append(time_range)
        parts.append(series(time_range.edges(), rng))
    offsets = np.concatenate([[0], np.cumsum([len(p[0]) for p in parts])]).astype(np.int64)
    buckets = ManyBuckets(
        tuple(r.edges() for r in time_ranges),
        offsets,
        np.concatenate([p[0] for p in parts]),
        np.concatenate([p[1] for p in parts]),
        np.concatenate([p[2] for p in parts]),
    )
    return ManyReadings(
        tuple(f"sys_{s:026d}" for s in range(1000)),
        tuple(r.tz.key for r in time_ranges),
        tuple(time_ranges),
        buckets,
    )


def main() -> None:
    kind, count, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    hit = kind.endswith("-hit")
    kind = kind.removesuffix("-hit")
    rng = random.Random(34)
    bodies: list[bytes] = []
    digest = hashlib.sha256()
    if kind == "P":
        warm = [page(1000 + k, rng) for k in range(2)]
        items = [page(k, rng) for k in range(count)]
        for many in warm + (items if hit else []):
            render_many(many, many.totals(), 0, 1000)
        totals = [many.totals() for many in items]
        if mode != "prep":
            bodies = [
                b"".join(render_many(many, many_totals, 0, 1000))
                for many, many_totals in zip(items, totals, strict=True)
            ]
    else:
        warm = [one(kind, 100_000 + k, rng) for k in range(20)]
        items = [one(kind, k, rng) for k in range(count)]
        for readings in warm + (items if hit else []):
            render(readings)
        if mode != "prep":
            bodies = [render(readings) for readings in items]
    if mode == "digest":  # (not in a counted run: hashing costs more than rendering)
        for body in bodies:
            digest.update(body)
        print(kind, count, mode, digest.hexdigest()[:16])


if __name__ == "__main__":
    main()
