"""Parse the sink's ``.option(...)`` map into the producer config and sink settings.

Spark passes options as a case-insensitive map of strings.  Keys prefixed with
``kafka.`` configure the producer (prefix stripped, Java key names), exactly as
Spark's built-in Kafka sink does; ``topic`` names the default topic.  Everything
is checked on the driver, so a typo fails the write before any task starts; the
resulting ``SinkOptions`` travel in the plan (``plan.py``) to every task.
"""

from __future__ import annotations

import difflib
import hashlib
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sparkkafka_sink.errors import ConfigError
from sparkkafka_sink.exactly_once.ids import WriteId, new_run
from sparkkafka_sink.producer.config import KEYS, ProducerConfig
from sparkkafka_sink.spark import option_catalog as catalog
from sparkkafka_sink.spark.errors import (
    KAFKA_PREFIX,
    REGISTRY_PREFIX,
    SERVICE_CREDENTIAL_KEY,
    SinkValidationError,
    in_option_names,
)
from sparkkafka_sink.spark.formats import Formats, parse_formats
from sparkkafka_sink.spark.option_catalog import (
    EXACTLY_ONCE_TIMEOUT_MS,
    REJECTED_KAFKA_KEYS,
    SINK_LINGER_MS,
)
from sparkkafka_sink.spark.properties_file import with_properties_file

log = logging.getLogger(__name__)


#: options Spark itself may add (``save(path)``, ``start(path)``): not ours, not a typo
_SPARK_OPTIONS = ("path",)


def _declared(name: str) -> Any:
    """The default of the option ``name`` as its declaration states it (``option_catalog``): a
    plan's field that an option fills takes its default from there, never a second time here."""
    return catalog.option(name).parse(None)


@dataclass(frozen=True)
class SinkOptions:
    """What a write task needs from the options; pickled into every task."""

    topic: str | None
    #: the ``kafka.*`` options, validated by the producer's own configuration (a mapping given
    #: here is validated on construction)
    producer_config: ProducerConfig
    coalesce_bytes: int = _declared("coalesceBytes")
    #: exactly-once: each task writes in a transaction the driver commits; ids start with this
    transactional_id_prefix: str | None = None
    #: exactly-once: the driver that owns the write (``exactly_once.owner``; set when the driver
    #: starts the write) and this write's own run (a streaming query's: this run of it), so its
    #: transactional ids are its own even where the prefix repeats
    owner: str = ""
    run: str = ""
    #: exactly-once inside foreachBatch: the micro-batch this batch write belongs to
    batch_id: int | None = None
    #: a writeStream query's writer (each micro-batch's tasks name theirs)
    streaming: bool = False
    #: exactly-once: where each write's decision is recorded (``exactly_once.decision_log``)
    decision_topic: str = _declared("decisionTopic")
    #: exactly-once: "process" -- the driver starts a keeper (its lease, and the end of its
    #: writes should it die) -- or "none", for platforms that forbid extra processes
    keeper: str = _declared("leaseKeeper")
    #: exactly-once: how long another driver's lease is watched before it is called gone
    lease_window_ms: int = _declared("leaseWindowMs")
    #: the driver's check of the cluster before any task (0: none)
    cluster_check_timeout_ms: int = _declared("clusterCheckTimeoutMs")
    #: rate limits of each write task (None: none)
    max_records_per_s: float | None = _declared("maxRecordsPerSecond")
    max_bytes_per_s: float | None = _declared("maxBytesPerSecond")
    #: idle pooled producers are closed after this (0: no pool, one producer per task)
    producer_cache_timeout_ms: int = _declared("producerCacheTimeoutMs")
    #: errors.tolerance=all: bad rows are skipped (and dead-lettered when a DLQ topic is set)
    tolerate_bad_rows: bool = False
    dead_letter_topic: str | None = _declared("errors.deadletterqueue.topic.name")
    dead_letter_context_headers: bool = _declared("errors.deadletterqueue.context.headers.enable")
    log_bad_rows: bool = _declared("errors.log.enable")
    #: raise glibc's malloc thresholds in the task's Python worker (``spark/task/worker_memory.py``)
    tune_allocator: bool = _declared("tuneAllocator")
    #: how the key and value columns become bytes (``spark/formats.py``)
    formats: Formats = Formats()

    def __post_init__(self) -> None:
        if not isinstance(self.producer_config, ProducerConfig):
            object.__setattr__(self, "producer_config", ProducerConfig(self.producer_config))

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{host}:{port}" for host, port in self.producer_config["bootstrap.servers"])

    @property
    def exactly_once(self) -> bool:
        return self.transactional_id_prefix is not None

    def write(self, batch_id: int | None = None) -> WriteId:
        """The write (a micro-batch when streaming) whose transactional ids start with the
        prefix, the owner, this run and the micro-batch."""
        assert self.transactional_id_prefix is not None, "exactly-once writes have a prefix"
        return WriteId(self.transactional_id_prefix, self.owner, self.run, batch_id)

    def __repr__(self) -> str:  # secrets (sasl.jaas.config, passwords, keys) never shown
        return (f"SinkOptions(topic={self.topic!r}, producer_config={self.producer_config!r}, "
                f"coalesce_bytes={self.coalesce_bytes}, transactional_id_prefix={self.transactional_id_prefix!r})")


