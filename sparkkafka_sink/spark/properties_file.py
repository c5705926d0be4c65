"""A client properties file as the sink's options (the ``propertiesFile`` option).

The file a platform hands out -- Confluent Cloud's ``client.properties``, a Java job's
``producer.properties`` -- is read whole on the driver: its Kafka lines become ``kafka.*``
options, its Schema Registry lines the registry client's (``schema.registry.url`` as it is;
``basic.auth.*`` and ``bearer.auth.*``, which Confluent's serializers read unprefixed, under
``schema.registry.``).  Options given with ``.option()`` win over the file's lines.  The values
travel to the tasks with the other options, secrets included, and are redacted as theirs are.
"""

from __future__ import annotations

from collections.abc import Mapping

from sparkkafka_sink.producer.config import read_properties
from sparkkafka_sink.spark.errors import KAFKA_PREFIX, REGISTRY_PREFIX, SinkValidationError

OPTION = "propertiesfile"
#: the registry client's lines that Confluent's serializers (and so its generated files) write
#: without the ``schema.registry.`` prefix
_UNPREFIXED_REGISTRY = ("basic.auth.credentials.source", "basic.auth.user.info")
_UNPREFIXED_REGISTRY_PREFIX = "bearer.auth."


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
        if key.startswith(REGISTRY_PREFIX):
            options[key] = value
        elif key in _UNPREFIXED_REGISTRY or key.startswith(_UNPREFIXED_REGISTRY_PREFIX):
            options[REGISTRY_PREFIX + key] = value
        else:
            options[KAFKA_PREFIX + key] = value
    return options


def with_properties_file(lowered: Mapping[str, str]) -> tuple[dict[str, str], frozenset[str]]:
    """``lowered`` (the options, keys lower-cased) over the lines of its ``propertiesFile``, and
    the keys that came from the file alone."""
    path = lowered.get(OPTION)
    if path is None or not str(path).strip():
        return dict(lowered), frozenset()
    lines = options_of(str(path).strip())
    return {**lines, **lowered}, frozenset(lines) - set(lowered)
