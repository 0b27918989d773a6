"""`epoch_seconds_many` (a batch's timestamps at once, with numpy) against the one-at-a-time
parser it stands in for: the same seconds for every valid text, and no answer at all when any
text is not a valid `YYYY-MM-DDTHH:MM:SSZ` (the caller then names the first bad one)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from solarapi.kit.timefmt import epoch_seconds, epoch_seconds_many

_MOMENTS = st.datetimes(
    min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)
).map(lambda moment: moment.replace(microsecond=0, tzinfo=UTC))


def _text(moment: datetime) -> str:
    return f"{moment.year:04d}" + moment.strftime("-%m-%dT%H:%M:%SZ")


@given(st.lists(_MOMENTS, min_size=1, max_size=50))
def test_valid_texts_give_the_seconds_the_one_at_a_time_parser_gives(
    moments: list[datetime],
) -> None:
    texts = [_text(moment) for moment in moments]
    many = epoch_seconds_many(texts)
    assert many is not None
    assert many.tolist() == [epoch_seconds(text, {}) for text in texts]
    assert many.tolist() == [int(moment.timestamp()) for moment in moments]


@pytest.mark.parametrize(
    "bad",
    [
        "2024-02-30T00:00:00Z",  # no such day
        "2023-02-29T00:00:00Z",  # not a leap year
        "1900-02-29T00:00:00Z",  # a century, not a leap year
        "2024-02-29T24:00:00Z",
        "2024-02-29T23:60:00Z",
        "2024-02-29T23:59:60Z",
        "0000-01-01T00:00:00Z",
        "2024-13-01T00:00:00Z",
        "2024-00-01T00:00:00Z",
        "2024-01-01T00:00:00z",
        "2024-01-01 00:00:00Z",
        "2024-01-01T00:00:00+00:00",
        "2024-01-01T00:00:00.5Z",
        "２024-01-01T00:00:00Z",  # a digit int() reads, but not ASCII
        "2024-01-0aT00:00:00Z",
    ],
)
def test_one_bad_text_among_good_ones_gives_no_answer(bad: str) -> None:
    good = [_text(datetime(2024, 2, 29, tzinfo=UTC) + timedelta(minutes=15 * i)) for i in range(5)]
    assert epoch_seconds_many(good) is not None
    assert epoch_seconds_many([*good[:2], bad, *good[2:]]) is None


def test_leap_days_and_year_ends() -> None:
    texts = ["2000-02-29T12:00:00Z", "2024-12-31T23:59:59Z", "1970-01-01T00:00:00Z"]
    many = epoch_seconds_many(texts)
    assert many is not None
    assert many.tolist() == [951825600, 1735689599, 0]
