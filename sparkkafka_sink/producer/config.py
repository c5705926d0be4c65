"""Producer configuration: the Java producer's key names, defaults and checks.

Each key is declared once, as a typed attribute of ``ProducerConfig`` holding its
``config_def.ConfigKey`` (kind, default, bounds, meaning), the
``sasl.*`` keys beside the SASL protocols (``sasl_keys``), as Java's
``ProducerConfig`` takes ``SaslConfigs``.  Values may arrive as strings (Spark options,
properties files), so each key parses its own value.  Every error names the key, the value and
what is allowed; an unknown key suggests the closest valid one.  Here are the rules that span
several keys.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from sparkkafka_sink.bootstrap import BOOTSTRAP_SERVERS
from sparkkafka_sink.config_def import (
    INT_MAX,
    LONG_MAX,
    ConfigDef,
    ConfigKey,
    Declared,
    Invalid,
    KeyGroup,
    Settings,
    declarations,
    text,
)
from sparkkafka_sink.errors import ConfigError, Message, Setting
from sparkkafka_sink.producer import java_keys
from sparkkafka_sink.sasl_keys import LOGIN_KEYS, SASL_KEYS
from sparkkafka_sink.security_protocol import SECURITY_PROTOCOL
from sparkkafka_sink.tls_keys import TLS_KEYS, TlsSettings

__all__ = ["KEYS", "ProducerConfig", "INT_MAX", "LONG_MAX", "read_properties", "java_key_status", "migration_table",
           "other_clients_noted"]

COMPRESSION_TYPES = ("none", "gzip", "snappy", "lz4", "zstd")
#: Azure Event Hubs' Kafka endpoint: its hosts, its largest request, the idle time it is given
#: (it closes connections idle for 240 s; Microsoft advises 180 s)
EVENT_HUBS_DOMAIN = ".servicebus.windows.net"
EVENT_HUBS_MAX_REQUEST = 1_046_528
EVENT_HUBS_IDLE_MS = 180_000
PARTITIONERS = ("murmur2", "round_robin", "random")
#: the batches ``send_batch`` fills where ``batch.size`` is not set: a bulk call encodes many
#: records per partition at once, and Java's 16 KiB would cap each batch (and so each Produce
#: request's share of a partition) at a sixteenth of this, for ~4x the CPU per byte
#: (benchmarks/README.md, "The producer alone")
BULK_BATCH_SIZE = 262_144


# -- values of their own shape --------------------------------------------------------------------


def _acks(value: object) -> int:
    v = value.strip().lower() if isinstance(value, str) else value
    if not isinstance(v, bool):
        for number, spellings in ((-1, ("all", -1, "-1")), (0, (0, "0")), (1, (1, "1"))):
            if v in spellings:
                return number
    raise Invalid()  # (what the key accepts)


def _gzip_level(value: object) -> int:
    try:
        level = _LEVEL.parse(value)
    except Invalid:
        level = 0
    if level == 0:
        raise Invalid()  # (what the key accepts)
    return level


_LEVEL = ConfigKey[int]("compression.gzip.level", "integer", None, "", minimum=-1, maximum=9)


def _partitioner(value: object) -> str | Callable[..., int]:
    if callable(value):
        partition: Callable[..., int] = value
        return partition
    return _PARTITIONER_NAMES.parse(value)


_PARTITIONER_NAMES = ConfigKey[str]("partitioner", "choice", None, "", choices=PARTITIONERS)


def _transactional_id(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Invalid()  # (what the key accepts)
    return value


# -- the keys: each a typed attribute of ProducerConfig, made by these ---------------------------
def _int_key(name: str, default: int, doc: str, lo: int = 0, hi: int = INT_MAX, **more: Any) -> Declared[int]:
    unit = "ms" if name.endswith(".ms") else "bytes" if name.endswith((".size", ".memory", ".bytes")) else ""
    return Declared(ConfigKey(name, "integer", default, doc, minimum=lo, maximum=hi, unit=unit, **more))


def _long_key(name: str, default: int, doc: str, lo: int = 0, **more: Any) -> Declared[int]:
    return _int_key(name, default, doc, lo, LONG_MAX, **more)


def _bool_key(name: str, default: bool, doc: str) -> Declared[bool]:
    return Declared(ConfigKey(name, "boolean", default, doc))


class ProducerConfig(Settings, Mapping[str, Any]):
    """Validated producer settings: each a typed attribute (``config.linger_ms``), declared once
    below -- the declarations parse, check, redact and document them (``KEYS``) -- and readable
    as a mapping by the Java key names too (``config["linger.ms"]``: the same parsed value), as
    code that takes any mapping of settings (the network layer's TLS and SASL readers) reads it."""

    bootstrap_servers: Declared[list[tuple[str, int]]] = Declared(BOOTSTRAP_SERVERS)
    client_id = Declared(text("client.id", "name sent to brokers in every request", "sparkkafka-sink"))
    acks: Declared[int] = Declared(ConfigKey(
        "acks", "custom", "all", "acknowledgements the leader waits for: 0, 1 or all (-1)", parser=_acks,
        accepts="one of all, -1, 0, 1"))
    linger_ms = _int_key("linger.ms", 5, "how long a batch waits for more records before it is sent")
    batch_size = _int_key("batch.size", 16384, "target size in bytes of one partition's batch (send_batch's batches: "
                          "262144 where it is not set, never above buffer.memory)")
    buffer_memory = _long_key("buffer.memory", 33554432, "bytes that buffered records may use")
    max_block_ms = _long_key("max.block.ms", 60000, "how long send()/partitions_for() may block")
    compression_type: Declared[str] = Declared(ConfigKey("compression.type", "choice", "none", "codec for record batches",
                                                         choices=COMPRESSION_TYPES))
    compression_gzip_level: Declared[int] = Declared(ConfigKey(
        "compression.gzip.level", "custom", -1, "gzip level, 1 (fastest) to 9 (smallest); -1: zlib's default, 6",
        parser=_gzip_level, accepts="a whole number from 1 to 9, or -1 (zlib's default)"))
    compression_lz4_level = _int_key("compression.lz4.level", 9,
                                     "lz4 level, 1 to 17; 9 (Java's default) is lz4's fast mode, any other level its "
                                     "high-compression mode (liblz4 applies levels 1-2 as its fast mode and caps the "
                                     "others at 12)", 1, 17)
    compression_zstd_level = _int_key("compression.zstd.level", 3, "zstd level, -131072 (fastest) to 22 (smallest)",
                                      -131072, 22)
    max_request_size = _int_key("max.request.size", 1048576, "largest request (and so record) the producer sends")
    retries = _int_key("retries", INT_MAX, "how many times a failed batch is resent")
    retry_backoff_ms = _long_key("retry.backoff.ms", 100, "wait before resending a failed batch")
    retry_backoff_max_ms = _long_key("retry.backoff.max.ms", 1000, "cap of the exponential retry backoff")
    delivery_timeout_ms = _int_key("delivery.timeout.ms", 120000, "upper bound on the time from send() to success or "
                                   "failure")
    request_timeout_ms = _int_key("request.timeout.ms", 30000, "how long to wait for a broker's answer before retrying")
    max_in_flight_requests_per_connection = _int_key("max.in.flight.requests.per.connection", 5,
                                                     "unanswered requests per broker connection", 1)
    enable_idempotence = _bool_key("enable.idempotence", True, "producer id + sequence numbers: no duplicates on retry")
    enable_metrics_push = _bool_key(
        "enable.metrics.push", True, "push this producer's metrics to the brokers whose client-metrics "
        "subscriptions ask for them (KIP-714, Apache Kafka 3.7+), as Java's client does")
    reconnect_backoff_ms = _long_key("reconnect.backoff.ms", 50, "first wait before reconnecting to a broker")
    reconnect_backoff_max_ms = _long_key("reconnect.backoff.max.ms", 1000, "cap of the exponential reconnect backoff")
    socket_connection_setup_timeout_ms = _long_key("socket.connection.setup.timeout.ms", 10000,
                                                   "how long a connection attempt may take")
    socket_connection_setup_timeout_max_ms = _long_key("socket.connection.setup.timeout.max.ms", 30000,
                                                       "cap of the growing connection timeout")
    connections_max_idle_ms = _long_key("connections.max.idle.ms", 540000, "close connections idle this long (-1: never)",
                                        -1)
    metadata_max_age_ms = _long_key("metadata.max.age.ms", 300000, "refresh metadata at least this often")
    metadata_max_idle_ms = _long_key("metadata.max.idle.ms", 300000, "forget topics not produced to for this long", 5000)
    allow_auto_create_topics = _bool_key("allow.auto.create.topics", True, "let Metadata requests create missing topics")
    partitioner: Declared[str | Callable[..., int]] = Declared(ConfigKey(
        "partitioner", "custom", "murmur2", "murmur2 (Java default), round_robin, random, or a callable",
        parser=_partitioner, accepts="one of murmur2, round_robin, random, or a callable",
        as_text=("one of murmur2, round_robin, random",
                 "murmur2 (Java default), round_robin or random (the standalone Producer also takes a callable; a "
                 "Spark option is a string)")))
    partitioner_ignore_keys = _bool_key("partitioner.ignore.keys", False, "spread keyed records like null keys")
    partitioner_adaptive_partitioning_enable = _bool_key(
        "partitioner.adaptive.partitioning.enable", True,
        "null keys (murmur2): switch less often to partitions whose broker has more queued bytes (KIP-794)")
    partitioner_availability_timeout_ms = _long_key(
        "partitioner.availability.timeout.ms", 0,
        "with adaptive partitioning: skip a partition whose broker took no batch for this long (0: never)")
    send_buffer_bytes = _int_key("send.buffer.bytes", -1, "SO_SNDBUF (-1: OS autotuning; Java's 131072 splits large "
                                 "requests into many writes)", -1)
    receive_buffer_bytes = _int_key("receive.buffer.bytes", 32768, "SO_RCVBUF (-1: OS default)", -1)
    security_protocol: Declared[str] = Declared(SECURITY_PROTOCOL)
    #: the TLS keys, read by the network layer (``tls_keys.TlsSettings``; ``config.tls``)
    _tls = KeyGroup(*TLS_KEYS)
    #: the SASL and token-login keys, read by the network layer (``network/sasl/settings.py``)
    _sasl_and_login = KeyGroup(*SASL_KEYS, *LOGIN_KEYS)
    transactional_id: Declared[str | None] = Declared(ConfigKey(
        "transactional.id", "custom", None,
        "makes the producer transactional: init_transactions(), begin/commit/abort_transaction()",
        parser=_transactional_id, accepts="a non-empty string (or unset)"))
    transaction_timeout_ms = _int_key("transaction.timeout.ms", 60000, "the coordinator aborts a transaction open this "
                                      "long", 1)

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any):
        given = dict(config._given if isinstance(config, ProducerConfig) else config or {})
        given.update({k.replace("_", "."): v for k, v in kwargs.items()})
        #: the settings as given (before parsing): what ``updated`` starts from
        self._given: dict[str, Any] = given
        values: dict[str, Any] = {}
        noted: dict[str, Message] = {}
        for key, raw in given.items():
            if key not in KEYS:
                verdict = java_keys.judge(key, raw)
                if verdict is None:
                    raise ConfigError(_unknown_key_message(key))
                status, why = verdict
                if status == java_keys.REFUSED:
                    raise ConfigError(Message("Configuration {!r} of the Java producer is not supported: {}",
                                              Setting(key), why))
                noted[key] = why
                continue
            values[key] = KEYS.parse(key, raw)
        if values.get("bootstrap.servers") is None:
            raise ConfigError(Message("Missing required configuration {!r} (a comma-separated host:port list)",
                                      Setting("bootstrap.servers")))
        self.explicit = frozenset(values)
        #: the Java producer's keys given that have no effect here -> why (``producer.java_keys``)
        self.noted: Mapping[str, Message] = noted  # (a dict: the config is pickled into Spark tasks)
        for name in KEYS:
            if name not in values:
                values[name] = KEYS.parse(name, None)
        self._values = values
        self._check_combinations()

    def _check_combinations(self) -> None:
        v = self._values
        linger_plus_request = v["linger.ms"] + v["request.timeout.ms"]
        if v["delivery.timeout.ms"] < linger_plus_request:
            if "delivery.timeout.ms" in self.explicit:
                raise ConfigError(Message(
                    "{} ({}) must be >= {} + {} ({} + {} = {})", Setting("delivery.timeout.ms"),
                    v["delivery.timeout.ms"], Setting("linger.ms"), Setting("request.timeout.ms"), v["linger.ms"],
                    v["request.timeout.ms"], linger_plus_request))
            v["delivery.timeout.ms"] = linger_plus_request
        if v["enable.idempotence"]:
            conflicts = []
            if v["acks"] != -1:
                conflicts.append(Message("{} must be 'all' (got {})", Setting("acks"), v["acks"]))
            if v["max.in.flight.requests.per.connection"] > 5:
                conflicts.append(Message("{} must be <= 5 (got {})", Setting("max.in.flight.requests.per.connection"),
                                         v["max.in.flight.requests.per.connection"]))
            if v["retries"] == 0:
                conflicts.append(Message("{} must be > 0", Setting("retries")))
            if conflicts:
                if "enable.idempotence" in self.explicit:
                    idempotence = Setting("enable.idempotence")
                    raise ConfigError(Message(
                        "{}=true conflicts with the configuration: " + "; ".join(["{}"] * len(conflicts))
                        + ". Set {}=false or fix those keys.", idempotence, *conflicts, idempotence))
                # As the Java client (>= 3.2): idempotence is on by default but silently
                # yields to settings the user chose explicitly.
                v["enable.idempotence"] = False
        if v["transactional.id"] is not None and not v["enable.idempotence"]:
            raise ConfigError(Message(
                "{} needs idempotence: {} must be true (and {}=all, {} > 0, {} <= 5)", Setting("transactional.id"),
                Setting("enable.idempotence"), Setting("acks"), Setting("retries"),
                Setting("max.in.flight.requests.per.connection")))
        self._event_hubs_limits()
        if v["buffer.memory"] < v["batch.size"]:
            raise ConfigError(Message("{} ({}) must be >= {} ({})", Setting("buffer.memory"), v["buffer.memory"],
                                      Setting("batch.size"), v["batch.size"]))

    def _event_hubs_limits(self) -> None:
        """Azure Event Hubs' Kafka endpoint (a ``*.servicebus.windows.net`` bootstrap host) takes
        gzip only and requests of at most 1,046,528 bytes, and closes connections idle for 240 s:
        a setting it would refuse is refused here, naming the limit; defaults are fitted to it."""
        v = self._values
        hosts = [h for h, _ in v["bootstrap.servers"] if h.lower().endswith(EVENT_HUBS_DOMAIN)]
        if not hosts:
            return
        where = f"Azure Event Hubs ({hosts[0]})"
        if v["compression.type"] not in ("none", "gzip"):
            raise ConfigError(Message("{} takes gzip compression only and refuses {}: set {} to gzip or none",
                                      where, v["compression.type"], Setting("compression.type")))
        if v["max.request.size"] > EVENT_HUBS_MAX_REQUEST:
            if "max.request.size" in self.explicit:
                raise ConfigError(Message("{} refuses requests over {} bytes: {} must be at most {} (got {})", where,
                                          EVENT_HUBS_MAX_REQUEST, Setting("max.request.size"), EVENT_HUBS_MAX_REQUEST,
                                          v["max.request.size"]))
            v["max.request.size"] = EVENT_HUBS_MAX_REQUEST
        for key in ("connections.max.idle.ms", "metadata.max.idle.ms"):  # as Microsoft advises
            if key not in self.explicit:
                v[key] = min(v[key], EVENT_HUBS_IDLE_MS) if v[key] >= 0 else EVENT_HUBS_IDLE_MS

    @property
    def tls(self) -> TlsSettings:
        """The ``ssl.*`` settings (``tls_keys``), typed."""
        return TlsSettings({key.name: self._values[key.name] for key in TLS_KEYS})

    @property
    def bulk_batch_size(self) -> int:
        """The size of the batches ``send_batch`` fills: ``batch.size`` where it was set, else
        ``BULK_BATCH_SIZE`` (never above ``buffer.memory``)."""
        if "batch.size" in self.explicit:
            return self._values["batch.size"]
        return max(self._values["batch.size"], min(BULK_BATCH_SIZE, self._values["buffer.memory"]))

    def updated(self, changes: Mapping[str, Any]) -> ProducerConfig:
        """This configuration with ``changes`` given too (a None value unsets the key), checked
        again as a whole."""
        given = {**self._given, **changes}
        return ProducerConfig({k: v for k, v in given.items() if v is not None})

    def portable(self) -> dict[str, Any]:
        """The settings as given, in a form JSON carries to another process: a callable by its
        ``"module:function"`` name (a ``ConfigError`` for one that cannot be imported by name)."""
        out: dict[str, Any] = {}
        for key, value in self._given.items():
            if callable(value):
                name = f"{getattr(value, '__module__', '')}:{getattr(value, '__qualname__', '')}"
                if name.startswith(":") or name.endswith(":") or "<" in name:
                    raise ConfigError(Message("{} must be importable by name for another process (an "
                                              "'module:function' string, or a module-level function), got {!r}",
                                              Setting(key), value))
                value = name
            out[key] = value
        return out

    __eq__ = Mapping.__eq__  # (equal to any mapping of the same values, as before it was typed)

    def __getitem__(self, key: str) -> Any:
        try:
            return self._values[key]
        except KeyError:
            raise KeyError(_unknown_key_message(key)) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"ProducerConfig({KEYS.redacted(self._values)!r})"


