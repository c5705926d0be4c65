"""Test infrastructure shipped with the package: Apache Kafka from its Maven jars (apache_kafka.py),
embedded Kafka-protocol brokers (brokers.py), a Schema Registry (Apicurio, schema_registry.py),
TLS and SASL material for a secured node (security/) and ``wait_until`` (waiting.py).

Exports resolve on first use (PEP 562), so ``python -m sparkkafka_sink.testing.brokers`` runs
the module once, as ``__main__``, without a second copy imported by this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparkkafka_sink.lazy_exports import lazy_exports

if TYPE_CHECKING:  # what __getattr__ loads on first use, for type checkers and IDEs
    from sparkkafka_sink.testing.apache_kafka import (
        KAFKA_3_VERSION,
        KAFKA_VERSION,
        ApacheKafka,
        KafkaNode,
        resolve_kafka,
    )
    from sparkkafka_sink.testing.brokers import (
        BROKER_KINDS,
        BrokerStartError,
        EmbeddedBroker,
        NoidaBroker,
        TansuBroker,
        create_topics,
        start_broker,
    )
    from sparkkafka_sink.testing.schema_registry import APICURIO_VERSION, SchemaRegistry, resolve_registry
    from sparkkafka_sink.testing.waiting import wait_until

__all__ = [
    "APICURIO_VERSION",
    "ApacheKafka",
    "BROKER_KINDS",
    "BrokerStartError",
    "EmbeddedBroker",
    "KAFKA_3_VERSION",
    "KAFKA_VERSION",
    "KafkaNode",
    "NoidaBroker",
    "SchemaRegistry",
    "TansuBroker",
    "create_topics",
    "resolve_kafka",
    "resolve_registry",
    "start_broker",
    "wait_until",
]

_LAZY = {
    **dict.fromkeys(("BROKER_KINDS", "BrokerStartError", "EmbeddedBroker", "NoidaBroker", "TansuBroker",
                     "create_topics", "start_broker"), "sparkkafka_sink.testing.brokers"),
    **dict.fromkeys(("ApacheKafka", "KafkaNode", "KAFKA_VERSION", "KAFKA_3_VERSION", "resolve_kafka"),
                    "sparkkafka_sink.testing.apache_kafka"),
    **dict.fromkeys(("SchemaRegistry", "APICURIO_VERSION", "resolve_registry"),
                    "sparkkafka_sink.testing.schema_registry"),
    "wait_until": "sparkkafka_sink.testing.waiting",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
