"""ENTSO-E Transparency Platform day-ahead prices: `Publication_MarketDocument`, type A44.

Shape: TimeSeries (in_Domain/out_Domain EIC, currency, curveType) → Period (timeInterval
start/end in UTC, resolution PT15M/PT30M/PT60M) → Point (position from 1, price.amount).
Curve type A01 lists every position; A03 omits a position whose price repeats the previous
one, so an omitted position carries the price before it up to the period's end.

Classification sequences: for some zones a response holds several price series for the same
hours, told apart by `classificationSequence_AttributeInstanceComponent.position`. Sequence 1
(or a TimeSeries without the element) is the zone's day-ahead (SDAC) price; others are other
auctions (DE-LU before the 15-minute market: sequence 2 was a quarter-hourly auction, not the
day-ahead price). Only the day-ahead sequence is imported; the others are parsed, checked and
reported as skipped, never mixed into it. Document order is not sequence order.

An `Acknowledgement_MarketDocument` (the platform's answer when it has no data, reason 999,
or refuses a request) becomes a `NoPricesAnswer` naming the platform's reason.

Parsed with defusedxml's SAX parser: entity declarations (billion laughs) and external
references (XXE) are refused before anything is expanded or fetched, and the SAX locator
gives every element its line so errors can point at it.
"""

from __future__ import annotations

import re
import xml.sax
import xml.sax.handler
import xml.sax.xmlreader
from dataclasses import dataclass, field
from datetime import UTC, datetime
from io import BytesIO

import defusedxml.sax
from defusedxml import DTDForbidden, EntitiesForbidden, ExternalReferenceForbidden

from solarapi.kit.grid import QUARTER_S
from solarapi.kit.zones import ZONE_BY_EIC, Zone
from solarapi.prices.price_rows import PriceFileError, PriceRow, PriceSequence, price_problem

_RESOLUTIONS = {"PT15M": 900, "PT30M": 1800, "PT60M": 3600, "PT1H": 3600}
# ENTSO-E writes interval bounds without seconds (2025-06-14T22:00Z); accept them with, too.
_UTC_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})(:\d{2})?Z$")


@dataclass(slots=True)
class _Element:
    name: str  # local name, namespace prefix dropped
    line: int
    text: str = ""
    children: list[_Element] = field(default_factory=list)

    def all(self, name: str) -> list[_Element]:
        return [child for child in self.children if child.name == name]

    def first(self, name: str) -> _Element | None:
        for child in self.children:
            if child.name == name:
                return child
        return None

    def required(self, name: str, where: str) -> _Element:
        found = self.first(name)
        if found is None:
            raise PriceFileError(f"line {self.line}: {where} has no <{name}> element")
        return found


class _TreeBuilder(xml.sax.handler.ContentHandler):
    def __init__(self) -> None:
        super().__init__()
        self.root: _Element | None = None
        self._stack: list[_Element] = []
        self._locator: xml.sax.xmlreader.Locator | None = None

    def setDocumentLocator(self, locator: xml.sax.xmlreader.Locator) -> None:
        self._locator = locator

    def startElement(self, name: str, attrs: xml.sax.xmlreader.AttributesImpl) -> None:
        line = self._locator.getLineNumber() if self._locator is not None else 0
        element = _Element(name.rpartition(":")[2], line or 0)
        if self._stack:
            self._stack[-1].children.append(element)
        else:
            self.root = element
        self._stack.append(element)

    def endElement(self, name: str) -> None:
        element = self._stack.pop()
        element.text = element.text.strip()

    def characters(self, content: str) -> None:
        if self._stack:
            self._stack[-1].text += content


# The sequence that is the zone's day-ahead price; a TimeSeries without the element is it too.
DAY_AHEAD_SEQUENCE = 1
# The acknowledgement reason code the platform uses for "No matching data found".
NO_DATA_REASON = "999"


