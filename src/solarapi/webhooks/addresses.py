"""Where webhooks may go: URL rules and the address check against server-side request forgery.

A webhook makes our server send requests to a URL a customer chose, from inside our network.
So a URL whose host is, or resolves to, a private, loopback, link-local, shared or cloud
metadata address is refused — when the endpoint is saved (a clear 400 for the customer) and
again at every connection (`GuardedBackend` in `delivery.py`), because a name can resolve to a
public address today and to 169.254.169.254 tomorrow (DNS rebinding).

Loopback is allowed only when the operator sets `SOLARAPI_WEBHOOKS_ALLOW_LOOPBACK=true` (local
development, tests); it never opens private networks.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from solarapi.kit.text import excerpt

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

MAX_URL_LENGTH = 2048
DNS_TIMEOUT_SECONDS = 5.0

# Instance metadata services: named in the error because they are the classic SSRF prize.
_METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    {
        ipaddress.ip_address("169.254.169.254"),  # AWS, GCP, Azure, OpenStack, ...
        ipaddress.ip_address("169.254.170.2"),  # AWS ECS task metadata
        ipaddress.ip_address("100.100.100.200"),  # Alibaba Cloud
        ipaddress.ip_address("fd00:ec2::254"),  # AWS over IPv6
    }
)
_METADATA_HOSTNAMES = frozenset({"metadata.google.internal", "metadata", "instance-data"})


class ForbiddenDestination(Exception):
    """The URL or the address it resolves to may not receive webhooks."""


@dataclass(frozen=True, slots=True)
class WebhookUrl:
    url: str
    scheme: str
    host: str
    port: int


# NAT64 (RFC 6052): 64:ff9b::10.0.0.1 is translated to 10.0.0.1 by a NAT64 gateway.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
# IPv4-compatible IPv6 (deprecated, RFC 4291): [::127.0.0.1] still reaches 127.0.0.1 on some
# stacks. (`::` and `::1` are in it too, and judged as themselves first.)
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
# Special-purpose ranges Python 3.11 calls global: the local-use NAT64 prefix (RFC 8215),
# whose gateways lead into the operator's own IPv4 networks, and all of 192.0.0.0/24 (IETF
# protocol assignments, 192.0.0.8 the "dummy" address).
_NOT_PUBLIC = (ipaddress.ip_network("64:ff9b:1::/48"), ipaddress.ip_network("192.0.0.0/24"))
MAX_HOST_LENGTH = 253
MAX_LABEL_LENGTH = 63


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address leads to: IPv4-mapped (::ffff:a.b.c.d), 6to4
    (2002:…) or NAT64 (64:ff9b::a.b.c.d)."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64 or (address in _IPV4_COMPATIBLE and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def forbidden_reason(address: IPAddress, *, allow_loopback: bool) -> str | None:
    """Why our server must not connect to `address`, or None when it may."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            # ::ffff:127.0.0.1 reaches 127.0.0.1: judge where it leads.
            address = embedded
    if address in _METADATA_ADDRESSES:
        return "a cloud metadata address"
    if address.is_loopback:
        return None if allow_loopback else "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_unspecified:
        return "an unspecified address"
    if address.is_multicast:
        return "a multicast address"
    if address.is_private:
        return "a private address"
    if address.is_reserved or any(address in network for network in _NOT_PUBLIC):
        return "a special-purpose (non-public) address"
    if not address.is_global:
        # Shared (100.64/10), reserved, documentation and other special-purpose ranges.
        return "a special-purpose (non-public) address"
    return None


def parse_url(raw: str) -> WebhookUrl:
    """Check the shape of a webhook URL; raises ValueError with a client-facing message."""
    url = raw.strip()
    if not url:
        raise ValueError("url is required")
    if len(url) > MAX_URL_LENGTH:
        raise ValueError(f"url must be at most {MAX_URL_LENGTH} characters")
    if any(not ("!" <= char <= "~") for char in url):
        # Spaces, CR/LF (header injection into a request line), control characters and
        # non-ASCII text: a URL on the wire is printable ASCII.
        raise ValueError(
            "url must be printable ASCII without spaces or line breaks (percent-encode a "
            "path, write an international host name in its xn-- form)"
        )
    try:
        parts: SplitResult = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ValueError(
            f"url is not a valid URL: '{excerpt(url)}' (the port must be a number 1–65535)"
        ) from None
    if port == 0:
        raise ValueError("url: the port must be 1–65535")
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http"):
        raise ValueError(f"url must start with https://; got '{excerpt(url)}'")
    host = (parts.hostname or "").rstrip(".").lower()
    if not host:
        raise ValueError(f"url has no host: '{excerpt(url)}'")
    if parts.username is not None or parts.password is not None:
        raise ValueError("url must not contain a user name or password")
    if parts.fragment:
        raise ValueError("url must not contain a fragment (#…)")
    if literal_address(host) is None:
        _check_host_name(host)
    return WebhookUrl(url=url, scheme=scheme, host=host, port=port or _default_port(scheme))


