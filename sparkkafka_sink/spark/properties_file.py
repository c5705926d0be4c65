"""A client properties file as the sink's options (the ``propertiesFile`` option).

The file a platform hands out -- Confluent Cloud's ``client.properties``, a Java job's
``producer.properties`` -- is read whole on the driver: its Kafka lines become ``kafka.*``
options, its Schema Registry lines the registry client's (``schema.registry.url`` as it is;
``basic.auth.*`` and ``bearer.auth.*``, which Confluent's serializers read unprefixed, under
``schema.registry.``), its serializer settings (``auto.register.schemas``,
``value.subject.name.strategy``...) the sink's options of those names.  A Java job's
``key.serializer``/``value.serializer`` lines: Kafka's byte and string serializers write what
the sink writes of a binary or string column, so they are dropped with a note; Confluent's Avro,
JSON Schema and Protobuf serializers are refused naming the ``keyFormat``/``valueFormat`` that
does their work; any other is refused.  Options given with ``.option()`` win over the file's
lines.  The values travel to the tasks with the other options, secrets included, and are
redacted as theirs are.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from sparkkafka_sink.producer.config import read_properties
from sparkkafka_sink.spark.option_catalog import SERIALIZATION_OPTIONS
from sparkkafka_sink.spark.sink_errors import KAFKA_PREFIX, REGISTRY_PREFIX, SinkValidationError

log = logging.getLogger(__name__)

OPTION = "propertiesfile"
#: the registry client's lines that Confluent's serializers (and so its generated files) write
#: without the ``schema.registry.`` prefix
_UNPREFIXED_REGISTRY = ("basic.auth.credentials.source", "basic.auth.user.info")
_UNPREFIXED_REGISTRY_PREFIX = "bearer.auth."
#: Confluent's serializer settings, which the sink's serialization options keep the names of
_SERIALIZER_SETTINGS = frozenset(o.key for o in SERIALIZATION_OPTIONS if "." in o.name)
#: Kafka's serializers whose bytes are what the sink writes of a binary or string column
_PLAIN_SERIALIZERS = frozenset(f"org.apache.kafka.common.serialization.{name}" for name in
                               ("ByteArraySerializer", "BytesSerializer", "ByteBufferSerializer", "StringSerializer"))
#: Confluent's serializers, and the format that does their work here
_CONFLUENT_SERIALIZERS = {"io.confluent.kafka.serializers.KafkaAvroSerializer": "avro",
                          "io.confluent.kafka.serializers.json.KafkaJsonSchemaSerializer": "json",
                          "io.confluent.kafka.serializers.protobuf.KafkaProtobufSerializer": "protobuf"}


def options_of(path: str) -> dict[str, str]:
    """The file's lines as sink options (lower-cased keys, as the sink reads options)."""
    try:
        lines = read_properties(path)
    except OSError as e:
        raise SinkValidationError(f"option 'propertiesFile': cannot read {path!r} on the driver "
                                  f"({type(e).__name__}: {e.strerror or e})") from None
    except ValueError as e:
        raise SinkValidationError(f"option 'propertiesFile': {e}") from None
    options: dict[str, str] = {}
    for key, value in lines.items():
        key = key.lower()
        if key in ("key.serializer", "value.serializer"):
            _serializer(path, key, value)
        elif key in _SERIALIZER_SETTINGS:
            options[key] = value
        elif key.startswith(REGISTRY_PREFIX):
            options[key] = value
        elif key in _UNPREFIXED_REGISTRY or key.startswith(_UNPREFIXED_REGISTRY_PREFIX):
            options[REGISTRY_PREFIX + key] = value
        else:
            options[KAFKA_PREFIX + key] = value
    return options


def _serializer(path: str, key: str, value: str) -> None:
    """A Java job's serializer line: dropped (with a note) where the sink writes the same bytes,
    else refused naming what the sink does instead."""
    column = key.split(".", 1)[0]
    if value in _PLAIN_SERIALIZERS:
        log.warning("option 'propertiesFile' (%s): line %s=%s is not used: the sink writes the %s column's bytes "
                    "(a string as UTF-8), as that serializer does", path, key, value, column)
        return
    line = f"option 'propertiesFile' ({path}): line {key}={value}"
    if value in _CONFLUENT_SERIALIZERS:
        raise SinkValidationError(f"{line}: the sink serializes the {column} column itself: drop the line and "
                                  f"set .option(\"{column}Format\", \"{_CONFLUENT_SERIALIZERS[value]}\") (the "
                                  "file's schema.registry.* and serializer settings apply to it)")
    raise SinkValidationError(f"{line}: the sink writes the {column} column's bytes (a string as UTF-8), or "
                              f"serializes it in a registry format ({column}Format avro, json or protobuf); it "
                              "runs no Java serializer: drop the line and cast the column to what it should hold")


def with_properties_file(lowered: Mapping[str, str]) -> tuple[dict[str, str], frozenset[str]]:
    """``lowered`` (the options, keys lower-cased) over the lines of its ``propertiesFile``, and
    the keys that came from the file alone."""
    path = lowered.get(OPTION)
    if path is None or not str(path).strip():
        return dict(lowered), frozenset()
    lines = options_of(str(path).strip())
    return {**lines, **lowered}, frozenset(lines) - set(lowered)