class NoPricesAnswer(PriceFileError):
    """An ENTSO-E `Acknowledgement_MarketDocument`: the platform answered without prices."""

    def __init__(self, message: str, code: str | None, text: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.text = text


@dataclass(frozen=True, slots=True)
class EntsoeDocument:
    zone: Zone
    rows: list[PriceRow]  # the day-ahead sequence, sorted, never overlapping
    # 1 when the TimeSeries carry the element, None when the document has no sequences.
    sequence: int | None = None
    skipped: tuple[PriceSequence, ...] = ()  # other sequences, by number: never imported


def parse_entsoe_xml(data: bytes) -> EntsoeDocument:
    root = _parse_tree(data)
    if root.name == "Acknowledgement_MarketDocument":
        raise _acknowledgement(root)
    if root.name != "Publication_MarketDocument":
        raise PriceFileError(
            f"line {root.line}: root element is <{root.name}>; expected an ENTSO-E "
            "<Publication_MarketDocument>"
        )
    doc_type = root.first("type")
    if doc_type is not None and doc_type.text != "A44":
        raise PriceFileError(
            f"line {doc_type.line}: document type is {doc_type.text!r}; only A44 "
            "(day-ahead prices) can be imported"
        )
    series = root.all("TimeSeries")
    if not series:
        raise PriceFileError(f"line {root.line}: the document has no <TimeSeries>")

    zone, by_sequence = _read_series(series)
    return _day_ahead(zone, by_sequence)


_Collected = dict[int | None, tuple[list[PriceRow], list[str]]]


def _read_series(series: list[_Element]) -> tuple[Zone, _Collected]:
    """Every TimeSeries' rows, per classification sequence (None: no element), with where each
    row came from; all for one zone."""
    zone: Zone | None = None
    by_sequence: _Collected = {}
    for ts_index, ts in enumerate(series, start=1):
        where = f"TimeSeries {ts_index} (line {ts.line})"
        ts_zone = _series_zone(ts, where)
        if zone is None:
            zone = ts_zone
        elif ts_zone is not zone:
            raise PriceFileError(
                f"{where} is for zone {ts_zone.code}, but earlier TimeSeries are for {zone.code}; "
                "import one zone per document"
            )
        _check_units(ts, where)
        curve = ts.first("curveType")
        curve_type = curve.text if curve is not None else "A01"
        if curve_type not in ("A01", "A03"):
            assert curve is not None
            raise PriceFileError(
                f"line {curve.line}: curveType {curve_type!r} is not supported; "
                "expected A01 (every position) or A03 (repeated prices omitted)"
            )
        periods = ts.all("Period")
        if not periods:
            raise PriceFileError(f"{where} has no <Period>")
        rows, origins = by_sequence.setdefault(_sequence(ts), ([], []))
        for p_index, period in enumerate(periods, start=1):
            period_where = f"{where} Period {p_index} (line {period.line})"
            for row, point_line in _period_rows(period, period_where, curve_type == "A03"):
                rows.append(row)
                origins.append(f"the Point at line {point_line}")
    assert zone is not None
    return zone, by_sequence


def _day_ahead(zone: Zone, by_sequence: _Collected) -> EntsoeDocument:
    """Sequence 1 (or the sequence-less series) as the day-ahead price, the others skipped;
    each sequence's rows checked for overlaps on their own, never against another's."""
    if None in by_sequence and DAY_AHEAD_SEQUENCE in by_sequence:
        raise PriceFileError(
            "some TimeSeries carry <classificationSequence_AttributeInstanceComponent.position> "
            "1 and others none: it is ambiguous which of them is the day-ahead price"
        )
    sequences = {
        number: _finest_without_overlap(rows, origins)
        for number, (rows, origins) in sorted(by_sequence.items(), key=lambda item: item[0] or 0)
    }
    skipped = tuple(
        PriceSequence(number, rows)
        for number, rows in sequences.items()
        if number is not None and number != DAY_AHEAD_SEQUENCE
    )
    if None not in sequences and DAY_AHEAD_SEQUENCE not in sequences:
        numbers = ", ".join(str(item.sequence) for item in skipped)
        raise PriceFileError(
            f"the document holds no day-ahead price (classification sequence 1), only "
            f"sequence {numbers} (other auctions, never imported as the day-ahead price); "
            "nothing was imported"
        )
    number = None if None in sequences else DAY_AHEAD_SEQUENCE
    return EntsoeDocument(zone, sequences[number], number, skipped)


def _sequence(ts: _Element) -> int | None:
    element = ts.first("classificationSequence_AttributeInstanceComponent.position")
    if element is None:
        return None
    if not element.text.isdigit() or int(element.text) < 1:
        raise PriceFileError(
            f"line {element.line}: <{element.name}> {element.text!r} is not a sequence number "
            "(1, 2, …)"
        )
    return int(element.text)


def _acknowledgement(root: _Element) -> NoPricesAnswer:
    """The platform's answer without prices, as one clear sentence with its reason."""
    reasons = [
        (reason.first("code"), reason.first("text"))
        for reason in root.children
        if reason.name == "Reason"
    ]
    code = next((c.text for c, _ in reasons if c is not None and c.text), None)
    texts = [t.text for _, t in reasons if t is not None and t.text]
    text = " ".join(texts) or None
    said = f" (reason {code or 'without a code'}: {text or 'no text'})"
    if code == NO_DATA_REASON and (text is None or "no matching data" in text.lower()):
        message = (
            "ENTSO-E has no prices for this zone and period (the day-ahead auction may not have "
            f"run yet, or the zone publishes no prices){said}; nothing was imported"
        )
    else:
        message = f"ENTSO-E answered without prices{said}; nothing was imported"
    return NoPricesAnswer(message, code, text)


def _finest_without_overlap(rows: list[PriceRow], origins: list[str]) -> list[PriceRow]:
    """The rows sorted by start, none overlapping another.

    Around the move to 15-minute products one document can hold the same day twice, in
    15-minute and in hourly TimeSeries: the finest wins, and a coarser period wholly covered
    by finer ones is dropped. A period repeated with the same price is kept once. Any other
    overlap is contradictory and refused, naming both Points.
    """
    order = sorted(range(len(rows)), key=lambda i: (rows[i].resolution_s, rows[i].start))
    owner_of: dict[int, int] = {}  # quarter-hour start → index of the row holding it
    kept: list[int] = []
    for i in order:
        row = rows[i]
        quarters = range(row.start, row.end, QUARTER_S)
        owners = {owner_of.get(quarter) for quarter in quarters}
        if owners == {None}:
            owner_of.update(dict.fromkeys(quarters, i))
            kept.append(i)
            continue
        other = min(owner for owner in owners if owner is not None)
        if rows[other] == row:
            continue
        if None not in owners and all(
            rows[owner].resolution_s < row.resolution_s for owner in owners if owner is not None
        ):
            continue
        raise PriceFileError(
            f"{origins[i]} overlaps {origins[other]} with a different price for the period "
            f"starting at {_iso(max(row.start, rows[other].start))}"
        )
    kept.sort(key=lambda i: rows[i].start)
    return [rows[i] for i in kept]


def _parse_tree(data: bytes) -> _Element:
    builder = _TreeBuilder()
    try:
        defusedxml.sax.parse(
            BytesIO(data),
            builder,
            forbid_dtd=False,
            forbid_entities=True,
            forbid_external=True,
        )
    except EntitiesForbidden as exc:
        if exc.sysid or exc.pubid:
            raise PriceFileError(
                f"the document declares the external entity '{exc.name}' "
                f"({exc.sysid or exc.pubid}); external entities are refused (they can read "
                "local files or reach internal hosts) and nothing was imported"
            ) from None
        raise PriceFileError(
            f"the document declares the XML entity '{exc.name}'; entity declarations are "
            "refused (they enable entity-expansion and external-entity attacks) and ENTSO-E "
            "documents never contain them"
        ) from None
    except ExternalReferenceForbidden as exc:
        raise PriceFileError(
            f"the document refers to an external resource ({exc.sysid or exc.pubid}); "
            "external references are refused"
        ) from None
    except DTDForbidden:  # pragma: no cover - DTDs are allowed, only their dangerous parts not
        raise PriceFileError("the document has a DTD; DTDs are refused") from None
    except xml.sax.SAXParseException as exc:
        raise PriceFileError(
            f"line {exc.getLineNumber()}, column {exc.getColumnNumber()}: malformed XML: "
            f"{exc.getMessage()}"
        ) from None
    if builder.root is None:  # pragma: no cover - expat reports "no element found" first
        raise PriceFileError("the document has no root element")
    return builder.root


def _series_zone(ts: _Element, where: str) -> Zone:
    domains = [d for d in (ts.first("in_Domain.mRID"), ts.first("out_Domain.mRID")) if d]
    if not domains:
        raise PriceFileError(f"{where} has no <in_Domain.mRID> naming its bidding zone")
    zones: list[Zone] = []
    for domain in domains:
        zone = ZONE_BY_EIC.get(domain.text)
        if zone is None:
            raise PriceFileError(
                f"line {domain.line}: <{domain.name}> {domain.text!r} is not the EIC code of "
                "a supported bidding zone (see GET /market-prices/zones)"
            )
        zones.append(zone)
    if len(zones) == 2 and zones[0] is not zones[1]:
        raise PriceFileError(
            f"{where}: in_Domain ({zones[0].code}) and out_Domain ({zones[1].code}) differ; "
            "day-ahead prices (A44) name one zone"
        )
    return zones[0]


def _check_units(ts: _Element, where: str) -> None:
    currency = ts.first("currency_Unit.name")
    if currency is not None and currency.text != "EUR":
        raise PriceFileError(
            f"line {currency.line}: currency {currency.text!r} is not supported; prices are "
            "stored in EUR"
        )
    unit = ts.first("price_Measure_Unit.name")
    if unit is not None and unit.text.upper() != "MWH":
        raise PriceFileError(
            f"line {unit.line}: price unit {unit.text!r} is not supported; expected MWH"
        )


def _period_rows(period: _Element, where: str, repeat_omitted: bool) -> list[tuple[PriceRow, int]]:
    interval = period.required("timeInterval", where)
    start = _utc_epoch(interval.required("start", f"{where} <timeInterval>"))
    end = _utc_epoch(interval.required("end", f"{where} <timeInterval>"))
    resolution_el = period.required("resolution", where)
    resolution_s = _RESOLUTIONS.get(resolution_el.text)
    if resolution_s is None:
        raise PriceFileError(
            f"line {resolution_el.line}: resolution {resolution_el.text!r} is not supported; "
            "expected PT15M, PT30M or PT60M"
        )
    if end <= start:
        raise PriceFileError(f"line {interval.line}: timeInterval ends before it starts")
    if start % resolution_s or (end - start) % resolution_s:
        raise PriceFileError(
            f"line {interval.line}: timeInterval is not a whole number of "
            f"{resolution_el.text} periods on the UTC grid"
        )
    slots = (end - start) // resolution_s
    by_position: dict[int, tuple[float, int]] = {}
    for point in period.all("Point"):
        position_el = point.required("position", f"line {point.line}: <Point>")
        price_el = point.first("price.amount")
        if price_el is None:
            raise PriceFileError(f"line {point.line}: <Point> has no <price.amount>")
        try:
            position = int(position_el.text)
        except ValueError:
            position = 0
        if not 1 <= position <= slots:
            raise PriceFileError(
                f"line {position_el.line}: position {position_el.text!r} is outside the period "
                f"(1 to {slots} for {resolution_el.text} from {_iso(start)} to {_iso(end)})"
            )
        if position in by_position:
            raise PriceFileError(
                f"line {position_el.line}: position {position} appears twice in {where}"
            )
        problem = price_problem(price_el.text)
        if problem is not None:
            raise PriceFileError(f"line {price_el.line}: price.amount {price_el.text!r} {problem}")
        by_position[position] = (float(price_el.text), point.line)
    if not by_position:
        raise PriceFileError(f"{where} has no <Point>")
    if repeat_omitted and 1 not in by_position:
        raise PriceFileError(
            f"{where}: curve type A03 needs position 1 (an omitted position repeats the "
            "price before it, and nothing comes before position 1)"
        )
    rows: list[tuple[PriceRow, int]] = []
    carried: tuple[float, int] | None = None
    for position in range(1, slots + 1):
        given = by_position.get(position)
        if given is not None:
            carried = given
        elif not repeat_omitted:
            continue  # A01: a missing position is a gap, not a repetition
        assert carried is not None
        price, line = given or carried
        rows.append((PriceRow(start + (position - 1) * resolution_s, resolution_s, price), line))
    return rows


def _utc_epoch(element: _Element) -> int:
    match = _UTC_TIME.match(element.text)
    if match is None:
        raise PriceFileError(
            f"line {element.line}: <{element.name}> {element.text!r} is not a UTC time such "
            "as 2025-06-14T22:00Z"
        )
    try:
        value = datetime.fromisoformat(f"{match.group(1)}T{match.group(2)}{match.group(3) or ''}")
    except ValueError:
        raise PriceFileError(
            f"line {element.line}: <{element.name}> {element.text!r} is not a valid date"
        ) from None
    return int(value.replace(tzinfo=UTC).timestamp())


def _iso(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%MZ")
