"""Which Apache Kafka release a broker's ApiVersions answer looks like, for messages refusing a
feature the broker cannot serve ("answers as Apache Kafka 2.8 does; exactly-once needs 3.0").

Brokers do not say their version; what each release answers first is known.  Only the releases
the package needs to tell apart are named: the lines before 3.0 lack the transaction APIs of
KIP-664, and 4.0 is where transactions v2 begin.
"""

from __future__ import annotations

from collections.abc import Mapping

from sparkkafka_sink.protocol.api import ApiKey

__all__ = ["API_SINCE", "kafka_release"]

#: the first Apache Kafka release answering each API (only those a refusal may name)
API_SINCE: dict[int, str] = {
    ApiKey.DESCRIBE_PRODUCERS: "2.8",     # KIP-664's first API
    ApiKey.DESCRIBE_TRANSACTIONS: "3.0",  # KIP-664
    ApiKey.LIST_TRANSACTIONS: "3.0",      # KIP-664
}

#: newest first: (what a broker is called, the API and version its release answers first)
_RELEASES: tuple[tuple[str, int, int], ...] = (
    ("Apache Kafka 4.0 or newer", ApiKey.PRODUCE, 12),  # KIP-890: Produce v12
    ("Apache Kafka 3.x", ApiKey.LIST_TRANSACTIONS, 0),
    ("Apache Kafka 2.8", ApiKey.DESCRIBE_PRODUCERS, 0),
)
_OLDEST = "Apache Kafka 2.7 or older"


def kafka_release(api_versions: Mapping[int, tuple[int, int]]) -> str:
    """"Apache Kafka 2.8" style: the newest named release whose first API the broker answers
    (``api_versions``: ``{api key: (min, max)}`` of its ApiVersions answer)."""
    for label, api_key, version in _RELEASES:
        rng = api_versions.get(api_key)
        if rng is not None and rng[1] >= version:
            return label
    return _OLDEST
