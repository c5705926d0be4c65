"""Every option of the sink, declared once: its name as users write it, what it accepts, its
default and what it means.

Each declaration is a ``config_def.ConfigKey``, the shape of every setting (the producer's keys
and the registry's too), held by a typed attribute named after it of one of three settings
classes -- the sink's (:class:`SinkSettings`), a column's (:class:`ColumnSettings`, declared once
for the key and the value) and the serializer's (:class:`SerializerSettings`) -- which the write's
plan extends (``options.SinkOptions``, ``formats.ColumnFormat``, ``formats.Formats``).  It
parses its own value (kind, bounds, choices, default; the error, in the sink's words, by
:data:`OPTIONS`); the parser (``options.py``,
``formats.py``) keeps only the rules that span several options, and knows an option by being
here (anything else that is not ``kafka.*`` or ``schema.registry.*`` is a typo, answered with
"Did you mean ...?").  The documentation's configuration reference is
generated from here too (``docs/hooks/config_reference.py``), together with the producer's own
keys (``producer.config``) and the Schema Registry client's (``serialization.registry_settings``),
which :func:`producer_options` and :func:`registry_options` present in the same shape.

A new sink option is one ``Declared`` attribute in one of those classes, and its use.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, get_args

from sparkkafka_sink.config_def import ConfigDef, ConfigKey, Declared, Invalid, OptionDoc, Settings, declarations
from sparkkafka_sink.exactly_once.ids import DEFAULT_DECISION_TOPIC
from sparkkafka_sink.exactly_once.leases import BEAT_S as LEASE_BEAT_S
from sparkkafka_sink.exactly_once.leases import WINDOW_S as LEASE_WINDOW_S
from sparkkafka_sink.otel.spans import valid_traceparent
from sparkkafka_sink.serialization.subjects import DEFAULT_STRATEGY, STRATEGY_NAMES, strategy_named
from sparkkafka_sink.spark.sink_errors import SinkValidationError

__all__ = ["SINK_OPTIONS", "SERIALIZATION_OPTIONS", "OPTIONS", "option", "parse_all",
           "REJECTED_KAFKA_KEYS", "SINK_LINGER_MS", "SinkSettings", "ColumnSettings", "SerializerSettings",
           "COLUMNS", "column_values", "EXACTLY_ONCE_TIMEOUT_MS",
           "producer_options", "registry_options"]


def _sink_error(key: ConfigKey, raw: Any, invalid: Invalid) -> SinkValidationError:
    """The sink's wording: the option as users wrote it, what it accepts, what it got."""
    if invalid.reason == "empty":
        return SinkValidationError(f"option '{key.name}' is empty; give {key.hint or 'a value'} or drop the option")
    if invalid.reason == "too long":
        return SinkValidationError(f"option '{key.name}' must be 1-{key.max_length} characters, "
                                   f"got {invalid.length}")
    hint = f" ({key.hint})" if key.hint else ""
    return SinkValidationError(f"option '{key.name}' must be {invalid.accepted}{hint}, got {key.shown(raw)}")


def _traceparent(raw: object) -> str:
    text = str(raw).strip()
    if not valid_traceparent(text):
        raise Invalid()  # (what the key accepts)
    return text


def _hook(raw: object) -> str:
    text = str(raw).strip()
    module, sep, function = text.partition(":")
    if not sep or not module or not function.isidentifier() or not all(p.isidentifier() for p in module.split(".")):
        raise Invalid()  # (what the key accepts)
    return text


GUARANTEES = ("at-least-once", "exactly-once")
TOLERANCES = ("none", "all")
#: how a column is written: its own bytes, or in a registry format
ColumnFormatName = Literal["binary", "avro", "json", "protobuf"]
COLUMN_FORMATS: tuple[ColumnFormatName, ...] = get_args(ColumnFormatName)

#: The sink's producer default of its own (an explicit ``kafka.*`` option wins; its batches are
#: ``send_batch``'s, ``producer.config.BULK_BATCH_SIZE`` unless ``kafka.batch.size`` is set).
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

