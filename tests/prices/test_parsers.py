"""The ENTSO-E and CSV readers: exactly the expected points from each shipped document,
and refusals that name the line or element (pure, no database)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from solarapi.prices.cache import expand_to_quarters
from solarapi.prices.csvfile import parse_price_csv
from solarapi.prices.price_files import read_price_file
from solarapi.prices.price_rows import PriceFileError, PriceRow
from solarapi.prices.service import bucket_means
from tests.prices.helpers import DATA


def epoch(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())


JUNE_15_NL = [82.1, 78.4, 75.0, 73.2, 74.9, 80.3, 95.7, 110.2, 98.4, 60.1, 20.5, -2.3,
              -12.75, -8.4, 5.0, 40.2, 85.6, 120.3, 145.9, 160.4, 130.2, 110.7, 95.3, 88.8]  # fmt: skip


def test_hourly_a01_document_gives_every_hour() -> None:
    parsed = read_price_file(DATA / "a44_nl_2025-06-15_pt60m.xml", "NL")
    assert parsed.source == "entsoe"
    assert parsed.zone.code == "NL"
    first = epoch("2025-06-14T22:00:00Z")
    assert parsed.rows == [
        PriceRow(first + i * 3600, 3600, price) for i, price in enumerate(JUNE_15_NL)
    ]


def test_a03_curve_repeats_the_price_before_an_omitted_position() -> None:
    parsed = read_price_file(DATA / "a44_de_2025-10-01_pt15m_a03.xml", "DE-LU")
    # Positions given in the document: 1→100, 2→98.5, 5→90, 40→−3.25, 41→−10, 60→55.55,
    # 61→120; every other position of the 96 repeats the one before it.
    expected: list[float] = []
    given_prices = {1: 100.0, 2: 98.5, 5: 90.0, 40: -3.25, 41: -10.0, 60: 55.55, 61: 120.0}
    for position in range(1, 97):
        expected.append(given_prices.get(position, expected[-1] if expected else float("nan")))
    first = epoch("2025-09-30T22:00:00Z")
    assert len(parsed.rows) == 96
    assert [row.start for row in parsed.rows] == [first + i * 900 for i in range(96)]
    assert {row.resolution_s for row in parsed.rows} == {900}
    assert [row.price_eur_per_mwh for row in parsed.rows] == expected
    assert parsed.rows[2].price_eur_per_mwh == 98.5  # position 3, omitted
    assert parsed.rows[95].price_eur_per_mwh == 120.0  # position 96, omitted to the end


def test_dst_days_in_two_time_series() -> None:
    parsed = read_price_file(DATA / "a44_nl_dst_days.xml", "NL")
    spring = [row for row in parsed.rows if row.resolution_s == 3600]
    autumn = [row for row in parsed.rows if row.resolution_s == 900]
    # 2025-03-30 in Amsterdam has 23 hours; 2025-10-26 has 25 hours = 100 quarter-hours.
    assert len(spring) == 23
    assert spring[0].start == epoch("2025-03-29T23:00:00Z")
    assert spring[-1].end == epoch("2025-03-30T22:00:00Z")
    assert [row.price_eur_per_mwh for row in spring] == [50.0 + i for i in range(1, 24)]
    assert len(autumn) == 100
    assert autumn[0].start == epoch("2025-10-25T22:00:00Z")
    assert autumn[-1].end == epoch("2025-10-26T23:00:00Z")
    prices = [row.price_eur_per_mwh for row in autumn]
    assert prices[:8] == [70.0] * 8
    assert prices[8:48] == [65.0] * 40
    assert prices[48:96] == [-1.5] * 48
    assert prices[96:] == [80.0] * 4


def test_csv_infers_mixed_resolutions() -> None:
    parsed = read_price_file(DATA / "prices_be_2024-03-02.csv", "BE")
    assert parsed.source == "csv"
    first = epoch("2024-03-01T23:00:00Z")
    assert parsed.rows == [
        PriceRow(first, 3600, 61.2),
        PriceRow(first + 3600, 3600, 59.8),
        PriceRow(first + 7200, 3600, -4.5),
        PriceRow(first + 10800, 900, 55.0),
        PriceRow(first + 11700, 900, 56.0),
        PriceRow(first + 12600, 900, 57.0),
        PriceRow(first + 13500, 900, 58.0),
    ]


@pytest.mark.parametrize(
    ("name", "zone", "message"),
    [
        ("billion_laughs.xml", "BE", "declares the XML entity 'lol'"),
        ("external_entity.xml", "BE", "external entity 'secret' (file:///etc/passwd)"),
        ("external_dtd.xml", "BE", "external resource (http://127.0.0.1:9/evil.dtd)"),
        ("malformed.xml", "BE", "line 12, column 6: malformed XML: mismatched tag"),
        ("bad_price.xml", "BE", "line 14: price.amount 'sixty' is not a number"),
        ("unknown_zone.xml", "BE", "line 5: <in_Domain.mRID> '10YGB----------A' is not"),
        ("a44_nl_2025-06-15_pt60m.xml", "BE", "for zone NL (10YNL----------L), not BE"),
        ("a44_nl_2025-06-15_pt60m.xml", "XX", "unknown zone 'XX'"),
        ("bad_line.csv", "BE", "line 4: timestamp '2024-03-05T02:00:00' has no time zone"),
    ],
)
def test_refused_files_name_the_problem(name: str, zone: str, message: str) -> None:
    with pytest.raises(PriceFileError) as caught:
        read_price_file(DATA / name, zone)
    assert message in str(caught.value)


def _document(period: str, resolution: str = "PT60M", curve: str = "A01") -> bytes:
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<Publication_MarketDocument xmlns="urn:iec62325.351:tc57wg16:451-3:publicationdocument:7:3">
  <type>A44</type>
  <TimeSeries>
    <in_Domain.mRID>10YFR-RTE------C</in_Domain.mRID>
    <curveType>{curve}</curveType>
    <Period>
      <timeInterval><start>2024-01-01T00:00Z</start><end>2024-01-01T03:00Z</end></timeInterval>
      <resolution>{resolution}</resolution>
{period}
    </Period>
  </TimeSeries>
</Publication_MarketDocument>
""".encode()