def _check_host_name(host: str) -> None:
    """A DNS name: at most 253 characters, labels of 1–63 letters, digits and hyphens, and
    `xn--` labels that are valid punycode."""
    if len(host) > MAX_HOST_LENGTH:
        raise ValueError(f"url: the host name must be at most {MAX_HOST_LENGTH} characters")
    for label in host.split("."):
        if not 1 <= len(label) <= MAX_LABEL_LENGTH or not all(
            char.isalnum() or char in "-_" for char in label
        ):
            raise ValueError(
                f"url: '{excerpt(label)}' is not a host name label (1–{MAX_LABEL_LENGTH} "
                "letters, digits or hyphens)"
            )
        if label.startswith("xn--"):
            try:
                decoded = label.encode("ascii").decode("idna")
            except UnicodeError:
                decoded = ""
            if not decoded or decoded.startswith("xn--"):
                raise ValueError(f"url: '{excerpt(label)}' is not a valid international name")


def _default_port(scheme: str) -> int:
    return 443 if scheme == "https" else 80


def literal_address(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


async def resolve(host: str, port: int) -> list[IPAddress] | None:
    """The addresses `host` resolves to, or None when it does not resolve (yet)."""
    literal = literal_address(host)
    if literal is not None:
        return [literal]
    loop = asyncio.get_running_loop()
    try:
        infos = await asyncio.wait_for(
            loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), DNS_TIMEOUT_SECONDS
        )
    except (socket.gaierror, UnicodeError, TimeoutError):
        return None
    addresses: list[IPAddress] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        # IPv6 link-local results carry a zone ("fe80::1%eth0"), which ip_address refuses.
        try:
            address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        except ValueError:
            continue
        if address not in addresses:
            addresses.append(address)
    return addresses or None


def check_addresses(host: str, addresses: list[IPAddress], *, allow_loopback: bool) -> None:
    """Raise ForbiddenDestination when any address of `host` is refused: a name with one good
    and one bad address could be steered to the bad one."""
    for address in addresses:
        reason = forbidden_reason(address, allow_loopback=allow_loopback)
        if reason is not None:
            shown = (
                excerpt(host)
                if literal_address(host) is not None
                else f"{excerpt(host)} resolves to {address}"
            )
            raise ForbiddenDestination(
                f"{shown}, {reason}; webhooks can only be sent to public internet addresses"
            )


async def validate_destination(raw: str, *, allow_loopback: bool) -> WebhookUrl:
    """Check a URL a customer wants to save. Raises ValueError (shape) or ForbiddenDestination.

    A host that does not resolve yet is accepted (the receiver may be set up after the
    endpoint); every delivery resolves and checks again."""
    parsed = parse_url(raw)
    if parsed.host in _METADATA_HOSTNAMES:
        raise ForbiddenDestination(f"{excerpt(parsed.host)} is a cloud metadata host name")
    addresses = await resolve(parsed.host, parsed.port)
    if addresses is not None:
        check_addresses(parsed.host, addresses, allow_loopback=allow_loopback)
    if parsed.scheme == "http":
        loopback_only = addresses is not None and all(
            _unmapped(address).is_loopback for address in addresses
        )
        if not (allow_loopback and loopback_only):
            hint = " (plain http is accepted only for loopback receivers)" if allow_loopback else ""
            raise ValueError(f"url must use https; got '{excerpt(parsed.url)}'{hint}")
    return parsed


def _unmapped(address: IPAddress) -> IPAddress:
    if isinstance(address, ipaddress.IPv6Address):
        return _embedded_ipv4(address) or address
    return address
