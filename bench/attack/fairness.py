"""The two fairness scenarios of issue 28 (run through bench_attack.py): another tenant's
small report behind one tenant's 8 big CSV reports, and another tenant's webhook behind 100
deliveries to a host that never answers. A real `solarapi serve` with its inline job runner."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import httpx

from harness import fresh_database, make_account, server_process, upload_a_year

YEAR = (datetime(2024, 1, 1, tzinfo=UTC), datetime(2025, 1, 1, tzinfo=UTC))
LOCATION = {"latitude": 52, "longitude": 5, "timezone": "Europe/Amsterdam"}


def _client(base: str, key: str) -> httpx.Client:
    return httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=120)


def _system(client: httpx.Client, name: str) -> str:
    response = client.post(
        "/api/v1/systems", json={"name": name, "capacity_kwp": 10, "location": LOCATION}
    )
    response.raise_for_status()
    return str(response.json()["id"])


def _until_done(client: httpx.Client, report_id: str, deadline: float) -> dict[str, Any]:
    while time.monotonic() < deadline:
        report: dict[str, Any] = client.get(f"/api/v1/reports/{report_id}").json()
        if report["status"] in ("completed", "failed"):
            return report
        time.sleep(0.2)
    raise TimeoutError(report_id)


def _seconds(report: dict[str, Any], start: str, end: str) -> float:
    def parse(text: str) -> datetime:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))

    return round((parse(report[end]) - parse(report[start])).total_seconds(), 2)


def reports_scenario() -> dict[str, Any]:
    with fresh_database("fair-reports", "sqlite") as db:
        _, (big_key,) = asyncio.run(make_account(db.settings, 1))
        _, (small_key,) = asyncio.run(make_account(db.settings, 1))
        env = {**db.env, "SOLARAPI_JOB_RUNNER": "inline", "SOLARAPI_RATE_LIMIT_SCALE": "1000"}
        with (
            server_process(env) as (base, _),
            _client(base, big_key) as big,
            _client(base, small_key) as small,
        ):
            big_system = _system(big, "Big")
            upload_a_year(big, big_system, *YEAR)
            small_system = _system(small, "Small")
            upload_a_year(small, small_system, YEAR[0], YEAR[0].replace(day=2))
            period = {"from": "2024-01-01T00:00:00Z", "to": "2025-01-01T00:00:00Z"}
            bigs = [
                big.post(
                    "/api/v1/reports",
                    json={"type": "production", "format": "csv", "interval": "1h",
                          "system_ids": [big_system], **period},
                ).json()["id"]
                for _ in range(8)
            ]  # fmt: skip
            time.sleep(0.5)  # the big ones are queued first
            other = small.post(
                "/api/v1/reports",
                json={"type": "production", "format": "csv", "interval": "1d",
                      "system_ids": [small_system], "from": "2024-01-01T00:00:00Z",
                      "to": "2024-01-02T00:00:00Z"},
            ).json()["id"]  # fmt: skip
            deadline = time.monotonic() + 900
            small_done = _until_done(small, other, deadline)
            big_done = [_until_done(big, r, deadline) for r in bigs]
    return {
        "scenario": "report behind 8 big CSV reports",
        "other_tenant_wait_s": _seconds(small_done, "created_at", "started_at"),
        "other_tenant_total_s": _seconds(small_done, "created_at", "completed_at"),
        "big_report_run_s": sorted(_seconds(r, "started_at", "completed_at") for r in big_done),
        "big_last_completed_after_s": max(
            _seconds(r, "created_at", "completed_at") for r in big_done
        ),
    }


class _Receiver(BaseHTTPRequestHandler):
    received: ClassVar[list[float]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        _Receiver.received.append(time.monotonic())
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        return None


def webhooks_scenario(deliveries: int = 100) -> dict[str, Any]:
    silent = socket.create_server(("127.0.0.1", 0), backlog=512)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        silent.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(silent.accept()[0])
            except TimeoutError:
                continue

    threading.Thread(target=accept, daemon=True).start()
    receiver = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    try:
        with fresh_database("fair-hooks", "sqlite") as db:
            _, (noisy_key,) = asyncio.run(make_account(db.settings, 1))
            _, (quiet_key,) = asyncio.run(make_account(db.settings, 1))
            env = {
                **db.env,
                "SOLARAPI_JOB_RUNNER": "inline",
                "SOLARAPI_RATE_LIMIT_SCALE": "1000",
                "SOLARAPI_WEBHOOKS_ALLOW_LOOPBACK": "true",
            }
            with (
                server_process(env) as (base, _),
                _client(base, noisy_key) as noisy,
                _client(base, quiet_key) as quiet,
            ):
                silent_url = f"http://127.0.0.1:{silent.getsockname()[1]}/hooks"
                quick_url = f"http://127.0.0.1:{receiver.server_address[1]}/hooks"
                for client, url in ((noisy, silent_url), (quiet, quick_url)):
                    client.post(
                        "/api/v1/webhooks", json={"url": url, "events": ["system.created"]}
                    ).raise_for_status()
                for n in range(deliveries):
                    _system(noisy, f"Noisy {n}")
                time.sleep(1.0)  # the runner is busy with the silent host
                sent = time.monotonic()
                _system(quiet, "Quiet")
                deadline = sent + 900
                while not _Receiver.received and time.monotonic() < deadline:
                    time.sleep(0.05)
                waited = round(_Receiver.received[0] - sent, 2) if _Receiver.received else None
                connections = len(held)
    finally:
        stop.set()
        receiver.shutdown()
        for conn in held:
            conn.close()
        silent.close()
    return {
        "scenario": f"webhook behind {deliveries} deliveries to a silent host",
        "other_tenant_delivered_after_s": waited,
        "connections_to_the_silent_host": connections,
    }
