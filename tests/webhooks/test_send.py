"""One attempt against a real receiver: the 10 s timeout, redirects not followed, any 2xx."""

from __future__ import annotations

import pytest

from solarapi.webhooks.delivery import TIMEOUT_SECONDS, Delivery, send
from tests.webhooks.receiver import running_receiver


def delivery(url: str) -> Delivery:
    return Delivery(url, {"webhook-id": "evt_TEST", "content-type": "application/json"}, b"{}")


@pytest.mark.slow
async def test_a_receiver_slower_than_10_s_times_out() -> None:
    with running_receiver() as receiver:
        receiver.answering.clear()
        result = await send(delivery(receiver.url), allow_loopback=True)
    assert result.status_code is None
    assert result.error == "no response within 10 s"
    assert TIMEOUT_SECONDS == 10  # the contract's figure
    assert result.latency_ms is not None
    assert result.latency_ms >= 9_500  # no upper bound: a busy machine notices late
    assert not result.succeeded


@pytest.mark.parametrize(
    ("status", "succeeded", "gone"),
    [(200, True, False), (204, True, False), (299, True, False), (307, False, False),
     (301, False, False), (404, False, False), (410, False, True), (500, False, False)],
)  # fmt: skip
async def test_status_classification(status: int, succeeded: bool, gone: bool) -> None:
    with running_receiver(script=[status]) as receiver:
        result = await send(delivery(receiver.url), allow_loopback=True)
    assert len(receiver.received) == 1  # a 3xx is not followed anywhere
    assert result.status_code == status
    assert result.succeeded is succeeded
    assert result.gone is gone
    assert result.error is None