def producer_config_from_options(options: Mapping[str, str]) -> dict:
    """The ``kafka.*`` options with the prefix stripped, plus the sink's linger.ms default (its
    batches are the bulk path's, ``ProducerConfig.bulk_batch_size``).

    Otherwise the producer's own defaults (acks=all, idempotence on) apply, and stay
    implicit so an explicit ``kafka.acks=1`` quietly turns idempotence off instead of
    conflicting with it.
    """
    config = {}
    for key, value in options.items():
        if key.lower().startswith(KAFKA_PREFIX):
            config[key[len(KAFKA_PREFIX):].lower()] = value
    if "linger.ms" not in config:
        config["linger.ms"] = str(_sink_linger_ms(config))
    return config


def _sink_linger_ms(config: Mapping[str, str]) -> int:
    """``SINK_LINGER_MS``, less where an explicit delivery.timeout.ms leaves less room beside
    request.timeout.ms (the producer asks delivery >= linger + request)."""
    if "delivery.timeout.ms" not in config:
        return SINK_LINGER_MS
    try:
        room = int(config["delivery.timeout.ms"]) - int(config.get("request.timeout.ms",
                                                                   KEYS["request.timeout.ms"].default))
    except (TypeError, ValueError):
        return SINK_LINGER_MS  # the producer's validation reports the bad value
    return max(0, min(SINK_LINGER_MS, room))


def parse_options(options: Mapping[str, str], *, streaming: bool = False) -> SinkOptions:
    """Validate the options on the driver and return what the tasks need.

    Each sink option parses itself (``option_catalog``); here are the rules that span several.
    The ``kafka.*`` keys go through the producer's own ``ProducerConfig`` (and its security
    settings), so unknown keys and out-of-range values are reported with the producer's wording,
    in the user's option names, before any data moves.
    """
    lowered, from_file = with_properties_file({str(k).lower(): v for k, v in options.items()})
    bootstrap = lowered.get("kafka.bootstrap.servers")
    if bootstrap is None or not str(bootstrap).strip():
        raise SinkValidationError(
            "option 'kafka.bootstrap.servers' is required: "
            '.option("kafka.bootstrap.servers", "host:9092")'
        )
    _check_known(lowered)
    values = catalog.parse_all(lowered, catalog.SINK_OPTIONS)
    raw = producer_config_from_options(lowered)
    _service_credential(values, raw)
    for key, why in REJECTED_KAFKA_KEYS.items():
        if key in raw:
            raise SinkValidationError(f"option 'kafka.{key}' is not supported: {why}")
    if values["deliveryGuarantee"] == "exactly-once":
        # a task's transaction stays open until the driver commits the whole job
        raw.setdefault("transaction.timeout.ms", str(EXACTLY_ONCE_TIMEOUT_MS))
    config = _producer_config(raw)
    for key, why in config.noted.items():  # Java producer keys with no effect here (producer/java_keys.py)
        log.warning("option '%s%s' has no effect with pyprod-kafka: %s", KAFKA_PREFIX, key, in_option_names(why))
    prefix = _exactly_once(values, lowered, config, streaming)
    _check_dead_letters(values)
    return SinkOptions(producer_config=config, transactional_id_prefix=prefix, run=new_run() if prefix else "",
                       batch_id=values["batchId"], streaming=streaming,
                       tolerate_bad_rows=values["errors.tolerance"] == "all",
                       formats=parse_formats(lowered, from_file),
                       **catalog.fields(values, catalog.SINK_OPTIONS))