#: every key of the producer, by its Java name, as ``ProducerConfig`` declares them
KEYS = ConfigDef(declarations(ProducerConfig))


def _unknown_key_message(key: str) -> Message:
    """The unknown key, the likeliest meant, and a few near it -- not all of them (a message
    read in a Spark error must fit in a few lines; every key is in the configuration reference)."""
    known = [*KEYS, *java_keys.accepted_or_explained()]  # a Java key we refuse or note is meant too
    close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
    near = [k for k in difflib.get_close_matches(str(key), known, n=5, cutoff=0.3) if k not in close][:4]
    template = "Unknown configuration {!r}."
    if close:
        template += " Did you mean {!r}?"
    if near:
        template += " Near it: " + ", ".join(["{!r}"] * len(near)) + "."
    return Message(template + " Every key: the configuration reference.", *map(Setting, [key, *close, *near]))


def java_key_status(key: str) -> str | None:
    """HONOURED, NOTED or REFUSED for a Java producer key (whatever its value); None for a key
    Java's producer does not have (``producer.java_keys``)."""
    return java_keys.HONOURED if key in KEYS else java_keys.rule_status(key)


def migration_table() -> list[tuple[str, str, str, str]]:
    """One row per Java key: the key, the kafka-clients lines that have it, its status and what
    happens here (the docs' migration table, ``docs/reference/java-keys.md``)."""
    docs = {name: key.doc for name, key in KEYS.items()}
    return [(key, lines, java_key_status(key) or "", java_keys.explained(key) or docs.get(key, ""))
            for key, lines in sorted(java_keys.JAVA_PRODUCER_KEYS.items())]


def other_clients_noted() -> list[str]:
    """The Java consumer's and admin client's keys noted here (the producer lacks them)."""
    return sorted(java_keys.OTHER_CLIENT_KEYS - set(KEYS))


def read_properties(path: str) -> dict:
    """Read a Java-style ``key=value`` properties file (``#``/``!`` comments).

    A Java client's properties file (``--command-config``, ``producer.properties``): its keys
    are this producer's; the Spark sink takes each as a ``kafka.<key>`` option.
    """
    props = {}
    with open(path, encoding="utf-8") as fh:
        for lineno, raw in enumerate(fh, 1):
            line = raw.strip()
            if not line or line[0] in "#!":
                continue
            sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
            if sep < 0:
                raise ValueError(f"{path}:{lineno}: expected key=value, got {line!r}")
            props[line[:sep].strip()] = line[sep + 1:].strip()
    return props