class SinkSettings(Settings):
    """The sink's own options, parsed: each declared here once -- name, kind, bounds, default,
    meaning -- and read as a typed attribute named after it (``deliveryGuarantee`` ->
    ``delivery_guarantee``, ``errors.log.enable`` -> ``errors_log_enable``).  The write's plan
    (``options.SinkOptions``) is one of these with what the driver derives beside them."""

    topic: Declared[str | None] = Declared(ConfigKey(
        "topic", "string", None,
        "The topic every row is written to. When set, it wins over a `topic` column.",
        unset="each row's `topic` column (then required)", hint="a topic name"))
    properties_file: Declared[str | None] = Declared(ConfigKey(
        "propertiesFile", "string", None,
        "A client properties file read whole on the driver (Confluent Cloud's `client.properties`, a Java "
        "job's `producer.properties`): its Kafka lines are taken as `kafka.*` options, its Schema Registry "
        "lines (`schema.registry.url`, `basic.auth.*`, `bearer.auth.*`) as `schema.registry.*` ones (unused "
        "when no column is written in a registry format), its Confluent serializer settings as the sink's "
        "options of those names; a Java job's byte and string serializer lines are dropped with a warning, "
        "Confluent's serializers refused naming the `keyFormat`/`valueFormat` that does their work. Options "
        "given with `.option()` win over its lines; its secrets travel and are redacted as the options' are.",
        unset="none: the options alone", hint="a path on the driver"))
    databricks_service_credential: Declared[str | None] = Declared(ConfigKey(
        "databricks.serviceCredential", "string", None,
        "Databricks: sign in as this Unity Catalog service credential (as Databricks' own Kafka connector "
        "does), its credentials read on the driver and every executor through Databricks' Python API and "
        "kept fresh: an AWS IAM role signs Amazon MSK's IAM sign-in (`AWS_MSK_IAM`; `OAUTHBEARER` if "
        "`kafka.sasl.mechanism` says so), a Google service account Managed Kafka's token. "
        "`kafka.security.protocol` defaults to `SASL_SSL` with it; no other `kafka.sasl.*` sign-in "
        "setting may be given beside it.",
        unset="none: the kafka.sasl.* settings sign in", hint="a service credential's name"))
    databricks_service_credential_scope: Declared[str | None] = Declared(ConfigKey(
        "databricks.serviceCredential.scope", "string", None,
        "Databricks' scope for a service credential it cannot infer one for (Azure, Google); not used "
        "here, and refused: an AWS IAM role needs none, Google's Managed Kafka token is made with the "
        "`cloud-platform` scope, and Azure Event Hubs signs in with its connection string.",
        unset="none", hint="nothing: drop the option"))
    checkpoint_location: Declared[str | None] = Declared(ConfigKey(
        "checkpointLocation", "string", None,
        "Spark's own streaming option: where the query keeps its progress, any path Spark accepts "
        "(local, `file:`, `dbfs:/`, `s3a://`, `abfss://`, `gs://`, `hdfs://`). Under exactly-once it names "
        "the query (the default `transactionalIdPrefix` is made from it, the same for `/c/q`, `/c/q/` and "
        "`file:///c/q`; but a relative path against an absolute one, or the file system's scheme added or "
        "dropped, names another query, whose replays are not recognised: keep one spelling, or give "
        "`transactionalIdPrefix`); the sink writes nothing under it. In `foreachBatch` give the query's own.",
        unset="none (Spark asks for one to start a streaming query)", hint="a path"))
    delivery_guarantee: Declared[str] = Declared(ConfigKey(
        "deliveryGuarantee", "choice", "at-least-once",
        "`exactly-once`: every task attempt writes in a Kafka transaction that the driver commits "
        "with the job; readers with `isolation.level=read_committed` see each row once.",
        choices=GUARANTEES))
    transactional_id_prefix: Declared[str | None] = Declared(ConfigKey(
        "transactionalIdPrefix", "string", None,
        "Exactly-once: the start of the tasks' transactional ids (1 to 200 characters). Ids under "
        "it are the sink's: the driver aborts open transactions under it that it did not commit.",
        unset="the target's (its bootstrap servers and topic); per query (from its checkpoint location) "
              "when streaming", max_length=200))
    decision_topic: Declared[str] = Declared(ConfigKey(
        "decisionTopic", "string", DEFAULT_DECISION_TOPIC,
        "Exactly-once: the compacted topic each write's decision is recorded in (its exact winning "
        "transactions, before the first commit), so whoever ends a write its driver left ends it as "
        "decided. Created by the first exactly-once write when missing (16 partitions, replication up "
        "to 3); the principal needs WRITE and READ on it (and CREATE, or have it created).",
        hint="a topic name", max_length=249))
    lease_keeper: Declared[str] = Declared(ConfigKey(
        "leaseKeeper", "choice", "process",
        "Exactly-once: `process` starts a small keeper process beside the driver that holds its lease "
        "and ends its writes within seconds should the driver die. `none` starts none (for platforms "
        "that forbid extra processes): a dead driver's write is then ended by the next exactly-once "
        "write under the prefix, the operator's command or `kafka.transaction.timeout.ms`, and writes "
        "under one prefix must not run at once.",
        choices=("process", "none")))
    lease_window_ms: Declared[int] = Declared(ConfigKey(
        "leaseWindowMs", "integer", int(LEASE_WINDOW_S * 1000),
        "Exactly-once: how long a write watches the lease of another driver with open writes under its "
        "prefix before calling that driver gone and ending its writes as they were decided: how long the "
        "next write waits behind a dead driver. Shorter ends leftovers sooner; a live driver whose keeper "
        "stalls longer than this may see its job fail, cleanly (nothing of it visible, nothing twice).",
        minimum=int(2 * LEASE_BEAT_S * 1000), maximum=3_600_000, unit="ms"))
    batch_id: Declared[int | None] = Declared(ConfigKey(
        "batchId", "integer", None,
        "Exactly-once inside `foreachBatch`: the micro-batch id Spark passes, so that a replayed "
        "micro-batch is recognised (needs `checkpointLocation`).",
        minimum=0, unset="none: the batch write is a write of its own",
        hint="the micro-batch id foreachBatch passes"))
    #: a task gathers Spark's Arrow batches (10,000 rows each by default) until they hold this
    #: many bytes and hands them to the producer in one bulk call (as one table's pieces:
    #: ``spark.task.batches``).  Every call has a fixed cost (partitioning, grouping, one encoding
    #: pass, a batch tail per partition), so bigger calls cost less per row, and a call's rows per
    #: partition are what an open batch gets before ``linger.ms`` sends it: at 64 partitions a
    #: 4 MiB call gives each ~600 110-byte rows, 16 MiB a full 256 KiB batch (benchmarks/README,
    #: "coalesceBytes").
    coalesce_bytes: Declared[int] = Declared(ConfigKey(
        "coalesceBytes", "integer", 16 << 20,
        "A task groups Spark's Arrow batches until they hold this many bytes, then hands them to the "
        "producer in one bulk call (not joined: the producer copies their rows once, into its records). "
        "`0` sends each Arrow batch alone; lower it where the Python workers' memory is tight.",
        minimum=0, maximum=1 << 30, unit="bytes",
        hint="0: hand each Spark Arrow batch to the producer alone"))
    tune_allocator: Declared[bool] = Declared(ConfigKey(
        "tuneAllocator", "boolean", True,
        "Each write task raises glibc's malloc thresholds in its Python worker (mmap 16 MiB, trim "
        "32 MiB), so the large temporaries of a bulk call reuse the heap instead of fresh pages. "
        "Process-wide; does nothing on another C library. `false` leaves them alone."))
    cluster_check_timeout_ms: Declared[int] = Declared(ConfigKey(
        "clusterCheckTimeoutMs", "integer", 10_000,
        "Batch writes: before any task starts, the driver checks within this bound that a broker "
        "answers, that the topics exist (or may be created) and that the principal may write them. "
        "`0` skips the check. Not run for `writeStream`.",
        minimum=0, maximum=600_000, unit="ms",
        hint="0: no check of the cluster before the tasks start"))
    max_records_per_second: Declared[float | None] = Declared(ConfigKey(
        "maxRecordsPerSecond", "number", None,
        "Rate limit of each write task: records per second, paced smoothly (slices of a tenth of a "
        "second's allowance). The job's rate is at most this times the tasks running at once.",
        above=0, unit="records per second of each write task", unset="no limit"))
    max_bytes_per_second: Declared[float | None] = Declared(ConfigKey(
        "maxBytesPerSecond", "number", None,
        "Rate limit of each write task: key + value + header bytes (before compression) per second.",
        above=0, unit="bytes per second of each write task", unset="no limit"))
    producer_cache_timeout_ms: Declared[int] = Declared(ConfigKey(
        "producerCacheTimeoutMs", "integer", 600_000,  # Spark's spark.kafka.producer.cache.timeout
        "At-least-once tasks of one Python worker share a producer per configuration; an idle one "
        "is closed after this long. `0`: one producer per task. Exactly-once tasks always have "
        "their own.",
        minimum=0, maximum=86_400_000, unit="ms",
        hint="0: one producer per task, no pool"))
    errors_tolerance: Declared[str] = Declared(ConfigKey(
        "errors.tolerance", "choice", "none",
        "`none`: the first bad row fails its task, naming it. `all`: bad rows are skipped and "
        "counted (`records_skipped`), and the job goes on.",
        choices=TOLERANCES))
    errors_deadletterqueue_topic_name: Declared[str | None] = Declared(ConfigKey(
        "errors.deadletterqueue.topic.name", "string", None,
        "With `errors.tolerance=all`: each bad row is written to this topic with its key, value "
        "and headers, plus context headers. Must differ from the target topic.",
        unset="none: bad rows are only counted", hint="a topic name"))
    errors_deadletterqueue_context_headers_enable: Declared[bool] = Declared(ConfigKey(
        "errors.deadletterqueue.context.headers.enable", "boolean", True,
        "Dead-letter records carry headers naming the error, its stage, the intended topic and "
        "partition, and the Spark partition, attempt and row."))
    errors_log_enable: Declared[bool] = Declared(ConfigKey(
        "errors.log.enable", "boolean", False,
        "Log each bad row as a warning of its task (never its key or value)."))
    open_telemetry: Declared[bool] = Declared(ConfigKey(
        "openTelemetry", "boolean", True,
        "Spans of the write (one per task, one for the driver's commit) and its producers' metrics, "
        "through OpenTelemetry's API when it is installed (the `[otel]` extra; an SDK set up in the "
        "process decides where they go). `false`: none, even with it installed."))
    trace_headers: Declared[str] = Declared(ConfigKey(
        "traceHeaders", "choice", "none",
        "A W3C `traceparent` header on every record, for the services that read them to continue the "
        "trace: `task` the write task's span (OpenTelemetry's: needs the `[otel]` extra and an SDK set up "
        "where the tasks run, `openTelemetrySetup`; without one the write's `traceParent`), `column` each row's own from a string column "
        "`traceparent` (a null row: the task's span when traced, else no header; a value that is not a "
        "traceparent: a bad row). After the row's own headers.",
        choices=("none", "task", "column")))
    trace_parent: Declared[str | None] = Declared(ConfigKey(
        "traceParent", "custom", None,
        "The span the write's spans continue, as a W3C `traceparent`: `sparkkafka_sink.traceparent()` "
        "gives the caller's current one, so a write started inside a traced pipeline continues its trace.",
        parser=_traceparent, accepts="a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>, lower case, neither id all zeros)",
        unset="a new trace per write"))
    open_telemetry_setup: Declared[str | None] = Declared(ConfigKey(
        "openTelemetrySetup", "custom", None,
        "`module:function` called once in each Python process of the write before its first span -- "
        "every task's Python worker, the driver's planning and commit processes, which the caller's own "
        "set-up never reaches -- to set up OpenTelemetry's SDK and its exporters there.",
        parser=_hook, accepts="module:function (an importable module and a function of it)",
        unset="none: what the processes set up themselves (OTEL_* variables read by their own code)"))


