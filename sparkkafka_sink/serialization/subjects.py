"""Confluent's subject name strategies: under which registry subject a topic's key or value
schema lives.

* ``TopicNameStrategy`` (the default): ``<topic>-key`` / ``<topic>-value`` -- one schema per
  topic and side, evolving under its compatibility level;
* ``RecordNameStrategy``: the record's full name (``namespace.Name``) -- one record type shared
  by many topics, evolving once for all;
* ``TopicRecordNameStrategy``: ``<topic>-<namespace.Name>`` -- several record types in one topic.

Settings copied from a Java or Python Confluent configuration keep working: the short names,
the Java class names (``io.confluent.kafka.serializers.subject.TopicNameStrategy``) and
confluent-kafka-python's function names (``topic_subject_name_strategy``) are all accepted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sparkkafka_sink.errors import ConfigError

__all__ = ["SubjectNameStrategy", "StrategyName", "STRATEGY_NAMES", "DEFAULT_STRATEGY",
           "subject_name_strategy", "strategy_named", "JAVA_PACKAGE"]

StrategyName = Literal["TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy"]
STRATEGY_NAMES: tuple[StrategyName, ...] = ("TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy")
DEFAULT_STRATEGY: StrategyName = "TopicNameStrategy"
#: where Confluent's Java serializers keep the strategies
JAVA_PACKAGE = "io.confluent.kafka.serializers.subject."
#: confluent-kafka-python's names for them
_PYTHON_NAMES: dict[str, StrategyName] = {
    "topic_subject_name_strategy": "TopicNameStrategy",
    "record_subject_name_strategy": "RecordNameStrategy",
    "topic_record_subject_name_strategy": "TopicRecordNameStrategy",
}


@dataclass(frozen=True)
class SubjectNameStrategy:
    """One strategy; ``subject(topic, is_key, record_name)`` names the subject."""

    name: StrategyName = DEFAULT_STRATEGY

    @property
    def uses_topic(self) -> bool:
        """Whether the subject depends on the topic (a write to many topics has many subjects)."""
        return self.name != "RecordNameStrategy"

    @property
    def needs_record_name(self) -> bool:
        """Whether the subject depends on the schema's record name (not only on the topic)."""
        return self.name != "TopicNameStrategy"

    def subject(self, topic: str, is_key: bool, record_name: str | None = None) -> str:
        """The subject of ``topic``'s key (``is_key``) or value schema.  ``record_name`` is the
        schema's full name (an Avro record's ``namespace.name``, a JSON schema's ``title``),
        needed by the record strategies."""
        if self.name == "TopicNameStrategy":
            return f"{topic}-{'key' if is_key else 'value'}"
        if not record_name:
            side = "key" if is_key else "value"
            raise ConfigError(f"{self.name} names the subject after the {side} schema's record name, and the "
                              f"{side} schema of topic {topic!r} has none (an Avro record's namespace.name; a "
                              "JSON schema's title): name the record, or use TopicNameStrategy")
        if self.name == "RecordNameStrategy":
            return record_name
        return f"{topic}-{record_name}"


def strategy_named(text: str) -> StrategyName | None:
    """The strategy ``text`` names: its own name, Confluent's Java class name or confluent-kafka's
    function name, in any case; None for none."""
    short = text[len(JAVA_PACKAGE):] if text.startswith(JAVA_PACKAGE) else text
    for known in STRATEGY_NAMES:
        if short.lower() == known.lower():
            return known
    return _PYTHON_NAMES.get(text.lower())


def subject_name_strategy(name: str | None, option: str = "subject.name.strategy") -> SubjectNameStrategy:
    """The strategy ``name`` stands for (None or empty: the default, TopicNameStrategy);
    ``option`` is the serializer option's name, for the error (not a registry client setting:
    the sink's option has this very name, ``value.subject.name.strategy``, so it stays text)."""
    text = (name or "").strip()
    if not text:
        return SubjectNameStrategy(DEFAULT_STRATEGY)
    known = strategy_named(text)
    if known is not None:
        return SubjectNameStrategy(known)
    raise ConfigError(f"Invalid value {text!r} for {option}: expected one of {', '.join(STRATEGY_NAMES)} "
                      f"(or Confluent's class names, e.g. {JAVA_PACKAGE}{DEFAULT_STRATEGY})")
