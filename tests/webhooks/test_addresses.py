"""The address rules against server-side request forgery, as units, and the guard at
connection time (an IP literal is refused before any connection is tried)."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from solarapi.webhooks.addresses import (
    ForbiddenDestination,
    forbidden_reason,
    parse_url,
    validate_destination,
)
from solarapi.webhooks.delivery import Delivery, send


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("10.0.0.1", "a private address"),
        ("172.16.5.4", "a private address"),
        ("192.168.0.1", "a private address"),
        ("127.0.0.1", "a loopback address"),
        ("127.8.9.10", "a loopback address"),
        ("::1", "a loopback address"),
        ("::ffff:127.0.0.1", "a loopback address"),
        ("::ffff:10.1.1.1", "a private address"),
        ("64:ff9b::a00:1", "a private address"),  # NAT64 of 10.0.0.1
        ("64:ff9b::a9fe:a9fe", "a cloud metadata address"),  # NAT64 of 169.254.169.254
        ("2002:7f00:1::", "a loopback address"),  # 6to4 of 127.0.0.1
        ("169.254.169.254", "a cloud metadata address"),
        ("169.254.170.2", "a cloud metadata address"),
        ("fd00:ec2::254", "a cloud metadata address"),
        ("100.100.100.200", "a cloud metadata address"),
        ("169.254.1.1", "a link-local address"),
        ("fe80::1", "a link-local address"),
        ("fc00::1", "a private address"),
        ("0.0.0.0", "an unspecified address"),  # noqa: S104
        ("::", "an unspecified address"),
        ("224.0.0.1", "a multicast address"),
        ("100.64.0.1", "a special-purpose (non-public) address"),
        ("192.0.2.1", "a private address"),
        # Issue 28, item 15: Python 3.11 calls these global.
        ("::127.0.0.1", "a loopback address"),  # IPv4-compatible IPv6
        ("::a00:1", "a private address"),
        ("192.0.0.8", "a special-purpose (non-public) address"),
        ("64:ff9b:1::a00:1", "a special-purpose (non-public) address"),  # local-use NAT64
    ],
)
def test_forbidden_addresses(address: str, reason: str) -> None:
    assert forbidden_reason(ipaddress.ip_address(address), allow_loopback=False) == reason


@pytest.mark.parametrize("address", ["1.1.1.1", "8.8.8.8", "2606:4700:4700::1111", "93.184.215.14"])
def test_public_addresses_are_allowed(address: str) -> None:
    assert forbidden_reason(ipaddress.ip_address(address), allow_loopback=False) is None


def test_loopback_permission_opens_only_loopback() -> None:
    assert forbidden_reason(ipaddress.ip_address("127.0.0.1"), allow_loopback=True) is None
    assert forbidden_reason(ipaddress.ip_address("::1"), allow_loopback=True) is None
    for other in ("10.0.0.1", "169.254.169.254", "fe80::1"):
        assert forbidden_reason(ipaddress.ip_address(other), allow_loopback=True) is not None


@given(st.ip_addresses())
def test_every_address_is_either_global_or_refused(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> None:
    reason = forbidden_reason(address, allow_loopback=False)
    leads_to: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = [address]
    if isinstance(address, ipaddress.IPv6Address):
        leads_to += [a for a in (address.ipv4_mapped, address.sixtofour) if a is not None]
        if address in ipaddress.ip_network("64:ff9b::/96"):
            leads_to.append(ipaddress.IPv4Address(address.packed[-4:]))
    if reason is None:
        # Allowed only if every address it can reach is a public one.
        for target in leads_to[1:] or leads_to:
            assert target.is_global
            assert not target.is_private
            assert not target.is_loopback
            assert not target.is_link_local
            assert not target.is_multicast


def test_url_shape() -> None:
    parsed = parse_url("https://Hooks.Example.com.:8443/path?q=1")
    assert (parsed.scheme, parsed.host, parsed.port) == ("https", "hooks.example.com", 8443)
    assert parse_url("https://[2606:4700::1]/").host == "2606:4700::1"
    for bad in ("", "hooks.example.com/path", "https://a.example/#frag", "https://x:99999/"):
        with pytest.raises(ValueError, match=r"url"):
            parse_url(bad)


async def test_validate_destination_checks_every_resolved_address() -> None:
    with pytest.raises(ForbiddenDestination, match=r"localhost resolves to 127\.0\.0\.1"):
        await validate_destination("https://localhost/", allow_loopback=False)
    accepted = await validate_destination("https://not-yet.example.invalid/", allow_loopback=False)
    assert accepted.host == "not-yet.example.invalid"


@pytest.mark.parametrize(
    "url",
    [
        "https://10.0.0.1/hooks",
        "https://169.254.169.254/latest/meta-data/",
        "http://[::1]:9/hooks",
        "https://[::ffff:192.168.1.1]/",
    ],
)
async def test_sending_to_a_forbidden_address_never_connects(url: str) -> None:
    # 10.0.0.1 is unroutable here: were a connection tried, this would wait for the timeout.
    result = await send(Delivery(url, {"webhook-id": "evt_x"}, b"{}"), allow_loopback=False)
    assert result.status_code is None
    assert result.latency_ms is None
    assert result.error is not None
    assert result.error.startswith("refused: ")


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com/a\r\nHost: evil",
        "https://hooks.example.com/a b",
        "https://hooks.example.com/\x00",
        "https://hooks.exämple.com/",
        "https://hooks.example.com:0/",
        "https://xn--/",
        "https://xn--zz-zzzzzz.example/",
        "https://" + "a" * 1200 + ".example/",
        "https://" + "b" * 64 + ".example/",
        "https://a..example/",
    ],
)
def test_malformed_urls_are_refused(url: str) -> None:
    with pytest.raises(ValueError, match=r"^url"):
        parse_url(url)


def test_international_names_in_their_ascii_form_are_accepted() -> None:
    assert parse_url("https://xn--bcher-kva.example/h").host == "xn--bcher-kva.example"


async def test_delivery_errors_do_not_describe_the_connection() -> None:
    """A closed port and a name that does not resolve give the same text (was the
    exception's: "Connection refused", "Name or service not known" — a port probe)."""
    texts = set()
    for url in ("http://127.0.0.1:9/h", "https://does-not-exist.invalid/h"):
        result = await send(Delivery(url, {"webhook-id": "evt_x"}, b"{}"), allow_loopback=True)
        texts.add(result.error)
    assert texts == {"connection failed"}
