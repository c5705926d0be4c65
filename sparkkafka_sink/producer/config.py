"""Producer configuration: the Java producer's key names, defaults and checks.

Values may arrive as strings (Spark options, properties files), so each key
parses its own value.  Every error names the key, the value and what is
allowed; an unknown key suggests the closest valid one.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from sparkkafka_sink.errors import ConfigError, Message, Setting
from sparkkafka_sink.producer import java_keys
from sparkkafka_sink.redaction import REDACTED, is_secret_key, redact
from sparkkafka_sink.security_protocol import parse_security_protocol

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1

COMPRESSION_TYPES = ("none", "gzip", "snappy", "lz4", "zstd")
#: Azure Event Hubs' Kafka endpoint: its hosts, its largest request, the idle time it is given
#: (it closes connections idle for 240 s; Microsoft advises 180 s)
EVENT_HUBS_DOMAIN = ".servicebus.windows.net"
EVENT_HUBS_MAX_REQUEST = 1_046_528
EVENT_HUBS_IDLE_MS = 180_000
PARTITIONERS = ("murmur2", "round_robin", "random")


@dataclass(frozen=True)
class _Key:
    name: str
    default: Any
    parse: Callable[[str, Any], Any]
    doc: str


def _fail(key: str, value: Any, allowed: str) -> ConfigError:
    shown = REDACTED if is_secret_key(key) else repr(value)
    return ConfigError(Message("Invalid value {} for configuration {!r}: expected {}", shown, Setting(key), allowed))


def _int(lo: int, hi: int = INT_MAX) -> Callable[[str, Any], int]:
    def parse(key: str, value: Any) -> int:
        allowed = f"an integer in [{lo}, {hi}]"
        if isinstance(value, bool):
            raise _fail(key, value, allowed)
        if isinstance(value, str):
            try:
                value_i = int(value.strip())
            except ValueError:
                raise _fail(key, value, allowed) from None
        elif isinstance(value, int):
            value_i = value
        elif isinstance(value, float) and value.is_integer():
            value_i = int(value)
        else:
            raise _fail(key, value, allowed)
        if not lo <= value_i <= hi:
            raise _fail(key, value, allowed)
        return value_i

    return parse


def _bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise _fail(key, value, "true or false")


def _choice(options: tuple[str, ...], lower: bool = True) -> Callable[[str, Any], str]:
    def parse(key: str, value: Any) -> str:
        if isinstance(value, str):
            v = value.strip().lower() if lower else value.strip()
            if v in options:
                return v
        raise _fail(key, value, "one of " + ", ".join(options))

    return parse


def _str(key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise _fail(key, value, "a string")
    return value


def _callable_or_str(key: str, value: Any) -> Callable[..., Any] | str:
    if callable(value) or isinstance(value, str):
        return value
    raise _fail(key, value, "a callable or an importable 'module:function' string")


def _float(lo: float, hi: float) -> Callable[[str, Any], float]:
    def parse(key: str, value: Any) -> float:
        try:
            f = float(value)
        except (TypeError, ValueError):
            raise _fail(key, value, f"a number in [{lo}, {hi}]") from None
        if isinstance(value, bool) or not lo <= f <= hi:
            raise _fail(key, value, f"a number in [{lo}, {hi}]")
        return f

    return parse


def _gzip_level(key: str, value: Any) -> int:
    try:
        level = _int(-1, 9)(key, value)
    except ConfigError:
        level = 0
    if level == 0:
        raise _fail(key, value, "an integer in [1, 9] or -1 (zlib's default)")
    return level


def _acks(key: str, value: Any) -> int:
    v = value.strip().lower() if isinstance(value, str) else value
    if isinstance(v, bool):
        raise _fail(key, value, "one of all, -1, 0, 1")
    if v == "all" or v in (-1, "-1"):
        return -1
    if v in (0, "0"):
        return 0
    if v in (1, "1"):
        return 1
    raise _fail(key, value, "one of all, -1, 0, 1")


def parse_bootstrap(key: str, value: Any) -> list[tuple[str, int]]:
    """'h1:9092,h2:9093' (or a list of such) -> [(host, port), ...]."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise _fail(key, value, "a comma-separated list of host:port")
    out = []
    for item in items:
        item = str(item).strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        host = host.strip("[]")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(Message("Invalid value {!r} for configuration {!r}: {!r} is not host:port with a port "
                                      "in [1, 65535]", value, Setting(key), item))
        out.append((host, int(port)))
    if not out:
        raise _fail(key, value, "at least one host:port")
    return out