def _service_credential(values: Mapping[str, Any], raw: dict) -> None:
    """``databricks.serviceCredential`` as the producer's key, with SASL_SSL unless a protocol is given."""
    if values["databricks.serviceCredential.scope"] is not None:
        raise SinkValidationError(
            "option 'databricks.serviceCredential.scope' is not used here: drop it (an AWS IAM role needs no scope, "
            "Google's Managed Kafka token is made with the cloud-platform scope, and Azure Event Hubs signs in with "
            "its connection string)")
    name = values["databricks.serviceCredential"]
    if name is not None:
        raw[SERVICE_CREDENTIAL_KEY] = name
        raw.setdefault("security.protocol", "SASL_SSL")


def _check_known(lowered: Mapping[str, str]) -> None:
    """An option that is neither ``kafka.*`` nor the sink's own is a typo: say what was meant."""
    known = {**{o.key: o.name for o in catalog.OPTIONS.values()}, **{KAFKA_PREFIX + k: KAFKA_PREFIX + k for k in KEYS}}
    for key in lowered:
        if key in known or key.startswith((KAFKA_PREFIX, REGISTRY_PREFIX)) or key in _SPARK_OPTIONS:
            continue  # (an unknown kafka.* or schema.registry.* key is the producer's or registry's to report)
        close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
        if not close and KAFKA_PREFIX + key in known:
            close = [KAFKA_PREFIX + key]  # a producer setting without its prefix
        hint = f" Did you mean '{known[close[0]]}'?" if close else ""
        # a few near it, not all ~90: a message read in a Spark error must fit in a few lines
        near = [known[k] for k in difflib.get_close_matches(key, list(known), n=5, cutoff=0.3) if k not in close][:4]
        others = f" Near it: {', '.join(repr(n) for n in near)}." if near else ""
        raise SinkValidationError(
            f"unknown option '{key}'.{hint}{others} Producer settings take the prefix '{KAFKA_PREFIX}', "
            f"the registry's '{REGISTRY_PREFIX}'; every option: the configuration reference.")


def _check_dead_letters(values: Mapping[str, Any]) -> None:
    dlq, topic = values["errors.deadletterqueue.topic.name"], values["topic"]
    if dlq is None:
        return
    if values["errors.tolerance"] != "all":
        raise SinkValidationError("option 'errors.deadletterqueue.topic.name' needs errors.tolerance=all (with none "
                                  "the first bad row fails the task, so nothing is dead-lettered)")
    if dlq == topic:
        raise SinkValidationError("option 'errors.deadletterqueue.topic.name' names the topic the rows are written "
                                  f"to, {dlq!r}: bad rows need a topic of their own")


