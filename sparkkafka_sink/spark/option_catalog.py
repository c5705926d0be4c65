"""Every option of the sink, declared once: its name as users write it, what it accepts, its
default and what it means.

Each declaration parses its own value (:meth:`SinkOption.parse`: kind, bounds, choices, default
and the error message) and names the field of the plan it fills; the parser (``options.py``,
``formats.py``) keeps only the rules that span several options, and knows an option by being
here (anything else that is not ``kafka.*`` or ``schema.registry.*`` is a typo, answered with
"Did you mean ...?").  The documentation's configuration reference is
generated from here too (``docs/hooks/config_reference.py``), together with the producer's own
keys (``producer.config``) and the Schema Registry client's (``serialization.registry_settings``),
which :func:`producer_options` and :func:`registry_options` present in the same shape.

A new sink option is one :class:`SinkOption` in ``SINK_OPTIONS`` or ``SERIALIZATION_OPTIONS``
(with the field it fills) and its use.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from sparkkafka_sink.exactly_once.ids import DEFAULT_DECISION_TOPIC
from sparkkafka_sink.exactly_once.leases import BEAT_S as LEASE_BEAT_S
from sparkkafka_sink.exactly_once.leases import WINDOW_S as LEASE_WINDOW_S
from sparkkafka_sink.serialization.subjects import DEFAULT_STRATEGY, STRATEGY_NAMES, strategy_named
from sparkkafka_sink.spark.errors import SinkValidationError

__all__ = ["SinkOption", "OptionDoc", "SINK_OPTIONS", "SERIALIZATION_OPTIONS", "OPTIONS", "option", "parse_all",
           "fields",
           "REJECTED_KAFKA_KEYS", "SINK_BATCH_SIZE", "SINK_LINGER_MS", "EXACTLY_ONCE_TIMEOUT_MS",
           "producer_options", "registry_options"]

Kind = Literal["string", "boolean", "integer", "number", "choice"]


@dataclass(frozen=True)
class SinkOption:
    """One ``.option(name, value)`` of the sink (not ``kafka.*`` nor ``schema.registry.*``)."""

    #: as users write it; Spark hands options over lower-cased, so ``key`` is what the parser sees
    name: str
    kind: Kind
    #: the value when the option is not given; None: unset, and ``unset`` says what that means
    default: Any
    #: what it does, in a sentence or two (Markdown)
    doc: str
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    #: a number strictly above this (and finite)
    above: float | None = None
    #: what the number counts: "ms", "bytes", "per second"...
    unit: str = ""
    #: what happens when the option is not given, where there is no default value
    unset: str = ""
    #: the field of the plan it fills (``SinkOptions``, ``ColumnFormat``, ``Formats``); "": a
    #: rule spanning several options reads it
    field: str = ""
    #: what a value means, in the error message (e.g. what 0 does)
    hint: str = ""
    #: a string's longest length
    max_length: int | None = None
    #: a choice's other spellings: the choice a text stands for (None: none)
    spelling: Callable[[str], str | None] | None = None

    @property
    def key(self) -> str:
        return self.name.lower()

    def parse(self, raw: Any) -> Any:
        """The option's value from the text given (None: not given, the default), or
        ``SinkValidationError`` naming the option, what it accepts and what it got."""
        if raw is None:
            return self.default
        text = str(raw).strip()
        if self.kind == "string":
            if not text:
                raise SinkValidationError(f"option '{self.name}' is empty; give {self.hint or 'a value'} "
                                          "or drop the option")
            if self.max_length is not None and len(text) > self.max_length:
                raise SinkValidationError(f"option '{self.name}' must be 1-{self.max_length} characters, "
                                          f"got {len(text)}")
            return text
        value = self._value(text)
        if value is None:
            hint = f" ({self.hint})" if self.hint else ""
            raise SinkValidationError(f"option '{self.name}' must be {self._accepted()}{hint}, got {raw!r}")
        return value

    def _value(self, text: str) -> Any:
        """The value ``text`` stands for, None when it stands for none this option accepts."""
        if self.kind == "boolean":
            return {"true": True, "false": False}.get(text.lower())
        if self.kind == "choice":
            found = next((c for c in self.choices if c.lower() == text.lower()), None)
            return found if found is not None or self.spelling is None else self.spelling(text)
        try:
            number = int(text) if self.kind == "integer" else float(text)
        except ValueError:
            return None
        low_ok = self.minimum is None or number >= self.minimum
        high_ok = self.maximum is None or number <= self.maximum
        above_ok = self.above is None or (number > self.above and math.isfinite(number))
        return number if low_ok and high_ok and above_ok else None

    def _accepted(self) -> str:
        """What the option accepts, in an error message."""
        if self.kind == "boolean":
            return "true or false"
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        unit = _UNIT_WORDS.get(self.unit, self.unit)
        if self.kind == "number":
            what = ("a number" if self.above is None else "a positive number" if self.above == 0
                    else f"a number above {_num(self.above)}")
            return f"{what} ({unit})" if unit else what
        what = f"a whole number of {unit}" if unit else "a whole number"
        if self.minimum is not None and self.maximum is not None:
            return f"{what} from {_num(self.minimum)} to {_num(self.maximum)}"
        return f"{what}, at least {_num(self.minimum)}" if self.minimum is not None else what

    @property
    def type(self) -> str:
        """What the option accepts, for people."""
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        if self.kind in ("integer", "number"):
            word = self.kind
            unit = f" ({self.unit})" if self.unit else ""
            if self.minimum is not None and self.maximum is not None:
                return f"{word}{unit}, {_num(self.minimum)} to {_num(self.maximum)}"
            if self.minimum is not None:
                return f"{word}{unit}, at least {_num(self.minimum)}"
            if self.above is not None:
                return f"{word}{unit}, above {_num(self.above)}"
            return f"{word}{unit}"
        return self.kind

    @property
    def default_text(self) -> str:
        """The default as users would write it, or what an unset option means."""
        if self.default is None:
            return self.unset
        if isinstance(self.default, bool):
            return str(self.default).lower()
        return str(self.default)

    def doc_entry(self) -> OptionDoc:
        return OptionDoc(self.name, self.type, self.default_text, self.doc)


@dataclass(frozen=True)
class OptionDoc:
    """An option as the reference shows it: every field is text for people."""

    name: str
    type: str
    default: str
    doc: str


_UNIT_WORDS = {"ms": "milliseconds"}


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


#: ``coalesceBytes``: a task gathers Spark's Arrow batches (10,000 rows each by default) until
#: they hold this many bytes and hands them to the producer in one bulk call.  Every call has a
#: fixed cost (partitioning, grouping, one encoding pass, a batch tail per partition), so bigger
#: calls cost less per row, and a call's rows per partition are what an open batch gets before
#: ``linger.ms`` sends it: at 64 partitions a 4 MiB call gives each ~600 110-byte rows, 16 MiB a
#: full 256 KiB batch (benchmarks/README, "coalesceBytes").
DEFAULT_COALESCE_BYTES = 16 << 20
DEFAULT_CLUSTER_CHECK_TIMEOUT_MS = 10_000
DEFAULT_CACHE_TIMEOUT_MS = 600_000  # Spark's spark.kafka.producer.cache.timeout
GUARANTEES = ("at-least-once", "exactly-once")
TOLERANCES = ("none", "all")
COLUMN_FORMATS = ("binary", "avro", "json", "protobuf")

#: The sink's producer defaults of its own (an explicit ``kafka.*`` option wins).  batch.size:
#: the sink hands the producer whole Arrow batches, and a Produce request carries one batch per
#: partition, so the Java default of 16 KiB would cap each round trip at 16 KiB per partition
#: (never above buffer.memory).
SINK_BATCH_SIZE = 262_144
#: linger.ms: a bulk call leaves each partition a last, partial batch, and the task's next Arrow
#: batch comes tens of ms later; 5 ms sent those partials alone (at 64 partitions and 1 KiB rows
#: ~25 % more batches than Spark's JVM sink, and the broker's CPU with them).  It costs a task
#: no time: its flush at the end sends what lingers (benchmarks/README, "linger.ms").  Less
#: where an explicit delivery.timeout.ms leaves less room beside request.timeout.ms.
SINK_LINGER_MS = 100
#: exactly-once: a task's transaction stays open until the driver commits the whole job, so the
#: default transaction.timeout.ms is Kafka's default cap (transaction.max.timeout.ms, 15 minutes)
EXACTLY_ONCE_TIMEOUT_MS = 900_000

#: producer keys the sink owns or cannot honour; the message says why
REJECTED_KAFKA_KEYS = {
    "key.serializer": "keys are written as the bytes of the 'key' column (strings as UTF-8)",
    "value.serializer": "values are written as the bytes of the 'value' column (strings as UTF-8)",
    "transactional.id": (
        "each write task runs its own producer, so one transactional id would fence the "
        "other tasks; use .option(\"deliveryGuarantee\", \"exactly-once\") (and optionally "
        "transactionalIdPrefix): every task then gets its own transactional id"
    ),
}

SINK_OPTIONS: tuple[SinkOption, ...] = (
    SinkOption("topic", "string", None,
               "The topic every row is written to. When set, it wins over a `topic` column.",
               unset="each row's `topic` column (then required)", field="topic", hint="a topic name"),
    SinkOption("propertiesFile", "string", None,
               "A client properties file read whole on the driver (Confluent Cloud's `client.properties`, a Java "
               "job's `producer.properties`): its Kafka lines are taken as `kafka.*` options, its Schema Registry "
               "lines (`schema.registry.url`, `basic.auth.*`, `bearer.auth.*`) as `schema.registry.*` ones (unused "
               "when no column is written in a registry format). Options given with `.option()` win over its "
               "lines; its secrets travel and are redacted as the options' are.",
               unset="none: the options alone", hint="a path on the driver"),
    SinkOption("checkpointLocation", "string", None,
               "Spark's own streaming option: where the query keeps its progress, any path Spark accepts "
               "(local, `file:`, `dbfs:/`, `s3a://`, `abfss://`, `gs://`, `hdfs://`). Under exactly-once it names "
               "the query (the default `transactionalIdPrefix` is made from it); the sink writes nothing under "
               "it. In `foreachBatch` give the query's own.",
               unset="none (Spark asks for one to start a streaming query)", hint="a path"),
    SinkOption("deliveryGuarantee", "choice", "at-least-once",
               "`exactly-once`: every task attempt writes in a Kafka transaction that the driver commits "
               "with the job; readers with `isolation.level=read_committed` see each row once.",
               choices=GUARANTEES),
    SinkOption("transactionalIdPrefix", "string", None,
               "Exactly-once: the start of the tasks' transactional ids (1 to 200 characters). Ids under "
               "it are the sink's: the driver aborts open transactions under it that it did not commit.",
               unset="the target's (its bootstrap servers and topic); per query (from its checkpoint location) "
                     "when streaming", max_length=200),
    SinkOption("decisionTopic", "string", DEFAULT_DECISION_TOPIC,
               "Exactly-once: the compacted topic each write's decision is recorded in (its exact winning "
               "transactions, before the first commit), so whoever ends a write its driver left ends it as "
               "decided. Created by the first exactly-once write when missing (16 partitions, replication up "
               "to 3); the principal needs WRITE and READ on it (and CREATE, or have it created).",
               field="decision_topic", hint="a topic name", max_length=249),
    SinkOption("leaseKeeper", "choice", "process",
               "Exactly-once: `process` starts a small keeper process beside the driver that holds its lease "
               "and ends its writes within seconds should the driver die. `none` starts none (for platforms "
               "that forbid extra processes): a dead driver's write is then ended by the next exactly-once "
               "write under the prefix, the operator's command or `kafka.transaction.timeout.ms`, and writes "
               "under one prefix must not run at once.",
               choices=("process", "none"), field="keeper"),
    SinkOption("leaseWindowMs", "integer", int(LEASE_WINDOW_S * 1000),
               "Exactly-once: how long a write watches the lease of another driver with open writes under its "
               "prefix before calling that driver gone and ending its writes as they were decided: how long the "
               "next write waits behind a dead driver. Shorter ends leftovers sooner; a live driver whose keeper "
               "stalls longer than this may see its job fail, cleanly (nothing of it visible, nothing twice).",
               minimum=int(2 * LEASE_BEAT_S * 1000), maximum=3_600_000, unit="ms", field="lease_window_ms"),
    SinkOption("batchId", "integer", None,
               "Exactly-once inside `foreachBatch`: the micro-batch id Spark passes, so that a replayed "
               "micro-batch is recognised (needs `checkpointLocation`).",
               minimum=0, unset="none: the batch write is a write of its own",
               hint="the micro-batch id foreachBatch passes"),
    SinkOption("coalesceBytes", "integer", DEFAULT_COALESCE_BYTES,
               "A task joins Spark's Arrow batches until they hold this many bytes, then hands them to the "
               "producer in one bulk call. `0` sends each Arrow batch alone; lower it where the Python "
               "workers' memory is tight.",
               minimum=0, maximum=1 << 30, unit="bytes", field="coalesce_bytes",
               hint="0: hand each Spark Arrow batch to the producer alone"),
    SinkOption("tuneAllocator", "boolean", True,
               "Each write task raises glibc's malloc thresholds in its Python worker (mmap 16 MiB, trim "
               "32 MiB), so the large temporaries of a bulk call reuse the heap instead of fresh pages. "
               "Process-wide; does nothing on another C library. `false` leaves them alone.",
               field="tune_allocator"),
    SinkOption("clusterCheckTimeoutMs", "integer", DEFAULT_CLUSTER_CHECK_TIMEOUT_MS,
               "Batch writes: before any task starts, the driver checks within this bound that a broker "
               "answers, that the topics exist (or may be created) and that the principal may write them. "
               "`0` skips the check. Not run for `writeStream`.",
               minimum=0, maximum=600_000, unit="ms", field="cluster_check_timeout_ms",
               hint="0: no check of the cluster before the tasks start"),
    SinkOption("maxRecordsPerSecond", "number", None,
               "Rate limit of each write task: records per second, paced smoothly (slices of a tenth of a "
               "second's allowance). The job's rate is at most this times the tasks running at once.",
               above=0, unit="records per second of each write task", unset="no limit",
               field="max_records_per_s"),
    SinkOption("maxBytesPerSecond", "number", None,
               "Rate limit of each write task: key + value + header bytes (before compression) per second.",
               above=0, unit="bytes per second of each write task", unset="no limit",
               field="max_bytes_per_s"),
    SinkOption("producerCacheTimeoutMs", "integer", DEFAULT_CACHE_TIMEOUT_MS,
               "At-least-once tasks of one Python worker share a producer per configuration; an idle one "
               "is closed after this long. `0`: one producer per task. Exactly-once tasks always have "
               "their own.",
               minimum=0, maximum=86_400_000, unit="ms", field="producer_cache_timeout_ms",
               hint="0: one producer per task, no pool"),
    SinkOption("errors.tolerance", "choice", "none",
               "`none`: the first bad row fails its task, naming it. `all`: bad rows are skipped and "
               "counted (`records_skipped`), and the job goes on.",
               choices=TOLERANCES),
    SinkOption("errors.deadletterqueue.topic.name", "string", None,
               "With `errors.tolerance=all`: each bad row is written to this topic with its key, value "
               "and headers, plus context headers. Must differ from the target topic.",
               unset="none: bad rows are only counted", field="dead_letter_topic", hint="a topic name"),
    SinkOption("errors.deadletterqueue.context.headers.enable", "boolean", True,
               "Dead-letter records carry headers naming the error, its stage, the intended topic and "
               "partition, and the Spark partition, attempt and row.", field="dead_letter_context_headers"),
    SinkOption("errors.log.enable", "boolean", False,
               "Log each bad row as a warning of its task (never its key or value).", field="log_bad_rows"),
)

#: how the ``key`` and ``value`` columns become bytes (``formats.py`` parses them); the
#: serializer settings keep Confluent's names
SERIALIZATION_OPTIONS: tuple[SinkOption, ...] = tuple(
    option
    for column in ("value", "key")
    for option in (
        SinkOption(f"{column}Format", "choice", "binary",
                   f"How the `{column}` column is written: `binary` (its bytes; a string as UTF-8), `avro`, "
                   "`json` (JSON Schema) or `protobuf` in the Schema Registry's wire format (then the column may "
                   "be of any Spark type -- a struct for Protobuf -- and `schema.registry.url` is required).",
                   choices=COLUMN_FORMATS, field="format"),
        SinkOption(f"{column}Schema", "string", None,
                   f"The schema of the `{column}` column, as Avro JSON, JSON Schema or proto3 text (the first "
                   "message of a `.proto` is written); checked against the column's type on the driver.",
                   unset="derived from the column's Spark type", field="schema", hint="the schema's text"),
        SinkOption(f"{column}DescriptorFile", "string", None,
                   "Protobuf: a descriptor set file holding the schema (`protoc --descriptor_set_out=FILE "
                   "--include_imports`), read on the driver; its messages may import only the well-known types. "
                   "Needs the `protobuf` package on the driver (`pip install 'sparkkafka-sink[protobuf]'`).",
                   unset="none", field="descriptor_file", hint="a file path"),
        SinkOption(f"{column}RecordName", "string", None,
                   "The name of the derived schema's record (Avro), its `title` (JSON Schema), or its message "
                   "(Protobuf); with a given Protobuf schema, which of its top-level messages is written.",
                   unset="Avro and Protobuf: `topLevelRecord` (as Spark's `to_avro`); JSON Schema: no title",
                   field="record_name", hint="a record name"),
        SinkOption(f"{column}RecordNamespace", "string", None,
                   "The namespace of the derived schema's record (Avro), or its package (Protobuf).",
                   unset="none", field="record_namespace", hint="a namespace"),
        SinkOption(f"{column}.subject.name.strategy", "choice", DEFAULT_STRATEGY,
                   f"The subject the {column} schema lives under. Confluent's Java class names and "
                   "confluent-kafka's function names are accepted too.",
                   choices=STRATEGY_NAMES, field="subject_strategy", spelling=strategy_named,
                   hint="or their Java class or confluent-kafka function names"),
    )
) + (
    SinkOption("auto.register.schemas", "boolean", None,
               "Register the schema under its subject (an equal schema already there answers with its id). "
               "`false`: the schema must already be registered.",
               unset="`true`, or `false` with `use.latest.version=true`", field="auto_register"),
    SinkOption("use.latest.version", "boolean", False,
               "Write with the subject's latest schema (which must be able to hold the column); needs "
               "`auto.register.schemas=false`, which it implies.", field="use_latest_version"),
    SinkOption("normalize.schemas", "boolean", False,
               "Ask the registry to normalize the schema before registering or looking it up.", field="normalize"),
)

#: every option by the name the parser sees (lower-cased)
OPTIONS: dict[str, SinkOption] = {o.key: o for o in SINK_OPTIONS + SERIALIZATION_OPTIONS}


def option(name: str) -> SinkOption:
    """The declaration of ``name`` (any case)."""
    return OPTIONS[name.lower()]


def parse_all(lowered: Mapping[str, Any], declared: Iterable[SinkOption] = OPTIONS.values()) -> dict[str, Any]:
    """Every declared option's value, by its key (``lowered``: the options, keys lower-cased)."""
    return {o.key: o.parse(lowered.get(o.key)) for o in declared}


