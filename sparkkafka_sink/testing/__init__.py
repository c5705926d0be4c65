"""Test infrastructure shipped with the package: embedded Kafka-protocol brokers (see brokers.py).

Exports resolve on first use (PEP 562), so ``python -m sparkkafka_sink.testing.brokers`` runs
the module once, as ``__main__``, without a second copy imported by this package.
"""

_EXPORTS = ("BROKER_KINDS", "BrokerStartError", "EmbeddedBroker", "NoidaBroker", "TansuBroker",
            "create_topics", "start_broker")
__all__ = list(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        from . import brokers

        return getattr(brokers, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