class ColumnSettings(Settings):
    """How one column, ``key`` or ``value``, becomes bytes: each option declared once for both,
    its name (and texts) holding a ``{column}`` placeholder (``{column}Format``: ``keyFormat``
    and ``valueFormat``, ``ConfigKey.for_column``); an instance holds one column's values by
    the declared (placeholder) names."""

    format: Declared[ColumnFormatName] = Declared(ConfigKey(
        "{column}Format", "choice", "binary",
        "How the `{column}` column is written: `binary` (its bytes; a string as UTF-8), `avro`, "
        "`json` (JSON Schema) or `protobuf` in the Schema Registry's wire format (then the column may "
        "be of any Spark type -- a struct for Protobuf -- and `schema.registry.url` is required).",
        choices=COLUMN_FORMATS))
    schema: Declared[str | None] = Declared(ConfigKey(
        "{column}Schema", "string", None,
        "The schema of the `{column}` column, as Avro JSON, JSON Schema or proto3 text (the first "
        "message of a `.proto` is written); checked against the column's type on the driver.",
        unset="derived from the column's Spark type", hint="the schema's text"))
    descriptor_file: Declared[str | None] = Declared(ConfigKey(
        "{column}DescriptorFile", "string", None,
        "Protobuf: a descriptor set file holding the schema (`protoc --descriptor_set_out=FILE "
        "--include_imports`), read on the driver; its messages may import only the well-known types. "
        "Needs the `protobuf` package on the driver (`pip install 'sparkkafka-sink[protobuf]'`).",
        unset="none", hint="a file path"))
    record_name: Declared[str | None] = Declared(ConfigKey(
        "{column}RecordName", "string", None,
        "The name of the derived schema's record (Avro), its `title` (JSON Schema), or its message "
        "(Protobuf); with a given Protobuf schema, which of its top-level messages is written.",
        unset="Avro and Protobuf: `topLevelRecord` (as Spark's `to_avro`); JSON Schema: no title",
        hint="a record name"))
    record_namespace: Declared[str | None] = Declared(ConfigKey(
        "{column}RecordNamespace", "string", None,
        "The namespace of the derived schema's record (Avro), or its package (Protobuf).",
        unset="none", hint="a namespace"))
    subject_name_strategy: Declared[str] = Declared(ConfigKey(
        "{column}.subject.name.strategy", "choice", DEFAULT_STRATEGY,
        "The subject the {column} schema lives under. Confluent's Java class names and "
        "confluent-kafka's function names are accepted too.",
        choices=STRATEGY_NAMES, spelling=strategy_named,
        hint="or their Java class or confluent-kafka function names"))