def fields(values: Mapping[str, Any], declared: Iterable[SinkOption]) -> dict[str, Any]:
    """The plan fields these options fill, from their values (``parse_all``)."""
    return {o.field: values[o.key] for o in declared if o.field}


def column_options(column: str) -> tuple[SinkOption, ...]:
    """The serialization options of the ``key`` or ``value`` column."""
    return tuple(o for o in SERIALIZATION_OPTIONS if o.key.startswith(column))


# -- the other options, in the same shape, for the reference -------------------------------------
#: producer keys whose value may be a Python callable in the standalone ``Producer``: a Spark
#: option is a string, so the sink's ``kafka.*`` option takes only what a string can say
#: (``{key: (type, meaning)}``)
STRING_ONLY_KAFKA_KEYS = {
    "partitioner": ("one of murmur2, round_robin, random",
                    "murmur2 (Java default), round_robin or random (the standalone Producer also takes a "
                    "callable; a Spark option is a string)"),
    "sasl.oauthbearer.token.provider": ("an importable 'module:function' string",
                                        "OAUTHBEARER: the 'module:function' of a function returning a token (the "
                                        "standalone Producer also takes the callable itself; a Spark option is a "
                                        "string)"),
}


def producer_options() -> list[OptionDoc]:
    """Every producer key as a ``kafka.*`` option: the type its validator accepts (as its own
    error message says), the default the sink uses (where the sink sets its own, the producer's
    follows) and the key's meaning; keys the sink refuses say so, keys that take a callable in
    Python say what a Spark option (a string) can give."""
    from sparkkafka_sink.errors import ConfigError
    from sparkkafka_sink.producer.config import KEYS, describe

    sink_defaults = {"batch.size": f"{SINK_BATCH_SIZE} (the producer's: {KEYS['batch.size'].default})",
                     "linger.ms": f"{SINK_LINGER_MS} (the producer's: {KEYS['linger.ms'].default})",
                     "transaction.timeout.ms": (f"{KEYS['transaction.timeout.ms'].default}; under exactly-once "
                                                f"{EXACTLY_ONCE_TIMEOUT_MS}")}
    out = []
    for key, default, doc in describe():
        try:
            KEYS[key].parse(key, _Unacceptable())
            accepted = "any value"
        except ConfigError as e:  # "Invalid value ... for configuration 'k': expected <what it accepts>"
            accepted = str(e).partition(": expected ")[2]
        if key in REJECTED_KAFKA_KEYS:
            doc = f"{doc}. Not accepted by the sink: {REJECTED_KAFKA_KEYS[key]}"
        if key in STRING_ONLY_KAFKA_KEYS:
            accepted, doc = STRING_ONLY_KAFKA_KEYS[key]
        shown = sink_defaults.get(key) or ("required" if key == "bootstrap.servers" else
                                           "unset" if default is None else _value_text(default))
        out.append(OptionDoc(f"kafka.{key}", _readable(accepted), shown, doc))
    return out


def registry_options() -> list[OptionDoc]:
    """Every Schema Registry client setting as a ``schema.registry.*`` option."""
    from sparkkafka_sink.serialization.registry_settings import REGISTRY_KEYS

    return [OptionDoc(f"schema.registry.{k.name}", k.type, k.default, k.doc) for k in REGISTRY_KEYS]


class _Unacceptable:
    """A value no validator accepts: its refusal says what it would accept."""


def _value_text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


_BIG = {str(2**31 - 1): "2³¹−1", str(2**63 - 1): "2⁶³−1"}


def _readable(accepted: str) -> str:
    for number, shown in _BIG.items():
        accepted = accepted.replace(number, shown)
    return accepted.removeprefix("an ").removeprefix("a ")