def _partitioner(key: str, value: Any) -> Callable[..., Any] | str:
    if callable(value):
        return value
    return _choice(PARTITIONERS)(key, value)


def _transactional_id(key: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _fail(key, value, "a non-empty string (or unset)")
    return value


_KEYS = [
    _Key("bootstrap.servers", None, parse_bootstrap, "host:port list used to discover the cluster"),
    _Key("client.id", "sparkkafka-sink", _str, "name sent to brokers in every request"),
    _Key("acks", "all", _acks, "acknowledgements the leader waits for: 0, 1 or all (-1)"),
    _Key("linger.ms", 5, _int(0), "how long a batch waits for more records before it is sent"),
    _Key("batch.size", 16384, _int(0), "target size in bytes of one partition's batch"),
    _Key("buffer.memory", 33554432, _int(0, LONG_MAX), "bytes that buffered records may use"),
    _Key("max.block.ms", 60000, _int(0, LONG_MAX), "how long send()/partitions_for() may block"),
    _Key("compression.type", "none", _choice(COMPRESSION_TYPES), "codec for record batches"),
    _Key("compression.gzip.level", -1, _gzip_level, "gzip level, 1 (fastest) to 9 (smallest); -1: zlib's default, 6"),
    _Key("compression.lz4.level", 9, _int(1, 17),
         "lz4 level, 1 to 17; 9 (Java's default) is lz4's fast mode, any other level its high-compression "
         "mode (liblz4 applies levels 1-2 as its fast mode and caps the others at 12)"),
    _Key("compression.zstd.level", 3, _int(-131072, 22), "zstd level, -131072 (fastest) to 22 (smallest)"),
    _Key("max.request.size", 1048576, _int(0), "largest request (and so record) the producer sends"),
    _Key("retries", INT_MAX, _int(0), "how many times a failed batch is resent"),
    _Key("retry.backoff.ms", 100, _int(0, LONG_MAX), "wait before resending a failed batch"),
    _Key("retry.backoff.max.ms", 1000, _int(0, LONG_MAX), "cap of the exponential retry backoff"),
    _Key("delivery.timeout.ms", 120000, _int(0), "upper bound on the time from send() to success or failure"),
    _Key("request.timeout.ms", 30000, _int(0), "how long to wait for a broker's answer before retrying"),
    _Key("max.in.flight.requests.per.connection", 5, _int(1), "unanswered requests per broker connection"),
    _Key("enable.idempotence", True, _bool, "producer id + sequence numbers: no duplicates on retry"),
    _Key("reconnect.backoff.ms", 50, _int(0, LONG_MAX), "first wait before reconnecting to a broker"),
    _Key("reconnect.backoff.max.ms", 1000, _int(0, LONG_MAX), "cap of the exponential reconnect backoff"),
    _Key("socket.connection.setup.timeout.ms", 10000, _int(0, LONG_MAX), "how long a connection attempt may take"),
    _Key("socket.connection.setup.timeout.max.ms", 30000, _int(0, LONG_MAX), "cap of the growing connection timeout"),
    _Key("connections.max.idle.ms", 540000, _int(-1, LONG_MAX), "close connections idle this long (-1: never)"),
    _Key("metadata.max.age.ms", 300000, _int(0, LONG_MAX), "refresh metadata at least this often"),
    _Key("metadata.max.idle.ms", 300000, _int(5000, LONG_MAX), "forget topics not produced to for this long"),
    _Key("allow.auto.create.topics", True, _bool, "let Metadata requests create missing topics"),
    _Key("partitioner", "murmur2", _partitioner, "murmur2 (Java default), round_robin, random, or a callable"),
    _Key("partitioner.ignore.keys", False, _bool, "spread keyed records like null keys"),
    _Key("partitioner.adaptive.partitioning.enable", True, _bool,
         "null keys (murmur2): switch less often to partitions whose broker has more queued bytes (KIP-794)"),
    _Key("partitioner.availability.timeout.ms", 0, _int(0, LONG_MAX),
         "with adaptive partitioning: skip a partition whose broker took no batch for this long (0: never)"),
    _Key("send.buffer.bytes", -1, _int(-1),
         "SO_SNDBUF (-1: OS autotuning; Java's 131072 splits large requests into many writes)"),
    _Key("receive.buffer.bytes", 32768, _int(-1), "SO_RCVBUF (-1: OS default)"),
    _Key("security.protocol", "PLAINTEXT", parse_security_protocol,
         "PLAINTEXT, SSL (TLS), SASL_PLAINTEXT or SASL_SSL (SASL over TLS)"),
    _Key("ssl.truststore.location", None, _str,
         "CA certificates to trust: a PEM, PKCS12 or JKS file (default: system CAs)"),
    _Key("ssl.truststore.type", None, _str,
         "PEM, PKCS12 or JKS (default: from the file's content; JKS and PKCS12 accept either, as in Java)"),
    _Key("ssl.truststore.password", None, _str,
         "password of a PKCS12 or JKS truststore (a JKS one is read without it unchecked, as Java does)"),
    _Key("ssl.truststore.certificates", None, _str, "CA certificates as PEM text (instead of a file)"),
    _Key("ssl.keystore.location", None, _str,
         "mutual TLS: client key and certificate, a PEM, PKCS12 or JKS file (JKS: the [jks] extra)"),
    _Key("ssl.keystore.type", None, _str,
         "PEM, PKCS12 or JKS (default: from the file's content; JKS and PKCS12 accept either, as in Java)"),
    _Key("ssl.keystore.password", None, _str, "password of a PKCS12 or JKS keystore"),
    _Key("ssl.keystore.certificate.chain", None, _str, "mutual TLS: client certificate chain as PEM text"),
    _Key("ssl.keystore.key", None, _str, "mutual TLS: client private key as PEM text"),
    _Key("ssl.key.password", None, _str,
         "password of an encrypted PEM private key, or of a JKS keystore's key (default: ssl.keystore.password)"),
    _Key("ssl.endpoint.identification.algorithm", "https", _str,
         "'https' verifies the broker's host name against its certificate; '' turns that off"),
    _Key("ssl.enabled.protocols", "TLSv1.2,TLSv1.3", _str, "TLS versions allowed"),
    _Key("ssl.protocol", "TLSv1.3", _str, "highest TLS version offered (TLSv1.3, TLSv1.2)"),
    _Key("ssl.cipher.suites", None, _str, "TLS 1.2 cipher suites (Java/IANA or OpenSSL names; default: OpenSSL's)"),
    _Key("sasl.mechanism", None, _str, "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, AWS_MSK_IAM or GSSAPI (Kerberos)"),
    _Key("sasl.jaas.config", None, _str, "credentials as Java users write them (PlainLoginModule, ScramLoginModule, "
                                          "OAuthBearerLoginModule)"),
    _Key("sasl.client.callback.handler.class", None, _str,
         "Java's class name, honoured where it names what is built in: Amazon MSK's IAMClientCallbackHandler "
         "(AWS_MSK_IAM) or IAMOAuthBearerLoginCallbackHandler (OAUTHBEARER); any other class is refused"),
    _Key("sasl.login.callback.handler.class", None, _str,
         "Java's class name, honoured where it names what is built in: Kafka's OAuthBearerLoginCallbackHandler "
         "(with sasl.oauthbearer.token.endpoint.url), Amazon MSK's IAMOAuthBearerLoginCallbackHandler (the MSK "
         "IAM token) or Google's GcpLoginCallbackHandler (the Managed Kafka token); any other class is refused"),
    _Key("sasl.aws.region", None, _str,
         "Amazon MSK IAM: the cluster's AWS region (not Java's key; default: the region in the broker host names, "
         "else AWS_REGION, AWS_DEFAULT_REGION or the profile's region)"),
    _Key("sasl.kerberos.service.name", None, _str,
         "GSSAPI (Kerberos): the brokers' service name, their principals being <name>/<host>@REALM (usually kafka; "
         "or serviceName in the Krb5LoginModule line)"),
    _Key("sasl.username", None, _str, "user name for PLAIN/SCRAM (instead of sasl.jaas.config)"),
    _Key("sasl.password", None, _str, "password for PLAIN/SCRAM (instead of sasl.jaas.config)"),
    _Key("sasl.oauthbearer.token.provider", None, _callable_or_str,
         "OAUTHBEARER: a callable (or 'module:function') returning a token"),
    _Key("sasl.oauthbearer.token.endpoint.url", None, _str, "OAUTHBEARER: OIDC token endpoint (client credentials)"),
    _Key("sasl.oauthbearer.client.id", None, _str, "OAUTHBEARER/OIDC client id"),
    _Key("sasl.oauthbearer.client.secret", None, _str, "OAUTHBEARER/OIDC client secret"),
    _Key("sasl.oauthbearer.scope", None, _str, "OAUTHBEARER/OIDC scope"),
    _Key("sasl.oauthbearer.extensions", None, _str, "OAUTHBEARER SASL extensions: k=v,k2=v2"),
    _Key("sasl.oauthbearer.client.credentials.client.id", None, _str,
         "OAUTHBEARER/OIDC client id (Kafka 4's name of sasl.oauthbearer.client.id)"),
    _Key("sasl.oauthbearer.client.credentials.client.secret", None, _str,
         "OAUTHBEARER/OIDC client secret (Kafka 4's name of sasl.oauthbearer.client.secret)"),
    _Key("sasl.oauthbearer.header.urlencode", False, _bool,
         "URL-encode the client id and secret in the token request's Basic header (RFC 6749)"),
    _Key("sasl.oauthbearer.sub.claim.name", "sub", _str, "the token claim naming the principal"),
    _Key("sasl.oauthbearer.scope.claim.name", "scope", _str,
         "the token claim holding its scope (a string or a list of strings, checked)"),
    _Key("sasl.login.connect.timeout.ms", None, _int(0),
         "connect timeout of a token endpoint request (unset: 10000)"),
    _Key("sasl.login.read.timeout.ms", None, _int(0),
         "read timeout of a token endpoint request (unset: 10000)"),
    _Key("sasl.login.retry.backoff.ms", 100, _int(0, LONG_MAX), "first wait before retrying a token request"),
    _Key("sasl.login.retry.backoff.max.ms", 10000, _int(0, LONG_MAX),
         "time allowed for retrying a token request (its backoff doubles up to this)"),
    _Key("sasl.login.refresh.window.factor", 0.8, _float(0.5, 1.0),
         "refresh an OAUTHBEARER token once this fraction of its lifetime has passed"),
    _Key("sasl.login.refresh.window.jitter", 0.05, _float(0.0, 0.25),
         "random extra fraction of the lifetime added to the refresh time"),
    _Key("sasl.login.refresh.min.period.seconds", 60, _int(0, 900),
         "refresh a token no sooner than this after the previous fetch"),
    _Key("sasl.login.refresh.buffer.seconds", 300, _int(0, 3600),
         "refresh a token at least this long before it expires"),
    _Key("transactional.id", None, _transactional_id,
         "makes the producer transactional: init_transactions(), begin/commit/abort_transaction()"),
    _Key("transaction.timeout.ms", 60000, _int(1), "the coordinator aborts a transaction open this long"),
]
KEYS: dict[str, _Key] = {k.name: k for k in _KEYS}


class ProducerConfig(Mapping[str, Any]):
    """Validated producer settings; read like a dict with the Java key names."""

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any):
        given = dict(config._given if isinstance(config, ProducerConfig) else config or {})
        given.update({k.replace("_", "."): v for k, v in kwargs.items()})
        #: the settings as given (before parsing): what ``updated`` starts from
        self._given: dict[str, Any] = given
        values: dict[str, Any] = {}
        noted: dict[str, Message] = {}
        for key, raw in given.items():
            spec = KEYS.get(key)
            if spec is None:
                verdict = java_keys.judge(key, raw)
                if verdict is None:
                    raise ConfigError(_unknown_key_message(key))
                status, why = verdict
                if status == java_keys.REFUSED:
                    raise ConfigError(Message("Configuration {!r} of the Java producer is not supported: {}",
                                              Setting(key), why))
                noted[key] = why
                continue
            values[key] = spec.parse(key, raw) if raw is not None or spec.default is None else spec.parse(key, spec.default)
        if values.get("bootstrap.servers") is None:
            raise ConfigError(Message("Missing required configuration {!r} (a comma-separated host:port list)",
                                      Setting("bootstrap.servers")))
        self.explicit = frozenset(values)
        #: the Java producer's keys given that have no effect here -> why (``producer.java_keys``)
        self.noted: Mapping[str, Message] = noted  # (a dict: the config is pickled into Spark tasks)
        for spec in _KEYS:
            if spec.name not in values:
                values[spec.name] = spec.parse(spec.name, spec.default) if spec.default is not None else None
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
        return f"ProducerConfig({redact(self._values)!r})"


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


def describe() -> list[tuple[str, Any, str]]:
    """(key, default, doc) for every key: the README's config table comes from here."""
    return [(k.name, k.default, k.doc) for k in _KEYS]


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
