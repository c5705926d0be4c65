"""What the sink raises: the driver refuses to start a write, or a task could not deliver.

Both sides raise them (``options`` and the driver's checks the first, the write tasks the
second), and users catch them by ``sparkkafka_sink.spark``'s names.
"""

from __future__ import annotations

from sparkkafka_sink.cloud.databricks import KEY as SERVICE_CREDENTIAL_KEY
from sparkkafka_sink.errors import ConfigError, KafkaError, named

#: every message of the sink starts with it, so a line in Spark's log says where it came from
PREFIX = "pyprod-kafka: "
#: the options that pass settings through: the producer's (``kafka.linger.ms``) and the Schema
#: Registry client's (``schema.registry.url``), each its key with the prefix
KAFKA_PREFIX = "kafka."
REGISTRY_PREFIX = "schema.registry."
#: the sink's option that sets the producer's ``SERVICE_CREDENTIAL_KEY``
SERVICE_CREDENTIAL_OPTION = "databricks.serviceCredential"


def in_option_names(error: BaseException | str, prefix: str = KAFKA_PREFIX) -> str:
    """The message of an error from below (the producer's, by default, or the registry client's
    with ``REGISTRY_PREFIX``) with every setting it names as the sink's option: the one place
    where the sink names them (``linger.ms`` -> ``kafka.linger.ms``)."""
    return named(error, lambda key: SERVICE_CREDENTIAL_OPTION if key == SERVICE_CREDENTIAL_KEY else prefix + key)


class SinkValidationError(ConfigError):
    """The write cannot start: bad schema, options or save mode."""

    def __init__(self, message: str):
        super().__init__(PREFIX + message)


class SinkWriteError(KafkaError):
    """A write task could not deliver every record; the message says which and where."""
