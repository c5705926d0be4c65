"""Test infrastructure shipped with the package: embedded Kafka-protocol brokers (see brokers.py)."""

from .brokers import (BROKER_KINDS, BrokerStartError, EmbeddedBroker, NoidaBroker, TansuBroker,
                      create_topics, start_broker)

__all__ = ["BROKER_KINDS", "BrokerStartError", "EmbeddedBroker", "NoidaBroker", "TansuBroker",
           "create_topics", "start_broker"]
