"""Two versions of the server on one fleet, measured alternately in one run: the worker's
CPU for one portfolio request, and for the per-system requests it replaces.

    # the fleet: bench/portfolio/run.py --sqlite /tmp/bench-portfolio --build-only (or a
    # PostgreSQL one); the version before, e.g. main's sources:
    git archive main src | tar -x -C /tmp/before
    .venv/bin/python bench/portfolio/before_after.py --sqlite /tmp/bench-portfolio \
        --before-src /tmp/before/src --endpoint readings --endpoint summary

"before" runs the sources of `--before-src` (first on PYTHONPATH), "after" this checkout's.
Both answer every request of a round in turn (a PATCH commits before each measurement, so
nothing kept while the database is unchanged answers either), and their bodies must be equal.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from contextlib import ExitStack
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness import PG_ADMIN, SECRET, cpu_seconds, server_process

ENDPOINTS = {
    "readings": ("/portfolio/readings", "/systems/{}/readings", True, {}),
    "summary": ("/portfolio/summary", "/systems/{}/summary", False, {}),
    "market-value": ("/portfolio/market-value", "/systems/{}/market-value", True,
                     {"market_zone": "NL"}),
}  # fmt: skip


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--postgres", help="name of a database run.py built")
    where.add_argument("--sqlite", help="data directory run.py built")
    parser.add_argument("--before-src", required=True, help="the `src` directory of 'before'")
    parser.add_argument("--endpoint", action="append", choices=sorted(ENDPOINTS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fleet-requests", type=int, default=5, help="per round and version")
    args = parser.parse_args()
    env = {"SOLARAPI_SECRET_KEY": SECRET, "SOLARAPI_JOB_RUNNER": "external",
           "SOLARAPI_RATE_LIMIT_SCALE": "100000"}  # fmt: skip
    if args.postgres:
        env["SOLARAPI_DATABASE_URL"] = PG_ADMIN.rsplit("/", 1)[0] + f"/{args.postgres}"
        data_dir = Path("/tmp") / f"bench-portfolio-{args.postgres}"
    else:
        data_dir = Path(args.sqlite)
    env["SOLARAPI_DATA_DIR"] = str(data_dir)
    state = json.loads((data_dir / "fleet.json").read_text())
    end = datetime.fromisoformat(state["end"])
    window = {"from": (end - timedelta(days=31)).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "to": end.strftime("%Y-%m-%dT%H:%M:%SZ"), "interval": "1d"}  # fmt: skip
    headers = {"Authorization": f"Bearer {state['key']}", "Accept-Encoding": "identity"}
    print(f"load average at the start: {load()}")
    with ExitStack() as stack:
        servers: dict[str, tuple[httpx.Client, int]] = {}
        for name, extra in (("before", {"PYTHONPATH": args.before_src}), ("after", {})):
            base, pid = stack.enter_context(server_process({**env, **extra}))
            client = httpx.Client(base_url=base + "/api/v1", headers=headers, timeout=600)
            servers[name] = (stack.enter_context(client), pid)
        for endpoint in args.endpoint or ["readings"]:
            measure(servers, state, window, endpoint, args)
    print(f"load average at the end: {load()}")


def measure(
    servers: dict[str, tuple[httpx.Client, int]],
    state: dict[str, Any],
    window: dict[str, str],
    endpoint: str,
    args: argparse.Namespace,
) -> None:
    path, single_path, windowed, extra = ENDPOINTS[endpoint]
    params = {**(window if windowed else {}), **extra, "limit": "1000"}
    single_params = window if windowed else {}
    bodies = {}
    for name, (client, _) in servers.items():
        for _ in range(2):  # warm
            response = client.get(path, params=params)
            assert response.status_code == 200, response.text
        bodies[name] = response.content
    assert bodies["before"] == bodies["after"], f"{endpoint}: the bodies differ"
    ids = [item["system_id"] for item in json.loads(bodies["after"])["data"]]

    def touch(client: httpx.Client) -> None:
        response = client.patch(f"/systems/{state['ids'][0]}", json={"name": "Bench 0"})
        assert response.status_code == 200, response.text

    fleet: dict[str, list[float]] = {name: [] for name in servers}
    single: dict[str, list[float]] = {name: [] for name in servers}
    for _ in range(args.rounds):
        for name, (client, pid) in servers.items():
            for _ in range(args.fleet_requests):
                touch(client)
                cpu = cpu_seconds([pid])
                client.get(path, params=params)
                fleet[name].append(cpu_seconds([pid]) - cpu)
        for name, (client, pid) in servers.items():
            touch(client)
            cpu = cpu_seconds([pid])
            for system_id in ids:
                client.get(single_path.format(system_id), params=single_params)
            single[name].append(cpu_seconds([pid]) - cpu)
    for name in servers:
        one, many = statistics.mean(fleet[name]), statistics.median(single[name])
        print(f"{endpoint} {name}: one request {one * 1000:.1f} ms of worker CPU (mean of "
              f"{len(fleet[name])}), {len(ids):,} per-system requests {many:.2f} s (median of "
              f"{len(single[name])}) = {many / one:.1f}× (load {load()})")  # fmt: skip


if __name__ == "__main__":
    main()
