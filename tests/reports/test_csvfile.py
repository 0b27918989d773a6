"""The CSV writer on its own: RFC 4180 round trip for any text, formulas neutralised,
missing values empty."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from solarapi.reports.csvfile import write_csv
from solarapi.reports.document import ReportContent

text = st.text(st.characters(exclude_categories=("Cs",)), max_size=30)
cells = st.one_of(st.none(), text, st.integers(-(10**9), 10**9),
                  st.floats(allow_nan=False, allow_infinity=False))  # fmt: skip


def written(tmp: Path, rows: list[list[object]]) -> bytes:
    content = ReportContent("t", [], ["a", "b", "c"], csv_rows=rows)  # type: ignore[arg-type]
    path = tmp / "out.csv"
    write_csv(content, path)
    return path.read_bytes()


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.lists(cells, min_size=3, max_size=3), max_size=8))
def test_round_trip(rows: list[list[object]]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        data = written(Path(tmp), rows)
    parsed = list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))
    assert parsed[0] == ["a", "b", "c"]
    assert len(parsed) == len(rows) + 1
    for row, back in zip(rows, parsed[1:], strict=True):
        for value, field in zip(row, back, strict=True):
            if value is None:
                assert field == ""
            elif isinstance(value, str):
                dangerous = value.startswith(("=", "+", "-", "@", "\t", "\r"))
                assert field == ("'" + value if dangerous else value)
            elif isinstance(value, int):
                assert int(field) == value
            else:
                assert float(field) == value


def test_crlf_and_quoting(tmp_path: Path) -> None:
    data = written(tmp_path, [["x,y", 'say "hi"', -1.5], [None, "=SUM(A1)", "line\nbreak"]])
    assert data == (b'a,b,c\r\n"x,y","say ""hi""",-1.5\r\n,\'=SUM(A1),"line\nbreak"\r\n')
