"""``network.broker_release``: which Apache Kafka release an ApiVersions answer looks like (the
real answers of 2.8.2 and 3.3.2 are asked in tests/compat/test_old_brokers.py)."""

from __future__ import annotations

import pytest

from sparkkafka_sink.network.broker_release import kafka_release
from sparkkafka_sink.protocol.api import ApiKey

#: what every release here answers (Produce, Metadata, ApiVersions)
BASE = {ApiKey.PRODUCE: (0, 9), ApiKey.METADATA: (0, 11), ApiKey.API_VERSIONS: (0, 3)}


@pytest.mark.parametrize("answer,release", [
    ({}, "Apache Kafka 2.7 or older"),
    (BASE, "Apache Kafka 2.7 or older"),
    ({**BASE, ApiKey.DESCRIBE_PRODUCERS: (0, 0)}, "Apache Kafka 2.8"),
    ({**BASE, ApiKey.DESCRIBE_PRODUCERS: (0, 0), ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
      ApiKey.LIST_TRANSACTIONS: (0, 0)}, "Apache Kafka 3.x"),
    ({**BASE, ApiKey.PRODUCE: (3, 11), ApiKey.DESCRIBE_PRODUCERS: (0, 0), ApiKey.LIST_TRANSACTIONS: (0, 1)},
     "Apache Kafka 3.x"),
    ({**BASE, ApiKey.PRODUCE: (3, 12), ApiKey.DESCRIBE_PRODUCERS: (0, 0), ApiKey.LIST_TRANSACTIONS: (0, 2)},
     "Apache Kafka 4.0 or newer"),
])
def test_the_newest_release_whose_first_api_the_broker_answers(answer, release):
    assert kafka_release(answer) == release

