"""`solarapi prices fetch` against a local fake of the ENTSO-E Transparency Platform API."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest
from fastapi import FastAPI

from tests.prices.helpers import stored_rows, utc
from tests.support import run_cli, settings_env

TOKEN = "fake-entsoe-token-3f9a1c"
CH_EIC = "10YCH-SWISSGRIDZ"


def _document() -> bytes:
    points = "".join(
        f"<Point><position>{i}</position><price.amount>{100 + i}.5</price.amount></Point>"
        for i in range(1, 49)
    )
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<Publication_MarketDocument xmlns="urn:iec62325.351:tc57wg16:451-3:publicationdocument:7:3">
  <type>A44</type>
  <TimeSeries>
    <in_Domain.mRID codingScheme="A01">{CH_EIC}</in_Domain.mRID>
    <out_Domain.mRID codingScheme="A01">{CH_EIC}</out_Domain.mRID>
    <currency_Unit.name>EUR</currency_Unit.name>
    <price_Measure_Unit.name>MWH</price_Measure_Unit.name>
    <curveType>A01</curveType>
    <Period>
      <timeInterval><start>2025-06-14T22:00Z</start><end>2025-06-16T22:00Z</end></timeInterval>
      <resolution>PT60M</resolution>
      {points}
    </Period>
  </TimeSeries>
</Publication_MarketDocument>
""".encode()


ACKNOWLEDGEMENT = b"""<?xml version="1.0" encoding="UTF-8"?>
<Acknowledgement_MarketDocument xmlns="urn:iec62325.351:tc57wg16:451-1:acknowledgementdocument:7:0">
  <mRID>ack-1</mRID>
  <Reason><code>999</code><text>No matching data found for Data item Day-ahead Prices</text></Reason>
</Acknowledgement_MarketDocument>
"""


class _FakeEntsoe(BaseHTTPRequestHandler):
    requests: list[dict[str, list[str]]] = []  # noqa: RUF012 - shared with the test on purpose

    def do_GET(self) -> None:
        query = parse_qs(urlparse(self.path).query)
        _FakeEntsoe.requests.append(query)
        if query.get("securityToken") != [TOKEN]:
            self._answer(401, b"<html><body>Unauthorized</body></html>", "text/html")
        elif query.get("documentType") != ["A44"] or query.get("in_Domain") != [CH_EIC]:
            self._answer(400, ACKNOWLEDGEMENT, "text/xml")
        elif (query.get("periodStart"), query.get("periodEnd")) == (
            ["202506142200"],
            ["202506162200"],
        ):
            self._answer(200, _document(), "text/xml")
        else:
            self._answer(200, ACKNOWLEDGEMENT, "text/xml")

    def _answer(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture
def fake_entsoe() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeEntsoe)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _FakeEntsoe.requests.clear()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/api"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.slow
async def test_fetch_imports_the_local_days_and_keeps_the_token_secret(
    app: FastAPI, fake_entsoe: str
) -> None:
    env = {**settings_env(app.state.settings), "SOLARAPI_ENTSOE_TOKEN": TOKEN}
    result = run_cli(
        env, "prices", "fetch", "--zone", "CH", "--from", "2025-06-15", "--to", "2025-06-16",
        "--url", fake_entsoe, "--json",
    )  # fmt: skip
    report = json.loads(result.stdout)
    assert (report["zone"], report["source"], report["stored"]) == ("CH", "entsoe", 48)
    assert (report["from"], report["to"]) == ("2025-06-14T22:00:00Z", "2025-06-16T22:00:00Z")
    [query] = _FakeEntsoe.requests
    assert query["out_Domain"] == [CH_EIC]
    rows = await stored_rows(app, "CH", utc("2025-06-14T00:00:00Z"), utc("2025-06-17T00:00:00Z"))
    assert [price for _, _, price, _ in rows] == [100 + i + 0.5 for i in range(1, 49)]

    no_data = run_cli(
        env, "prices", "fetch", "--zone", "CH", "--from", "2025-01-01", "--url", fake_entsoe,
        check=False,
    )  # fmt: skip
    assert no_data.returncode == 1
    assert "ENTSO-E has no prices for this zone and period" in no_data.stderr
    assert "No matching data found for Data item Day-ahead Prices" in no_data.stderr

    wrong = run_cli(
        {**env, "SOLARAPI_ENTSOE_TOKEN": "wrong-token-value-77"},
        "prices", "fetch", "--zone", "CH", "--from", "2025-06-15", "--url", fake_entsoe,
        check=False,
    )  # fmt: skip
    assert wrong.returncode == 1
    assert "refused the token (401)" in wrong.stderr
    assert "wrong-token-value-77" not in wrong.stderr + wrong.stdout
    assert TOKEN not in result.stdout + result.stderr + no_data.stderr


def test_unreachable_api_error_names_no_token() -> None:
    from solarapi.kit.zones import ZONES
    from solarapi.prices.fetch import FetchError, fetch_day_ahead

    with pytest.raises(FetchError) as caught:
        fetch_day_ahead(
            ZONES["CH"], utc("2025-06-14T22:00:00Z"), utc("2025-06-15T22:00:00Z"), TOKEN,
            url="http://127.0.0.1:9/api", timeout_s=2,
        )  # fmt: skip
    assert "could not reach the ENTSO-E API at http://127.0.0.1:9/api" in str(caught.value)
    assert TOKEN not in str(caught.value)


def test_local_day_range_follows_the_zone_calendar() -> None:
    from datetime import date

    from solarapi.kit.zones import ZONES
    from solarapi.prices.fetch import FetchError, local_day_range

    # 2025-03-30 in Zurich has 23 hours.
    start, end = local_day_range(ZONES["CH"], date(2025, 3, 30), date(2025, 3, 30))
    assert (start, end) == (utc("2025-03-29T23:00:00Z"), utc("2025-03-30T22:00:00Z"))
    with pytest.raises(FetchError, match="at most 366 days"):
        local_day_range(ZONES["CH"], date(2024, 1, 1), date(2025, 1, 1))
    with pytest.raises(FetchError, match="before --from"):
        local_day_range(ZONES["CH"], date(2025, 1, 2), date(2025, 1, 1))
