"""Parse the sink's ``.option(...)`` map into the producer config and sink settings.

Spark passes options as a case-insensitive map of strings.  Keys prefixed with
``kafka.`` configure the producer (prefix stripped, Java key names), exactly as
Spark's built-in Kafka sink does; ``topic`` names the default topic.  Everything
is checked on the driver, so a typo fails the write before any task starts; the
resulting ``SinkOptions`` travel in the plan (``plan.py``) to every task.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import logging
import os
import re
from collections.abc import Mapping
from typing import Any

from sparkkafka_sink.config_def import Invalid
from sparkkafka_sink.errors import ConfigError
from sparkkafka_sink.exactly_once.ids import WriteId, new_run
from sparkkafka_sink.producer.config import KEYS, ProducerConfig
from sparkkafka_sink.sasl_keys import JAAS_CONFIG
from sparkkafka_sink.spark import option_catalog as catalog
from sparkkafka_sink.spark.formats import Formats, parse_formats
from sparkkafka_sink.spark.option_catalog import (
    EXACTLY_ONCE_TIMEOUT_MS,
    REJECTED_KAFKA_KEYS,
    SINK_LINGER_MS,
    SinkSettings,
)
from sparkkafka_sink.spark.properties_file import with_properties_file
from sparkkafka_sink.spark.sink_errors import (
    KAFKA_PREFIX,
    REGISTRY_PREFIX,
    SERVICE_CREDENTIAL_KEY,
    SinkValidationError,
    in_option_names,
)

log = logging.getLogger(__name__)


#: options Spark itself may add (``save(path)``, ``start(path)``): not ours, not a typo
_SPARK_OPTIONS = ("path",)


class SinkOptions(SinkSettings):
    """What a write task needs from the options; pickled into every task.

    Every sink option is a typed attribute, declared once (``option_catalog.SinkSettings``:
    ``options.coalesce_bytes``, ``options.errors_deadletterqueue_topic_name``, ...) --
    ``transactional_id_prefix`` holding the prefix in use under exactly-once (given, or made from
    the target or the query: the option's documented default), None under at-least-once -- and
    beside them what the driver derives: the producer's configuration, the columns' formats, the
    write's owner and run."""

    def __init__(self, values: Mapping[str, Any], producer_config: ProducerConfig | Mapping[str, Any],
                 formats: Formats | None = None, *, streaming: bool = False, owner: str = "", run: str = ""):
        super().__init__(values)
        #: the ``kafka.*`` options, validated by the producer's own configuration (a mapping given
        #: here is validated on construction)
        self.producer_config = (producer_config if isinstance(producer_config, ProducerConfig)
                                else ProducerConfig(producer_config))
        #: how the key and value columns become bytes (``spark/formats.py``)
        self.formats = formats or Formats()
        #: a writeStream query's writer (each micro-batch's tasks name theirs)
        self.streaming = streaming
        #: exactly-once: the driver that owns the write (``exactly_once.owner``; set when the driver
        #: starts the write) and this write's own run (a streaming query's: this run of it), so its
        #: transactional ids are its own even where the prefix repeats
        self.owner = owner
        self.run = run

    def owned_by(self, owner: str) -> SinkOptions:
        """These options of a write the driver ``owner`` started."""
        owned = copy.copy(self)
        owned.owner = owner
        return owned

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{host}:{port}" for host, port in self.producer_config.bootstrap_servers)

    @property
    def exactly_once(self) -> bool:
        return self.transactional_id_prefix is not None

    @property
    def tolerate_bad_rows(self) -> bool:
        """``errors.tolerance=all``: bad rows are skipped (and dead-lettered when a DLQ topic is set)."""
        return self.errors_tolerance == "all"

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
    linger = ProducerConfig.linger_ms.key.name
    if linger not in config:
        config[linger] = str(_sink_linger_ms(config))
    return config


def _sink_linger_ms(config: Mapping[str, str]) -> int:
    """``SINK_LINGER_MS``, less where an explicit delivery.timeout.ms leaves less room beside
    request.timeout.ms (the producer asks delivery >= linger + request)."""
    delivery, request = ProducerConfig.delivery_timeout_ms.key, ProducerConfig.request_timeout_ms.key
    if delivery.name not in config:
        return SINK_LINGER_MS
    try:
        room = delivery.parse(config[delivery.name]) - request.parse(config.get(request.name))
    except Invalid:
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
    given = SinkSettings(catalog.parse_all(lowered, catalog.SINK_OPTIONS))
    raw = producer_config_from_options(lowered)
    _service_credential(given, raw)
    for key, why in REJECTED_KAFKA_KEYS.items():
        if key in raw:
            raise SinkValidationError(f"option 'kafka.{key}' is not supported: {why}")
    if given.delivery_guarantee == "exactly-once":
        # a task's transaction stays open until the driver commits the whole job
        raw.setdefault(ProducerConfig.transaction_timeout_ms.key.name, str(EXACTLY_ONCE_TIMEOUT_MS))
    config = _producer_config(raw)
    for key, why in config.noted.items():  # Java producer keys with no effect here (producer/java_keys.py)
        log.warning("option '%s%s' has no effect with pyprod-kafka: %s", KAFKA_PREFIX, key, in_option_names(why))
    prefix = _exactly_once(given, lowered, config, streaming)
    _check_dead_letters(given)
    _check_trace_headers(given)
    values = {**given._values, SinkSettings.transactional_id_prefix.key.name: prefix}
    return SinkOptions(values, config, parse_formats(lowered, from_file), streaming=streaming,
                       run=new_run() if prefix else "")


def _check_trace_headers(given: SinkSettings) -> None:
    """``traceHeaders=task`` writes the task's span: it needs OpenTelemetry, traced."""
    if given.trace_headers != "task":
        return
    if not given.open_telemetry:
        raise SinkValidationError("option 'traceHeaders' is 'task', which writes each task's span, but "
                                  "'openTelemetry' is false: drop one of them")
    from sparkkafka_sink import otel

    if not otel.available():
        raise SinkValidationError(
            "option 'traceHeaders' is 'task', which writes each task's OpenTelemetry span, but OpenTelemetry is "
            "not installed: pip install 'sparkkafka-sink[otel]' (where the driver and the tasks run), with an SDK "
            "set up there (option 'openTelemetrySetup')")


def _service_credential(given: SinkSettings, raw: dict) -> None:
    """``databricks.serviceCredential`` as the producer's key, with SASL_SSL unless a protocol is given."""
    if given.databricks_service_credential_scope is not None:
        raise SinkValidationError(
            "option 'databricks.serviceCredential.scope' is not used here: drop it (an AWS IAM role needs no scope, "
            "Google's Managed Kafka token is made with the cloud-platform scope, and Azure Event Hubs signs in with "
            "its connection string)")
    name = given.databricks_service_credential
    if name is not None:
        raw[SERVICE_CREDENTIAL_KEY] = name
        raw.setdefault(ProducerConfig.security_protocol.key.name, "SASL_SSL")


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


def _check_dead_letters(given: SinkSettings) -> None:
    dlq, topic = given.errors_deadletterqueue_topic_name, given.topic
    if dlq is None:
        return
    if given.errors_tolerance != "all":
        raise SinkValidationError("option 'errors.deadletterqueue.topic.name' needs errors.tolerance=all (with none "
                                  "the first bad row fails the task, so nothing is dead-lettered)")
    if dlq == topic:
        raise SinkValidationError("option 'errors.deadletterqueue.topic.name' names the topic the rows are written "
                                  f"to, {dlq!r}: bad rows need a topic of their own")


def _exactly_once(given: SinkSettings, lowered: Mapping[str, str], config: ProducerConfig,
                  streaming: bool = False) -> str | None:
    """The transactional id prefix under exactly-once (None: at-least-once); checks the producer
    options that would break it."""
    prefix = given.transactional_id_prefix
    if given.delivery_guarantee == "at-least-once":
        for option, value in ((SinkSettings.transactional_id_prefix, prefix), (SinkSettings.batch_id, given.batch_id)):
            if value is not None:
                raise SinkValidationError(f"option '{option.key.name}' needs deliveryGuarantee=exactly-once")
        return None
    if config.acks != -1:
        raise SinkValidationError(f"deliveryGuarantee=exactly-once needs kafka.acks=all, got {config.acks}")
    if config.transaction_timeout_ms < MIN_EXACTLY_ONCE_TIMEOUT_MS:
        raise SinkValidationError(
            f"deliveryGuarantee=exactly-once needs kafka.transaction.timeout.ms of at least "
            f"{MIN_EXACTLY_ONCE_TIMEOUT_MS}, got {config.transaction_timeout_ms}: a task's transaction stays open "
            "until the driver commits the whole job, and the commit alone needs 30 s of it")
    if not config.enable_idempotence:
        raise SinkValidationError("deliveryGuarantee=exactly-once needs idempotence: drop kafka.enable.idempotence=false")
    if not files_here(config):
        raise SinkValidationError(
            "deliveryGuarantee=exactly-once: the driver commits the tasks' transactions, so it connects to the "
            "cluster as they do, but a file named by kafka.ssl.truststore.location, kafka.ssl.keystore.location or "
            "the keyTab of kafka.sasl.jaas.config is not on the driver: give a path that exists on the driver and "
            "the executors, or the certificates inline as PEM")
    if prefix is not None:
        return prefix
    if (streaming or given.batch_id is not None) and not given.checkpoint_location:
        raise SinkValidationError(
            "deliveryGuarantee=exactly-once on writeStream (or with batchId in foreachBatch) needs "
            ".option(\"checkpointLocation\", path) -- in foreachBatch the query's own -- or a transactionalIdPrefix "
            "of the query's own: the query's decisions are kept under it, so that a micro-batch replayed after a "
            "restart is not written twice")
    if streaming or given.batch_id is not None:
        # the query's own: stable across restarts, so leftovers of a crashed run are found
        location = checkpoint_identity(given.checkpoint_location or "")
        return f"pyprod-kafka-q{hashlib.sha1(location.encode()).hexdigest()[:16]}"
    # the target's: a later write to it finds what a crashed one left open (driver/lease.py);
    # writes running at once have runs of their own under it (the servers as given: a prefix
    # once made stays the same)
    target = "|".join(sorted(str(lowered["kafka.bootstrap.servers"]).split(",")) + [given.topic or ""])
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


def files_here(config: ProducerConfig) -> bool:
    """The files the producer options name -- the TLS stores, a Krb5LoginModule's keytab -- exist
    here on the driver (on a cluster they may be shipped to the executors only, with --files or
    addFile, and named by their base name): only then can the driver check them, or connect as
    the tasks will."""
    from sparkkafka_sink.network.sasl.jaas import keytab_of  # (see _producer_config)

    paths = [path for path in (config.tls.ssl_truststore_location, config.tls.ssl_keystore_location) if path]
    keytab = keytab_of(config.get(JAAS_CONFIG.name))
    return all(os.path.exists(p) for p in paths + ([keytab] if keytab else []))
