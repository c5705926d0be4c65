"""Fixtures for fault tests: brokers reachable only through a FaultProxy."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from .harness import ProxiedBroker, proxy_existing_broker, start_proxied_broker


@pytest.fixture
def proxied_broker(request) -> Callable[..., ProxiedBroker]:
    """Factory ``proxied_broker(kind="tansu", **broker_kwargs) -> ProxiedBroker``.

    tansu and noida: a new broker per call.  apache: the session's Apache Kafka node behind a
    new proxy (starting a JVM per test would cost seconds each); whatever the test does to it
    (pause, kill) is undone afterwards.  Proxies and own brokers are closed at the end.
    """
    started: list[ProxiedBroker] = []
    shared = []

    def factory(kind: str = "tansu", **kwargs) -> ProxiedBroker:
        if kind == "apache":
            if kwargs:
                raise ValueError(f"the shared Apache Kafka node takes no broker options: {kwargs}")
            cluster = request.getfixturevalue("apache_kafka")
            shared.append(cluster)
            pb = proxy_existing_broker(cluster.nodes[0])
        else:
            pb = start_proxied_broker(kind, **kwargs)
        started.append(pb)
        return pb

    yield factory
    for pb in reversed(started):
        pb.stop()
    if shared:
        shared[0].ensure_all_up()
