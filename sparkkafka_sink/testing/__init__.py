"""Test infrastructure shipped with the package: Apache Kafka from its Maven jars (apache_kafka.py),
embedded Kafka-protocol brokers (brokers.py), a Schema Registry (Apicurio, schema_registry.py),
TLS and SASL material for a secured node (security/) and ``wait_until`` (waiting.py).

Exports resolve on first use (PEP 562), so ``python -m sparkkafka_sink.testing.brokers`` runs
the module once, as ``__main__``, without a second copy imported by this package.
"""

_EXPORTS = ("BROKER_KINDS", "BrokerStartError", "EmbeddedBroker", "NoidaBroker", "TansuBroker",
            "create_topics", "start_broker")
_APACHE_EXPORTS = ("ApacheKafka", "KafkaNode", "KAFKA_VERSION", "KAFKA_3_VERSION", "resolve_kafka")
_REGISTRY_EXPORTS = ("SchemaRegistry", "APICURIO_VERSION", "resolve_registry")
__all__ = list(_EXPORTS + _APACHE_EXPORTS + _REGISTRY_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        from . import brokers

        return getattr(brokers, name)
    if name in _APACHE_EXPORTS:
        from . import apache_kafka

        return getattr(apache_kafka, name)
    if name in _REGISTRY_EXPORTS:
        from . import schema_registry

        return getattr(schema_registry, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
