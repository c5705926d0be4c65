"""The compatibility tiers' own marker (``old_brokers``), registered here beside the tests
that carry it."""

from __future__ import annotations


def pytest_configure(config):
    config.addinivalue_line("markers", "old_brokers: the tier against Apache Kafka 2.8 (ZooKeeper mode) and 3.3 "
                                       "(the first production KRaft)")
