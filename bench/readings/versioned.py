"""How the hot reads fare when the database keeps changing.

The gateway keeps a caller's Principal and every rendered readings body while the
database is unchanged (`kit.versioned`, docs/foundation.md): any commit, by any process,
makes the next request of every worker read afresh. `sidebyside.py` measures a database
nobody writes to, where every request after the first is answered from what was kept. This
measures the same two requests (1 day of `1h`, 1 year of `1d`) while another process commits
a one-row change every INTERVAL — none, 1 s, 100 ms, 10 ms, 1 ms — so the cost of the
read-afresh path and the hit rate a write rate allows are both on record.

Run from the project root against a database prepared by `solarapi demo` (the Pro account's
live key as argument), like sidebyside.py:

    SOLARAPI_DATA_DIR=D SOLARAPI_DATABASE_URL=sqlite:///D/solar.db \\
        .venv/bin/python bench/readings/versioned.py pk_live_…

(PostgreSQL: SOLARAPI_DATABASE_URL=postgresql://… and SOLARAPI_SECRET_KEY as for serve.)
Needs `wrk`. Each figure: `wrk -t1 -c16` for SECS seconds (default 5), one worker.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

PY = sys.executable
SECS = os.environ.get("SECS", "5")
PORT = 8474
INTERVALS_MS = (None, 1000, 100, 10, 1)

# The Starter demo account's name changed (a trailing dot added or taken away) (same value, a real write) every `interval` ms,
# each in its own transaction; prints how many it committed when stopped.
_COMMITTER = """
import os, sys, time, signal
url, interval = sys.argv[1], float(sys.argv[2]) / 1000
stop = False
def halt(*_):
    global stop
    stop = True
signal.signal(signal.SIGTERM, halt)
# (a real change: SQLite leaves its data_version alone when a row is rewritten unchanged)
sql = ("UPDATE accounts SET name = CASE WHEN name LIKE '%.' THEN substr(name, 1, length(name) - 1)"
       " ELSE name || '.' END WHERE plan = 'starter'")
commits = 0
if url.startswith("sqlite"):
    import sqlite3
    db = sqlite3.connect(url.split("///", 1)[1], isolation_level=None, timeout=30)
    def commit():
        db.execute(sql)
else:
    import asyncio, asyncpg
    loop = asyncio.new_event_loop()
    db = loop.run_until_complete(asyncpg.connect(url))
    def commit():
        loop.run_until_complete(db.execute(sql))
next_at = time.monotonic()
while not stop:
    commit()
    commits += 1
    next_at += interval
    time.sleep(max(0.0, next_at - time.monotonic()))
print(commits, flush=True)
"""


def get(url: str, key: str) -> bytes:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(request) as response:
        return bytes(response.read())


def wrk(url: str, key: str) -> float:
    script = Path(tempfile.mkstemp(suffix=".lua")[1])
    script.write_text(f'wrk.headers["Authorization"] = "Bearer {key}"\n')
    out = subprocess.run(
        ["wrk", "-t1", "-c16", f"-d{SECS}s", "-s", str(script), url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    script.unlink()
    if m := re.search(r"Non-2xx or 3xx responses: (\d+)", out):
        raise SystemExit(f"{url}: {m.group(1)} non-2xx responses")
    found = re.search(r"Requests/sec:\s+([\d.]+)", out)
    assert found is not None, out
    return float(found.group(1))


def main(key: str) -> None:
    env = dict(os.environ, SOLARAPI_RATE_LIMIT_SCALE="100000", SOLARAPI_LOG_LEVEL="WARNING")
    url = os.environ["SOLARAPI_DATABASE_URL"]
    server = subprocess.Popen(
        [PY, "-m", "solarapi", "serve", "--port", str(PORT)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{PORT}/api/v1"
        for _ in range(300):
            try:
                get(base + "/health", key)
                break
            except OSError:
                time.sleep(0.1)
        system = json.loads(get(base + "/systems", key))["data"][0]
        last = dt.date.fromisoformat(system["last_reading_at"][:10])
        day = last - dt.timedelta(days=30)
        year0 = last.replace(year=last.year - 1) + dt.timedelta(days=1)
        readings = f"{base}/systems/{system['id']}/readings"
        targets = {
            "1-day 1h": f"{readings}?from={day}T00:00:00Z"
            f"&to={day + dt.timedelta(days=1)}T00:00:00Z&interval=1h",
            "1-year 1d": f"{readings}?from={year0}T00:00:00%2B01:00"
            f"&to={last}T00:00:00%2B01:00&interval=1d",
        }
        print(f"{'commit every':>14} {'commits/s':>10} " + " ".join(f"{n:>12}" for n in targets))
        for interval in INTERVALS_MS:
            committer = None
            if interval is not None:
                dsn = url if url.startswith("sqlite") else url.replace("+asyncpg", "")
                committer = subprocess.Popen(
                    [PY, "-c", _COMMITTER, dsn, str(interval)], stdout=subprocess.PIPE, text=True
                )
            started = time.monotonic()
            rates = [wrk(target, key) for target in targets.values()]
            elapsed = time.monotonic() - started
            commits = 0
            if committer is not None:
                if committer.poll() is not None:
                    raise SystemExit(f"the committer stopped (exit {committer.returncode})")
                committer.terminate()
                out, _ = committer.communicate()
                commits = int(out.strip())
            label = "never" if interval is None else f"{interval} ms"
            print(
                f"{label:>14} {commits / elapsed:>10.0f} "
                + " ".join(f"{rate:>8.0f} r/s" for rate in rates)
            )
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main(sys.argv[1])
