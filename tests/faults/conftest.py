"""Fixtures for fault tests: embedded brokers reachable only through a FaultProxy."""

from __future__ import annotations

from typing import Callable, List

import pytest

from .harness import ProxiedBroker, start_proxied_broker


@pytest.fixture
def proxied_broker() -> Callable[..., ProxiedBroker]:
    """Factory ``proxied_broker(kind="tansu", **broker_kwargs) -> ProxiedBroker``; the proxy and
    the broker are closed at the end of the test."""
    started: List[ProxiedBroker] = []

    def factory(kind: str = "tansu", **kwargs) -> ProxiedBroker:
        pb = start_proxied_broker(kind, **kwargs)
        started.append(pb)
        return pb

    yield factory
    for pb in reversed(started):
        pb.stop()