@pytest.mark.parametrize(
    ("points", "resolution", "curve", "message"),
    [
        ("<Point><position>4</position><price.amount>1</price.amount></Point>", "PT60M", "A01",
         "line 10: position '4' is outside the period (1 to 3"),
        ("<Point><position>1</position><price.amount>1</price.amount></Point>\n"
         "<Point><position>1</position><price.amount>2</price.amount></Point>", "PT60M", "A01",
         "line 11: position 1 appears twice"),
        ("<Point><position>1</position><price.amount>1</price.amount></Point>", "PT5M", "A01",
         "line 9: resolution 'PT5M' is not supported"),
        ("<Point><position>2</position><price.amount>1</price.amount></Point>", "PT60M", "A03",
         "curve type A03 needs position 1"),
        ("<Point><position>1</position><price.amount>1</price.amount></Point>", "PT60M", "A09",
         "line 6: curveType 'A09' is not supported"),
        ("<Point><position>1</position></Point>", "PT60M", "A01",
         "line 10: <Point> has no <price.amount>"),
    ],
)  # fmt: skip
def test_period_errors_name_the_line(
    points: str, resolution: str, curve: str, message: str
) -> None:
    from solarapi.prices.entsoe import parse_entsoe_xml

    with pytest.raises(PriceFileError) as caught:
        parse_entsoe_xml(_document(points, resolution, curve))
    assert message in str(caught.value)


def test_a01_missing_position_is_a_gap_not_a_repetition() -> None:
    from solarapi.prices.entsoe import parse_entsoe_xml

    points = (
        "<Point><position>1</position><price.amount>10</price.amount></Point>\n"
        "<Point><position>3</position><price.amount>30</price.amount></Point>"
    )
    document = parse_entsoe_xml(_document(points))
    assert [
        (row.start - epoch("2024-01-01T00:00:00Z"), row.price_eur_per_mwh) for row in document.rows
    ] == [
        (0, 10.0),
        (7200, 30.0),
    ]


