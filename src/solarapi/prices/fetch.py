"""Fetching day-ahead prices from the ENTSO-E Transparency Platform's REST API.

`GET {base}/api?securityToken=…&documentType=A44&in_Domain=EIC&out_Domain=EIC&periodStart=
yyyyMMddHHmm&periodEnd=yyyyMMddHHmm` answers with a `Publication_MarketDocument`, or with an
`Acknowledgement_MarketDocument` when it has no data or dislikes the request. The token is a
secret: it goes only into the request, never into a message, log line or exception text.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import httpx

from solarapi.kit.zones import Zone
from solarapi.prices.entsoe import EntsoeDocument, parse_entsoe_xml
from solarapi.prices.price_rows import MAX_FILE_BYTES, PriceFileError

ENTSOE_API_URL = "https://web-api.tp.entsoe.eu/api"
# The platform serves at most a year per request.
MAX_DAYS = 366


class FetchError(PriceFileError):
    """The ENTSO-E API could not give us prices; the message never contains the token."""


def local_day_range(zone: Zone, first: date, last: date) -> tuple[datetime, datetime]:
    """[00:00 of `first`, 00:00 after `last`) in the zone's local time, as UTC instants."""
    if last < first:
        raise FetchError(f"--to ({last}) is before --from ({first})")
    if (last - first).days + 1 > MAX_DAYS:
        raise FetchError(f"ENTSO-E serves at most {MAX_DAYS} days per request; split the range")
    tz = ZoneInfo(zone.timezone)
    start = datetime(first.year, first.month, first.day, tzinfo=tz)
    after = last + timedelta(days=1)
    end = datetime(after.year, after.month, after.day, tzinfo=tz)
    return start.astimezone(UTC), end.astimezone(UTC)


def fetch_day_ahead(
    zone: Zone,
    start: datetime,
    end: datetime,
    token: str,
    url: str = ENTSOE_API_URL,
    timeout_s: float = 60.0,
) -> EntsoeDocument:
    params = {
        "securityToken": token,
        "documentType": "A44",
        "in_Domain": zone.eic,
        "out_Domain": zone.eic,
        "periodStart": start.astimezone(UTC).strftime("%Y%m%d%H%M"),
        "periodEnd": end.astimezone(UTC).strftime("%Y%m%d%H%M"),
    }
    try:
        response = httpx.get(url, params=params, timeout=timeout_s, follow_redirects=False)
    except httpx.HTTPError as exc:
        # httpx messages can carry the request URL, and with it the token: name the class only.
        raise FetchError(
            f"could not reach the ENTSO-E API at {url} ({type(exc).__name__})"
        ) from None
    body = response.content
    if len(body) > MAX_FILE_BYTES:
        raise FetchError("the ENTSO-E answer is larger than 64 MiB; fetch a shorter range")
    if response.status_code == 401:
        raise FetchError("the ENTSO-E API refused the token (401); check SOLARAPI_ENTSOE_TOKEN")
    if response.status_code == 429:
        raise FetchError("the ENTSO-E API is rate limiting us (429); try again in a minute")
    if response.status_code >= 500:
        raise FetchError(f"the ENTSO-E API failed ({response.status_code}); try again later")
    if not body.lstrip().startswith(b"<"):
        raise FetchError(f"the ENTSO-E API answered {response.status_code} without an XML document")
    # 200 with prices; 200 or 400 with an acknowledgement (no data, bad parameters), which
    # parse_entsoe_xml turns into an error with the platform's reason.
    document = parse_entsoe_xml(body)
    if document.zone.code != zone.code:
        raise FetchError(
            f"the ENTSO-E answer is for zone {document.zone.code}, not {zone.code} as requested"
        )
    return document