class SerializerSettings(Settings):
    """The serializer's settings, for both columns at once, with Confluent's names."""

    auto_register_schemas: Declared[bool | None] = Declared(ConfigKey(
        "auto.register.schemas", "boolean", None,
        "Register the schema under its subject (an equal schema already there answers with its id). "
        "`false`: the schema must already be registered.",
        unset="`true`, or `false` with `use.latest.version=true`"))
    use_latest_version: Declared[bool] = Declared(ConfigKey(
        "use.latest.version", "boolean", False,
        "Write with the subject's latest schema (which must be able to hold the column); needs "
        "`auto.register.schemas=false`, which it implies."))
    normalize_schemas: Declared[bool] = Declared(ConfigKey(
        "normalize.schemas", "boolean", False,
        "Ask the registry to normalize the schema before registering or looking it up."))


SINK_OPTIONS = declarations(SinkSettings)
#: the column options (``ColumnSettings``) of the value and of the key
COLUMNS = ("value", "key")
#: how the ``key`` and ``value`` columns become bytes (``formats.py`` parses them); the
#: serializer settings keep Confluent's names
SERIALIZATION_OPTIONS = tuple(key.for_column(column) for column in COLUMNS
                              for key in declarations(ColumnSettings)) + declarations(SerializerSettings)