def _series(start: str, end: str, resolution: str, prices: list[float]) -> str:
    points = "".join(
        f"<Point><position>{i}</position><price.amount>{price}</price.amount></Point>\n"
        for i, price in enumerate(prices, start=1)
    )
    return f"""<TimeSeries>
<in_Domain.mRID>10YFR-RTE------C</in_Domain.mRID>
<Period>
<timeInterval><start>{start}</start><end>{end}</end></timeInterval>
<resolution>{resolution}</resolution>
{points}</Period>
</TimeSeries>
"""


def _two_series(first: str, second: str) -> bytes:
    return (
        f'<Publication_MarketDocument xmlns="x">\n<type>A44</type>\n{first}{second}'
        "</Publication_MarketDocument>"
    ).encode()


def test_overlapping_time_series_with_other_prices_are_refused() -> None:
    from solarapi.prices.entsoe import parse_entsoe_xml

    hour = ("2024-01-01T00:00Z", "2024-01-01T01:00Z", "PT60M")
    with pytest.raises(PriceFileError) as caught:
        parse_entsoe_xml(_two_series(_series(*hour, [5.0]), _series(*hour, [6.0])))
    assert "the Point at line 16 overlaps the Point at line 8 with a different price" in str(
        caught.value
    )
    # The same period repeated with the same price is kept once.
    document = parse_entsoe_xml(_two_series(_series(*hour, [5.0]), _series(*hour, [5.0])))
    assert document.rows == [PriceRow(epoch("2024-01-01T00:00:00Z"), 3600, 5.0)]


def test_finer_time_series_win_over_coarser_ones_of_the_same_time() -> None:
    from solarapi.prices.entsoe import parse_entsoe_xml

    hourly = _series("2024-01-01T00:00Z", "2024-01-01T02:00Z", "PT60M", [50.0, 60.0])
    quarters = _series("2024-01-01T00:00Z", "2024-01-01T01:00Z", "PT15M", [1.0, 2.0, 3.0, 4.0])
    document = parse_entsoe_xml(_two_series(hourly, quarters))
    first = epoch("2024-01-01T00:00:00Z")
    assert document.rows == [
        PriceRow(first, 900, 1.0),
        PriceRow(first + 900, 900, 2.0),
        PriceRow(first + 1800, 900, 3.0),
        PriceRow(first + 2700, 900, 4.0),
        PriceRow(first + 3600, 3600, 60.0),  # the second hour has no finer price
    ]
    # An hour only partly covered by finer prices contradicts them.
    half = _series("2024-01-01T00:00Z", "2024-01-01T00:30Z", "PT15M", [1.0, 2.0])
    with pytest.raises(PriceFileError, match=r"overlaps .* with a different price"):
        parse_entsoe_xml(_two_series(hourly, half))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the file is empty"),
        ("time,price\n", "line 1: the header must be 'timestamp,price_eur_per_mwh'"),
        ("timestamp,price_eur_per_mwh\n", "has a header but no prices"),
        ("timestamp,price_eur_per_mwh\n2024-01-01T00:07:00Z,1\n", "line 2: timestamp '2024-01-01T00:07:00Z' is not on the 15-minute grid"),
        ("timestamp,price_eur_per_mwh\n2024-01-01T00:00:00Z,abc\n", "line 2: price_eur_per_mwh 'abc' is not a number"),
        ("timestamp,price_eur_per_mwh\n2024-01-01T00:00:00Z,nan\n", "line 2: price_eur_per_mwh 'nan' is not a number"),
        ("timestamp,price_eur_per_mwh\n2024-01-01T00:00:00Z,1,2\n", "line 2: expected 2 columns, got 3"),
        ("timestamp,price_eur_per_mwh\n2024-01-01T00:00:00Z,1\n2024-01-01T01:00:00+01:00,2\n", "line 3: timestamp repeats the one on line 2"),
        ("timestamp,price_eur_per_mwh\n2024-01-01T00:00:00Z,5\n2024-01-01T00:15:00Z,1\n2024-01-01T01:00:00+01:00,2\n", "line 4: timestamp repeats the one on line 2"),
        ("timestamp,price_eur_per_mwh\n2024-01-01T00:00:00Z,1\n", "line 2: cannot tell how long this price holds"),
    ],
)  # fmt: skip
def test_csv_errors_name_the_line(text: str, message: str) -> None:
    with pytest.raises(PriceFileError) as caught:
        parse_price_csv(text)
    assert message in str(caught.value)


