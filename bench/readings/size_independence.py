"""Does a readings query cost the same on the 1-system and on the 200-system database?

    .venv/bin/python bench/readings/size_independence.py [--backend sqlite|postgres] [--runs 300]

Starts one `solarapi serve` on each dataset of `bench_readings.py` (`one`: 1 system × 2 years;
`many`: 200 systems × 1 year, 7 M readings; built there if missing) and sends each query to the
two servers in turn, request by request, so that the machine's drift (measured at 40-50 %
within an hour on this shared virtual machine) falls on both alike. Prints the medians and
`many / one` per query; the target is within 20 %.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))

from bench_readings import QUERIES, USES_PER_KEY, make_keys, prepare, system_ids

from harness import serving
from solarapi.kit.plans import Plan


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="postgres")
    parser.add_argument("--systems", type=int, default=200)
    parser.add_argument("--runs", type=int, default=300)
    args = parser.parse_args()

    clients: dict[str, list[httpx.Client]] = {}
    targets: dict[str, str] = {}
    with contextlib.ExitStack() as stack:
        for dataset in ("one", "many"):
            settings, env = prepare(args.backend, dataset, args.systems, rebuild=False)
            ids = asyncio.run(system_ids(settings))
            targets[dataset] = ids[len(ids) // 2]
            keys = asyncio.run(
                make_keys(
                    settings, Plan.PRO, len(QUERIES) * math.ceil(args.runs / USES_PER_KEY) + 1
                )
            )
            base = stack.enter_context(serving(env))
            clients[dataset] = [
                stack.enter_context(
                    httpx.Client(
                        base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60
                    )
                )
                for key in keys
            ]
        print(f"{args.backend}: medians of {args.runs} requests, alternating between databases")
        for n, (case, params) in enumerate(QUERIES.items()):
            times: dict[str, list[float]] = {"one": [], "many": []}
            for i in range(args.runs + 10):
                for dataset in ("one", "many") if i % 2 else ("many", "one"):
                    client = clients[dataset][
                        n * math.ceil(args.runs / USES_PER_KEY) + i // USES_PER_KEY
                    ]
                    began = time.perf_counter()
                    response = client.get(
                        f"/api/v1/systems/{targets[dataset]}/readings", params=params
                    )
                    elapsed = (time.perf_counter() - began) * 1000
                    if response.status_code != 200:
                        raise RuntimeError(
                            f"{dataset} {case}: {response.status_code} {response.text}"
                        )
                    if i >= 10:  # warm-up
                        times[dataset].append(elapsed)
            one, many = statistics.median(times["one"]), statistics.median(times["many"])
            print(f"  {case:16} one {one:6.2f} ms   many {many:6.2f} ms   many/one {many / one:5.2f}",
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