def _exactly_once(values: Mapping[str, Any], lowered: Mapping[str, str], config: ProducerConfig,
                  streaming: bool = False) -> str | None:
    """The transactional id prefix under exactly-once (None: at-least-once); checks the producer
    options that would break it."""
    prefix = values["transactionalIdPrefix"]
    if values["deliveryGuarantee"] == "at-least-once":
        for option in ("transactionalIdPrefix", "batchId"):
            if values[option] is not None:
                raise SinkValidationError(f"option '{option}' needs deliveryGuarantee=exactly-once")
        return None
    if config["acks"] != -1:
        raise SinkValidationError(f"deliveryGuarantee=exactly-once needs kafka.acks=all, got {config['acks']}")
    if config["transaction.timeout.ms"] < MIN_EXACTLY_ONCE_TIMEOUT_MS:
        raise SinkValidationError(
            f"deliveryGuarantee=exactly-once needs kafka.transaction.timeout.ms of at least "
            f"{MIN_EXACTLY_ONCE_TIMEOUT_MS}, got {config['transaction.timeout.ms']}: a task's transaction stays open "
            "until the driver commits the whole job, and the commit alone needs 30 s of it")
    if not config["enable.idempotence"]:
        raise SinkValidationError("deliveryGuarantee=exactly-once needs idempotence: drop kafka.enable.idempotence=false")
    if not files_here(config):
        raise SinkValidationError(
            "deliveryGuarantee=exactly-once: the driver commits the tasks' transactions, so it connects to the "
            "cluster as they do, but a file named by kafka.ssl.truststore.location, kafka.ssl.keystore.location or "
            "the keyTab of kafka.sasl.jaas.config is not on the driver: give a path that exists on the driver and "
            "the executors, or the certificates inline as PEM")
    if prefix is not None:
        return prefix
    if (streaming or values["batchId"] is not None) and not values["checkpointLocation"]:
        raise SinkValidationError(
            "deliveryGuarantee=exactly-once on writeStream (or with batchId in foreachBatch) needs "
            ".option(\"checkpointLocation\", path) -- in foreachBatch the query's own -- or a transactionalIdPrefix "
            "of the query's own: the query's decisions are kept under it, so that a micro-batch replayed after a "
            "restart is not written twice")
    if streaming or values["batchId"] is not None:
        # the query's own: stable across restarts, so leftovers of a crashed run are found
        location = checkpoint_identity(values["checkpointLocation"])
        return f"pyprod-kafka-q{hashlib.sha1(location.encode()).hexdigest()[:16]}"
    # the target's: a later write to it finds what a crashed one left open (driver/lease.py);
    # writes running at once have runs of their own under it
    target = "|".join(sorted(str(lowered["kafka.bootstrap.servers"]).split(",")) + [str(lowered.get("topic", ""))])
    return f"pyprod-kafka-t{hashlib.sha1(target.encode()).hexdigest()[:16]}"


#: the shortest ``transaction.timeout.ms`` an exactly-once write accepts: the driver's commit needs
#: ``exactly_once.commit.COMMIT_NEEDS_S`` and the clocks' skew of every winner's time, and the
#: tasks something before it
MIN_EXACTLY_ONCE_TIMEOUT_MS = 60_000


def checkpoint_identity(location: str) -> str:
    """The checkpoint location as one spelling of the directory it names, so that a query restarted
    with it spelled another way keeps its prefix (and its replays are recognised): no trailing
    slash, no repeated slash, a ``file:`` URL as its local path (``file:///c/q``, ``file:/c/q`` ->
    ``/c/q``), an empty authority dropped (``dbfs:///c/q`` -> ``dbfs:/c/q``).  What cannot be told
    here stays as given: a relative path against an absolute one, the default file system's scheme
    added or dropped (``/c/q`` against ``dbfs:/c/q``), another host name of the same store."""
    text = location.strip()
    scheme, sep, rest = text.partition(":") if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", text) else ("", "", text)
    authority = ""
    if sep and rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        rest = slash + path
    if scheme.lower() == "file" and authority in ("", "localhost"):
        scheme, sep, authority = "", "", ""
    rest = re.sub(r"/{2,}", "/", rest)
    if len(rest) > 1:
        rest = rest.rstrip("/")
    if not sep:
        return rest
    return f"{scheme}://{authority}{rest}" if authority else f"{scheme}:{rest}"


def _producer_config(raw: dict) -> ProducerConfig:
    """The producer's configuration of the ``kafka.*`` options, its security settings included;
    errors speak in the user's option names ('linger.ms' -> 'kafka.linger.ms')."""
    # here, not at the top: the security check needs the network layer, which the driver's commit
    # process (it unpickles these options with the writer) must not import
    from sparkkafka_sink.producer.network_stack import check_security

    try:
        config = ProducerConfig(raw)
        check_security(config, tls_files=files_here(config))
        return config
    except ConfigError as exc:
        raise SinkValidationError(
            f"invalid producer option: {in_option_names(exc)} (kafka.* options are producer settings "
            f"with the prefix stripped)"
        ) from exc


def files_here(config: Mapping[str, Any]) -> bool:
    """The files the producer options name -- the TLS stores, a Krb5LoginModule's keytab -- exist
    here on the driver (on a cluster they may be shipped to the executors only, with --files or
    addFile, and named by their base name): only then can the driver check them, or connect as
    the tasks will."""
    from sparkkafka_sink.network.sasl.jaas import keytab_of  # (see _producer_config)

    paths = [str(config[k]) for k in ("ssl.truststore.location", "ssl.keystore.location") if config.get(k)]
    keytab = keytab_of(config.get("sasl.jaas.config"))
    return all(os.path.exists(p) for p in paths + ([keytab] if keytab else []))