def test_csv_resolution_option_overrides_inference() -> None:
    rows = parse_price_csv(
        "timestamp,price_eur_per_mwh\n2024-01-01T00:00:00Z,1\n2024-01-01T02:00:00Z,2\n", 1800
    )
    assert [(row.start % 86400, row.resolution_s) for row in rows] == [(0, 1800), (7200, 1800)]
    with pytest.raises(PriceFileError, match="line 2: a 60-minute price must start on the 60"):
        parse_price_csv("timestamp,price_eur_per_mwh\n2024-01-01T00:15:00Z,1\n", 3600)


# --- the quarter-hour arithmetic, against a naive reference -----------------------------------


def _naive_bucket_means(
    periods: list[tuple[int, int, float]], edges: list[int]
) -> list[float | None]:
    """Time-weighted mean per bucket, second by second of overlap (the definition)."""
    means: list[float | None] = []
    for lo, hi in itertools.pairwise(edges):
        weight = total = 0.0
        for start, length, price in periods:
            overlap = max(0, min(hi, start + length) - max(lo, start))
            weight += overlap
            total += overlap * price
        means.append(total / weight if weight else None)
    return means


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 40), st.sampled_from([1, 2, 4]), st.floats(-500, 3000, allow_nan=False)
        ),
        max_size=20,
    ),
    st.sampled_from([1, 4, 6, 96]),
)
def test_bucket_means_match_the_definition(
    raw: list[tuple[int, int, float]], quarters_per_bucket: int
) -> None:
    origin = epoch("2025-01-01T00:00:00Z")
    periods: list[tuple[int, int, float]] = []
    taken: set[int] = set()
    for slot, quarters, price in raw:
        start_slot = slot - slot % quarters  # periods sit on their own grid, like real ones
        covered = set(range(start_slot, start_slot + quarters))
        if covered & taken:
            continue
        taken |= covered
        periods.append((origin + start_slot * 900, quarters * 900, price))
    periods.sort()
    span = 48 * 900
    edges = list(range(origin, origin + span + 1, quarters_per_bucket * 900))
    end = edges[-1]
    quarters_array = expand_to_quarters(
        np.array([p[0] for p in periods], dtype=np.int64),
        np.array([p[1] for p in periods], dtype=np.int64),
        np.array([p[2] for p in periods], dtype=np.float64),
        origin,
        end,
    )
    got = bucket_means(quarters_array, np.array(edges, dtype=np.int64))
    expected = _naive_bucket_means(periods, edges)
    for value, reference in zip(got.tolist(), expected, strict=True):
        if reference is None:
            assert np.isnan(value)
        else:
            assert value == pytest.approx(reference, rel=1e-9, abs=1e-9)


