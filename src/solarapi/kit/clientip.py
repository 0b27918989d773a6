"""The client's address behind our own trusted proxies: one answer for the gateway's rate
limits and logs and the dashboard's login throttle."""

from __future__ import annotations

import ipaddress

from starlette.datastructures import Headers
from starlette.types import Scope

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def client_ip(scope: Scope, trusted: list[Network]) -> str:
    client = scope.get("client")
    peer = client[0] if client else "unknown"
    if not trusted:
        return str(peer)
    chain = [peer]
    forwarded = Headers(scope=scope).get("x-forwarded-for")
    if forwarded:
        chain = [part.strip() for part in forwarded.split(",") if part.strip()] + [peer]
    # Walk from the nearest hop outwards, skipping our own trusted proxies: the first
    # untrusted address is the client (anything further out is client-controlled).
    for hop in reversed(chain):
        try:
            address = ipaddress.ip_address(hop)
        except ValueError:
            return str(hop)
        if not any(address in net for net in trusted):
            return str(hop)
    return str(chain[0])