#: every option of the sink, found in any case (Spark hands options over lower-cased)
OPTIONS = ConfigDef(SINK_OPTIONS + SERIALIZATION_OPTIONS, error=_sink_error, case_insensitive=True)


def option(name: str) -> ConfigKey[Any]:
    """The declaration of ``name`` (any case)."""
    return OPTIONS[name]


def parse_all(lowered: Mapping[str, Any], declared: Iterable[ConfigKey[Any]]) -> dict[str, Any]:
    """The values of the ``declared`` options, by their names as declared (``lowered``: the
    options given, keys lower-cased)."""
    return OPTIONS.parse_all(lowered, declared)


def column_values(lowered: Mapping[str, Any], column: str) -> dict[str, Any]:
    """The values of one column's options (``ColumnSettings``), by their declared (placeholder)
    names: ``{"{column}Format": "avro", ...}``."""
    named = [(key.name, key.for_column(column)) for key in declarations(ColumnSettings)]
    values = parse_all(lowered, [filled for _, filled in named])
    return {template: values[filled.name] for template, filled in named}


# -- the other options, in the same shape, for the reference -------------------------------------
def producer_options() -> list[OptionDoc]:
    """Every producer key as a ``kafka.*`` option: what it accepts, the default the sink uses
    (where the sink sets its own, the producer's follows) and the key's meaning; keys the sink
    refuses say so, keys that take a callable in Python say what a Spark option (a string) can
    give (``ConfigKey.as_text``)."""
    from sparkkafka_sink.producer.config import KEYS, ProducerConfig

    linger, timeout = ProducerConfig.linger_ms.key, ProducerConfig.transaction_timeout_ms.key
    sink_defaults = {linger.name: f"{SINK_LINGER_MS} (the producer's: {linger.default})",
                     timeout.name: f"{timeout.default}; under exactly-once {EXACTLY_ONCE_TIMEOUT_MS}"}
    out = []
    for key in KEYS.values():
        entry = key.doc_entry("kafka.")
        doc, accepted = entry.doc, entry.type
        if key.name in REJECTED_KAFKA_KEYS:
            doc = f"{doc}. Not accepted by the sink: {REJECTED_KAFKA_KEYS[key.name]}"
        if key.as_text:  # a Spark option is a string: what a string can give
            accepted, doc = key.as_text
        out.append(OptionDoc(entry.name, accepted, sink_defaults.get(key.name, entry.default), doc))
    return out


def registry_options() -> list[OptionDoc]:
    """Every Schema Registry client setting as a ``schema.registry.*`` option."""
    from sparkkafka_sink.serialization.registry_settings import REGISTRY_KEYS

    return REGISTRY_KEYS.docs("schema.registry.")