def test_read_price_file_refuses_missing_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(PriceFileError, match="cannot read"):
        read_price_file(tmp_path / "nope.xml", "NL")
    (tmp_path / "empty.csv").write_text("  \n")
    with pytest.raises(PriceFileError, match="is empty"):
        read_price_file(tmp_path / "empty.csv", "NL")


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.integers(0, 400), min_size=2, max_size=40, unique=True),
    st.sampled_from(["Z", "+01:00", "-05:30", "+14:00"]),
    st.lists(st.decimals(-500, 3000, places=2, allow_nan=False), min_size=40, max_size=40),
)
def test_csv_round_trip(slots: list[int], offset: str, prices: list[object]) -> None:
    from datetime import timedelta, timezone

    origin = datetime(2025, 1, 1, tzinfo=UTC)
    if offset == "Z":
        tz = UTC
    else:
        sign = -1 if offset[0] == "-" else 1
        tz = timezone(sign * timedelta(hours=int(offset[1:3]), minutes=int(offset[4:6])))
    lines = ["timestamp,price_eur_per_mwh"]
    for slot, price in zip(slots, prices, strict=False):
        moment = (origin + timedelta(minutes=15 * slot)).astimezone(tz)
        text = moment.strftime("%Y-%m-%dT%H:%M:%S") + offset
        lines.append(f"{text},{price}")
    rows = parse_price_csv("\n".join(lines) + "\n", 900)
    expected = sorted(
        (int(origin.timestamp()) + 900 * slot, float(str(price)))
        for slot, price in zip(slots, prices, strict=False)
    )
    assert [(row.start, row.price_eur_per_mwh) for row in rows] == expected
    assert {row.resolution_s for row in rows} == {900}


@settings(max_examples=50, deadline=None)
@given(
    st.sets(st.integers(2, 24), max_size=23),
    st.lists(st.integers(-50, 500), min_size=24, max_size=24),
)
def test_a03_expansion_matches_repetition(given_positions: set[int], prices: list[int]) -> None:
    from solarapi.prices.entsoe import parse_entsoe_xml

    positions = sorted({1} | given_positions)
    points = "\n".join(
        f"<Point><position>{p}</position><price.amount>{prices[p - 1]}</price.amount></Point>"
        for p in positions
    )
    text = f"""<Publication_MarketDocument xmlns="x"><type>A44</type><TimeSeries>
<in_Domain.mRID>10YAT-APG------L</in_Domain.mRID><curveType>A03</curveType><Period>
<timeInterval><start>2024-01-01T00:00Z</start><end>2024-01-02T00:00Z</end></timeInterval>
<resolution>PT60M</resolution>{points}</Period></TimeSeries></Publication_MarketDocument>"""
    document = parse_entsoe_xml(text.encode())
    expected: list[float] = []
    for position in range(1, 25):
        expected.append(float(prices[position - 1]) if position in positions else expected[-1])
    assert [row.price_eur_per_mwh for row in document.rows] == expected
    assert [row.start for row in document.rows] == [
        epoch("2024-01-01T00:00:00Z") + 3600 * i for i in range(24)
    ]


@pytest.mark.parametrize("price", ["1.7e308", "-1.7e308", "10000.01", "-1000.5"])
def test_implausible_prices_are_refused(price: str, tmp_path: Path) -> None:
    """±1.7e308 was imported (served as null, totals NaN): outside −1,000…+10,000 €/MWh, both
    file formats name the line."""
    with pytest.raises(PriceFileError, match=r"line 3: price_eur_per_mwh .* plausible range"):
        parse_price_csv(
            f"timestamp,price_eur_per_mwh\n2025-06-15T00:00:00Z,50\n2025-06-15T01:00:00Z,{price}\n"
        )
    xml = (DATA / "a44_nl_2025-06-15_pt60m.xml").read_text(encoding="utf-8")
    first = xml.index("<price.amount>")
    end = xml.index("</price.amount>", first)
    changed = xml[:first] + f"<price.amount>{price}" + xml[end:]
    path = tmp_path / "a44.xml"
    path.write_text(changed, encoding="utf-8")
    with pytest.raises(PriceFileError, match=r"price\.amount .* plausible range"):
        read_price_file(path, "NL")


@pytest.mark.parametrize("price", ["-500", "4000", "-1000", "10000"])
def test_sdac_limits_are_accepted(price: str) -> None:
    rows = parse_price_csv(
        f"timestamp,price_eur_per_mwh\n2025-06-15T00:00:00Z,{price}\n", resolution_s=3600
    )
    assert [row.price_eur_per_mwh for row in rows] == [float(price)]
