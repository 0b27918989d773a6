"""ENTSO-E documents shaped like real Transparency Platform answers (see data/README.md):
classification sequences, several TimeSeries per sequence, A03 omissions, PT15M/PT60M, the
15-minute go-live day, DST days and acknowledgements."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator

import pytest
from fastapi import FastAPI

from solarapi.kit.timefmt import utcnow
from solarapi.prices import repository
from solarapi.prices.entsoe import NoPricesAnswer, parse_entsoe_xml
from solarapi.prices.price_files import read_price_file
from solarapi.prices.price_rows import PriceFileError, PriceRow, resolution_spans
from tests.prices.helpers import DATA, import_file, stored_rows, utc
from tests.prices.test_parsers import epoch
from tests.support import Tenant, client_for, run_cli, settings_env

# DE-LU day-ahead (SDAC, sequence 1) prices of 2024-06-01 and 2024-06-02, hourly: real
# published market values (the document in data/ mirrors the platform's answer).
JUNE_1 = [88.58, 88.82, 79.66, 72.14, 71.87, 71.83, 75.2, 74.4, 72.49, 61.35, 47.16, 41.86,
          21.21, 7.44, 2.92, 5.8, 13, 52.08, 67.5, 81.9, 85.86, 81.76, 84.48, 65.39]  # fmt: skip
JUNE_2 = [35.71, 31.12, 15.85, 7.22, 8.96, 5.13, 4.91, 4.11, 0.97, 0, 1.56, 0.77, -0.1, -4.01,
          -15.93, -19.58, -8.98, -1.27, 13.95, 67.23, 94.99, 106.93, 109.01, 99.16]  # fmt: skip
TWO_SEQUENCES = DATA / "a44_de-lu_2024-06-01_two_sequences.xml"
GO_LIVE = DATA / "a44_de-lu_2025-09-30_go-live.xml"


@pytest.fixture
async def restore_de_lu(app: FastAPI) -> AsyncIterator[None]:
    """The session's database is shared with other tests that import DE-LU around 2025-10-01
    and 2024-06-01: remove what these tests stored there afterwards."""
    yield
    async with app.state.sessionmaker() as session, session.begin():
        for first, last in (("2024-05-31T00:00:00Z", "2024-06-03T00:00:00Z"),
                            ("2025-09-29T00:00:00Z", "2025-10-03T00:00:00Z")):  # fmt: skip
            await repository.delete_starting_in(session, "DE-LU", epoch(first), epoch(last))
        await repository.bump_zone_version(session, "DE-LU", utcnow())


def test_sequence_one_is_the_day_ahead_price_whatever_the_document_order() -> None:
    parsed = read_price_file(TWO_SEQUENCES, "DE-LU")
    first = epoch("2024-05-31T22:00:00Z")
    # Sequence 2 comes first in the document and is quarter-hourly: under "the finest wins"
    # it used to replace every hour (90.9 instead of 88.58 at midnight).
    assert parsed.sequence == 1
    assert parsed.rows == [
        PriceRow(first + i * 3600, 3600, price) for i, price in enumerate(JUNE_1 + JUNE_2)
    ]
    [other] = parsed.skipped
    assert other.sequence == 2
    assert len(other.rows) == 192
    assert {row.resolution_s for row in other.rows} == {900}
    assert other.rows[0].price_eur_per_mwh == 90.9
    # Position 54 of 2024-06-02 is omitted (A03): it repeats position 53 (0), not a gap.
    june_2 = [row for row in other.rows if row.start >= epoch("2024-06-01T22:00:00Z")]
    assert [row.price_eur_per_mwh for row in june_2[52:55]] == [0.0, 0.0, -16.75]


def test_go_live_day_keeps_mixed_resolutions_within_sequence_one() -> None:
    parsed = read_price_file(GO_LIVE, "DE-LU")
    spans = resolution_spans(parsed.rows)
    assert [(s.resolution_s, s.count, s.first_start, s.last_end) for s in spans] == [
        (3600, 24, epoch("2025-09-29T22:00:00Z"), epoch("2025-09-30T22:00:00Z")),
        (900, 96, epoch("2025-09-30T22:00:00Z"), epoch("2025-10-01T22:00:00Z")),
    ]
    starts = [row.start for row in parsed.rows]
    assert starts == sorted(starts)
    assert all(a.end == b.start for a, b in zip(parsed.rows, parsed.rows[1:], strict=False))
    quarters = [row.price_eur_per_mwh for row in parsed.rows if row.resolution_s == 900]
    assert quarters[8:14] == [quarters[7]] * 6  # positions 9-14 omitted: they repeat 8
    assert quarters[50:56] == [-0.01] * 6
    [other] = parsed.skipped
    assert (other.sequence, len(other.rows)) == (2, 192)
    # The skipped auction's prices are not the day-ahead ones.
    assert [row.price_eur_per_mwh for row in other.rows[96:]] == [
        round(price + 2.35, 2) for price in quarters
    ]


def test_dst_days_have_23_and_100_positions() -> None:
    spring = read_price_file(DATA / "a44_de-lu_2025-03-30_dst.xml", "DE-LU")
    assert [row.start for row in spring.rows] == [
        epoch("2025-03-29T23:00:00Z") + i * 3600 for i in range(23)
    ]
    assert {row.resolution_s for row in spring.rows} == {3600}
    assert [(s.sequence, len(s.rows)) for s in spring.skipped] == [(2, 92)]

    autumn = read_price_file(DATA / "a44_de-lu_2025-10-26_dst.xml", "DE-LU")
    assert [row.start for row in autumn.rows] == [
        epoch("2025-10-25T22:00:00Z") + i * 900 for i in range(100)
    ]
    prices = [row.price_eur_per_mwh for row in autumn.rows]
    assert prices[4:12] == [prices[3]] * 8  # both 02:00 hours, omitted (A03)
    assert (autumn.sequence, autumn.skipped) == (1, ())


def test_documents_without_sequences_are_the_day_ahead_price() -> None:
    parsed = read_price_file(DATA / "a44_nl_2025-06-15_pt60m.xml", "NL")
    assert (parsed.sequence, parsed.skipped, len(parsed.rows)) == (None, (), 24)


@pytest.mark.parametrize(
    ("name", "code", "message"),
    [
        (
            "ack_no_matching_data.xml",
            "999",
            "ENTSO-E has no prices for this zone and period (the day-ahead auction may not have "
            "run yet, or the zone publishes no prices) (reason 999: No matching data found for "
            "Data item ENERGY_PRICES [12.1.D] (10Y1001A1001A82H, 10Y1001A1001A82H) and interval "
            "2026-12-01T00:00:00.000Z/2026-12-02T00:00:00.000Z.); nothing was imported",
        ),
        (
            "ack_too_much_data.xml",
            "999",
            "ENTSO-E answered without prices (reason 999: The amount of requested data exceeds "
            "allowed limit. Max allowed timeframe is 1 years.); nothing was imported",
        ),
    ],
)
def test_acknowledgements_become_a_clear_message(name: str, code: str, message: str) -> None:
    with pytest.raises(NoPricesAnswer) as caught:
        parse_entsoe_xml((DATA / name).read_bytes())
    assert str(caught.value) == message
    assert caught.value.code == code
    with pytest.raises(PriceFileError, match="nothing was imported"):
        read_price_file(DATA / name, "DE-LU")


def _series(sequence: str | None, price: float) -> str:
    element = (
        ""
        if sequence is None
        else "<classificationSequence_AttributeInstanceComponent.position>"
        f"{sequence}</classificationSequence_AttributeInstanceComponent.position>"
    )
    return (
        "<TimeSeries><in_Domain.mRID>10Y1001A1001A82H</in_Domain.mRID>"
        f"{element}<curveType>A01</curveType><Period><timeInterval>"
        "<start>2024-01-01T00:00Z</start><end>2024-01-01T01:00Z</end></timeInterval>"
        f"<resolution>PT60M</resolution><Point><position>1</position><price.amount>{price}"
        "</price.amount></Point></Period></TimeSeries>\n"
    )


def _document(*series: str) -> bytes:
    return ('<Publication_MarketDocument xmlns="x">\n' + "".join(series)).encode() + (
        b"</Publication_MarketDocument>"
    )


@pytest.mark.parametrize(
    ("series", "message"),
    [
        (
            [_series("2", 5.0), _series("3", 6.0)],
            "the document holds no day-ahead price (classification sequence 1), only sequence "
            "2, 3 (other auctions, never imported as the day-ahead price); nothing was imported",
        ),
        (
            [_series("1", 5.0), _series(None, 6.0)],
            "some TimeSeries carry <classificationSequence_AttributeInstanceComponent.position> "
            "1 and others none",
        ),
        ([_series("first", 5.0)], "line 2: <classificationSequence_AttributeInstanceComponent"),
        ([_series("0", 5.0)], "'0' is not a sequence number"),
    ],
)
def test_sequence_errors(series: list[str], message: str) -> None:
    with pytest.raises(PriceFileError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_entsoe_xml(_document(*series))


def test_other_sequences_never_mix_into_the_day_ahead_price() -> None:
    # Same hour in both sequences with different prices: no overlap error, sequence 1 wins.
    document = parse_entsoe_xml(_document(_series("2", 99.0), _series("1", 5.0)))
    assert document.rows == [PriceRow(epoch("2024-01-01T00:00:00Z"), 3600, 5.0)]
    assert [(s.sequence, s.rows[0].price_eur_per_mwh) for s in document.skipped] == [(2, 99.0)]


@pytest.mark.usefixtures("restore_de_lu")
async def test_import_stores_sequence_one_only(app: FastAPI, pro: Tenant) -> None:
    result = await import_file(app, GO_LIVE, "DE-LU")
    assert (result.sequence, result.stored, result.replaced) == (1, 120, 0)
    assert [(s.sequence, len(s.rows)) for s in result.skipped] == [(2, 192)]
    rows = await stored_rows(app, "DE-LU", utc("2025-09-29T00:00:00Z"), utc("2025-10-03T00:00:00Z"))
    assert [resolution for _, resolution, _, _ in rows] == [3600] * 24 + [900] * 96
    expected = read_price_file(GO_LIVE, "DE-LU").rows
    assert [price for _, _, price, _ in rows] == [row.price_eur_per_mwh for row in expected]
    async with client_for(app, pro.live) as client:
        response = await client.get(
            "/api/v1/market-prices",
            params={
                "zone": "DE-LU",
                "interval": "1h",
                "from": "2025-09-30T21:00:00Z",
                "to": "2025-09-30T23:00:00Z",
            },
        )
    hour_before, first_quarter_hour = response.json()["data"]
    assert hour_before["price_eur_per_mwh"] == expected[23].price_eur_per_mwh
    assert first_quarter_hour["price_eur_per_mwh"] == pytest.approx(
        sum(row.price_eur_per_mwh for row in expected[24:28]) / 4, abs=0.001
    )


@pytest.mark.slow
@pytest.mark.usefixtures("restore_de_lu")
async def test_cli_reports_per_zone_and_sequence(app: FastAPI, pro: Tenant) -> None:
    env = settings_env(app.state.settings)
    result = run_cli(env, "prices", "import", str(TWO_SEQUENCES), "--zone", "DE-LU", "--json")
    report = json.loads(result.stdout)
    assert (report["zone"], report["sequence"], report["stored"]) == ("DE-LU", 1, 48)
    assert report["spans"] == [
        {"resolution": "PT60M", "count": 48, "from": "2024-05-31T22:00:00Z",
         "to": "2024-06-02T22:00:00Z"},
    ]  # fmt: skip
    assert report["skipped"] == [
        {"sequence": 2, "count": 192, "spans": [
            {"resolution": "PT15M", "count": 192, "from": "2024-05-31T22:00:00Z",
             "to": "2024-06-02T22:00:00Z"}]},
    ]  # fmt: skip

    text = run_cli(env, "prices", "import", str(GO_LIVE), "--zone", "DE-LU").stdout
    lines = text.splitlines()
    # The replaced count depends on what other tests of this database stored before.
    assert re.sub(r"replaced \d+", "replaced N", lines[0]) == (
        "DE-LU sequence 1 (day-ahead price): stored 120 prices from 2025-09-29T22:00:00Z to "
        "2025-10-01T22:00:00Z; replaced N stored before"
    )
    assert lines[1:] == [
        "  PT60M: 24 from 2025-09-29T22:00:00Z to 2025-09-30T22:00:00Z",
        "  PT15M: 96 from 2025-09-30T22:00:00Z to 2025-10-01T22:00:00Z",
        "DE-LU sequence 2: skipped 192 prices (another auction, not the day-ahead price; not "
        "stored)",
        "  PT15M: 192 from 2025-09-29T22:00:00Z to 2025-10-01T22:00:00Z",
    ]
    refused = run_cli(
        env, "prices", "import", str(DATA / "ack_no_matching_data.xml"), "--zone", "DE-LU",
        check=False,
    )  # fmt: skip
    assert refused.returncode == 1
    assert "ENTSO-E has no prices for this zone and period" in refused.stderr
    assert "Traceback" not in refused.stderr

    async with client_for(app, pro.live) as client:
        response = await client.get(
            "/api/v1/market-prices",
            params={"zone": "DE-LU", "interval": "1h", "from": "2024-05-31T22:00:00Z",
                    "to": "2024-06-02T22:00:00Z"},
        )  # fmt: skip
    body = response.json()
    assert [item["price_eur_per_mwh"] for item in body["data"]] == JUNE_1 + JUNE_2
    assert body["meta"]["source"] == "entsoe"
