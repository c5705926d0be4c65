"""Every configuration key of the Java producer, and what each one does here.

Source: ``ProducerConfig.configNames()`` of kafka-clients 3.9.1 and 4.4.0 (Apache Kafka's
``clients/src/main/java/org/apache/kafka/clients/producer/ProducerConfig.java``, which includes
the ``CommonClientConfigs``, ``SslConfigs`` and ``SaslConfigs`` keys of a client).  The test
``tests/oracle/test_java_keys_match_java.py`` asks those jars for the list and fails when a
Java key is missing here.

A job's ``kafka.*`` options must carry over from Spark's ``format("kafka")``, which hands every
key to kafka-clients, so each Java key is exactly one of:

* **honoured** -- a key of ``producer.config`` (``KEYS``), applied by this producer
  (``producer.config.java_key_status``);
* **noted** -- accepted; it has no effect here, and ``ProducerConfig.noted`` says why (the Spark
  driver logs that line once per write);
* **refused** -- ``ConfigError`` with the key's own reason and the way to get the same here.
  Some refused keys are accepted (noted) with the values that ask for what happens here anyway
  (``partitioner.class`` naming Kafka's default partitioner, an empty ``interceptor.classes``).

The Java consumer's and admin client's own keys (``OTHER_CLIENT_KEYS``: a properties file shared
by a job's clients gives them to the producer, which Java's producer only warns about) are noted.
Our own keys that Java lacks (``partitioner``, ``sasl.username``...) are honoured; they are not
listed here.  ``producer.config.migration_table()`` is the docs' table of them
(``docs/reference/java-keys.md``); this module knows nothing of ``producer.config`` (which reads it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from sparkkafka_sink.errors import Message, Setting

HONOURED = "honoured"
NOTED = "noted"
REFUSED = "refused"

#: the keys of both kafka-clients 3.9 and 4.x
_BOTH = """
acks batch.size bootstrap.servers buffer.memory client.dns.lookup client.id compression.gzip.level
compression.lz4.level compression.type compression.zstd.level connections.max.idle.ms delivery.timeout.ms
enable.idempotence enable.metrics.push interceptor.classes key.serializer linger.ms max.block.ms
max.in.flight.requests.per.connection max.request.size metadata.max.age.ms metadata.max.idle.ms
metadata.recovery.strategy metric.reporters metrics.num.samples metrics.recording.level
metrics.sample.window.ms partitioner.adaptive.partitioning.enable partitioner.availability.timeout.ms
partitioner.class partitioner.ignore.keys receive.buffer.bytes reconnect.backoff.max.ms
reconnect.backoff.ms request.timeout.ms retries retry.backoff.max.ms retry.backoff.ms
sasl.client.callback.handler.class sasl.jaas.config sasl.kerberos.kinit.cmd
sasl.kerberos.min.time.before.relogin sasl.kerberos.service.name sasl.kerberos.ticket.renew.jitter
sasl.kerberos.ticket.renew.window.factor sasl.login.callback.handler.class sasl.login.class
sasl.login.connect.timeout.ms sasl.login.read.timeout.ms sasl.login.refresh.buffer.seconds
sasl.login.refresh.min.period.seconds sasl.login.refresh.window.factor sasl.login.refresh.window.jitter
sasl.login.retry.backoff.max.ms sasl.login.retry.backoff.ms sasl.mechanism
sasl.oauthbearer.clock.skew.seconds sasl.oauthbearer.expected.audience sasl.oauthbearer.expected.issuer
sasl.oauthbearer.header.urlencode sasl.oauthbearer.jwks.endpoint.refresh.ms
sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms sasl.oauthbearer.jwks.endpoint.retry.backoff.ms
sasl.oauthbearer.jwks.endpoint.url sasl.oauthbearer.scope.claim.name sasl.oauthbearer.sub.claim.name
sasl.oauthbearer.token.endpoint.url security.protocol security.providers send.buffer.bytes
socket.connection.setup.timeout.max.ms socket.connection.setup.timeout.ms ssl.cipher.suites
ssl.enabled.protocols ssl.endpoint.identification.algorithm ssl.engine.factory.class ssl.key.password
ssl.keymanager.algorithm ssl.keystore.certificate.chain ssl.keystore.key ssl.keystore.location
ssl.keystore.password ssl.keystore.type ssl.protocol ssl.provider ssl.secure.random.implementation
ssl.trustmanager.algorithm ssl.truststore.certificates ssl.truststore.location ssl.truststore.password
ssl.truststore.type transaction.timeout.ms transactional.id value.serializer
""".split()
#: only kafka-clients 3.x (removed in 4.0 with JmxReporter's auto-inclusion)
_ONLY_3 = ["auto.include.jmx.reporter"]
#: only kafka-clients 4.x (up to 4.4)
_ONLY_4 = """
bootstrap.resolve.timeout.ms buffer.memory.allocation.strategy client.rack config.providers
metadata.cluster.check.enable metadata.recovery.rebootstrap.trigger.ms partitioner.rack.aware
sasl.oauthbearer.allow.unverified.audience sasl.oauthbearer.allow.unverified.issuer
sasl.oauthbearer.assertion.algorithm sasl.oauthbearer.assertion.claim.aud
sasl.oauthbearer.assertion.claim.exp.seconds sasl.oauthbearer.assertion.claim.iss
sasl.oauthbearer.assertion.claim.jti.include sasl.oauthbearer.assertion.claim.nbf.seconds
sasl.oauthbearer.assertion.claim.sub sasl.oauthbearer.assertion.file
sasl.oauthbearer.assertion.private.key.file sasl.oauthbearer.assertion.private.key.passphrase
sasl.oauthbearer.assertion.template.file sasl.oauthbearer.client.credentials.client.id
sasl.oauthbearer.client.credentials.client.secret sasl.oauthbearer.jwt.retriever.class
sasl.oauthbearer.jwt.validator.class sasl.oauthbearer.scope transaction.two.phase.commit.enable
""".split()

#: the keys of the Java consumer and admin client that its producer lacks (3.9 and 4.x): a
#: properties file shared by a job's clients (Confluent Cloud's has session.timeout.ms) gives them
#: to a producer, which warns that each "isn't a known config" and goes on
OTHER_CLIENT_KEYS = frozenset("""
auto.commit.interval.ms auto.offset.reset bootstrap.controllers check.crcs default.api.timeout.ms
enable.auto.commit exclude.internal.topics fetch.max.bytes fetch.max.wait.ms fetch.min.bytes group.id
group.instance.id group.protocol group.remote.assignor heartbeat.interval.ms internal.leave.group.on.close
internal.throw.on.fetch.stable.offset.unsupported isolation.level key.deserializer max.partition.fetch.bytes
max.poll.interval.ms max.poll.records partition.assignment.strategy session.timeout.ms
share.acknowledgement.mode share.acquire.mode value.deserializer
""".split())
_OTHER_CLIENT_REASON = ("a setting of the Java consumer or admin client, which producers do not read "
                        "(Java's producer warns that it \"isn't a known config\")")

#: every Java producer key -> the kafka-clients lines that have it
JAVA_PRODUCER_KEYS: dict[str, str] = {
    **{k: "3.9, 4.x" for k in _BOTH}, **{k: "3.9" for k in _ONLY_3}, **{k: "4.x" for k in _ONLY_4}}


@dataclass(frozen=True)
class _Rule:
    status: str
    #: noted: why it has no effect here; refused: why it cannot work here
    reason: Message
    #: refused: what to do here instead
    way: Message = Message("")
    #: refused keys: values (lower-cased, stripped) accepted as noted, since they ask for what
    #: happens here anyway; "" stands for an empty value
    accepted_values: tuple[str, ...] = ()
    #: why those values are accepted
    accepted_reason: Message = Message("")


_MARKED_KEY = re.compile(r"`([^`]+)`")


def _text(written: str) -> Message:
    """A rule's text as written here, the producer keys it names in backticks, as a message that
    keeps them as settings (the Spark sink shows them as its options)."""
    pieces = _MARKED_KEY.split(written)  # text, key, text, key, ..., text
    template = "{}".join(p.replace("{", "{{").replace("}", "}}") for p in pieces[::2])
    return Message(template, *map(Setting, pieces[1::2]))


def _noted(reason: str) -> _Rule:
    return _Rule(NOTED, _text(reason))


def _refused(reason: str, way: str, accepted: Iterable[str] = (), accepted_reason: str = "") -> _Rule:
    return _Rule(REFUSED, _text(reason), _text(way), tuple(v.lower() for v in accepted), _text(accepted_reason))


_METRICS = _noted("this producer keeps no JMX/Kafka metrics registry: its metrics are Producer.metrics() "
                  "(and the Spark sink's task metrics)")
_JSSE = ("TLS here is Python's ssl module (OpenSSL), not Java's JSSE, so a JSSE algorithm or provider "
         "name has nothing to select")
_KERBEROS = ("MIT's GSS-API library renews Kerberos tickets from the keytab itself; with a ticket cache, "
             "whoever runs kinit keeps it fresh")
_NOT_VALIDATED = ("the client does not validate its own token here (Kafka's 3.x client does not either): "
                  "the broker validates it with its own settings")
_ASSERTION = _refused(
    "the OAuth jwt-bearer grant (a client assertion signed with a private key, KIP-1139) is not "
    "implemented here", "`sasl.oauthbearer.token.provider` naming a Python 'module:function' that returns "
    "the token, or `sasl.oauthbearer.token.endpoint.url` with a client id and secret")
_JAVA_CLASS = "and this producer runs no Java"
_RULES: dict[str, _Rule] = {
    "auto.include.jmx.reporter": _METRICS,
    "bootstrap.resolve.timeout.ms": _noted(
        "bootstrap host names are resolved when a connection is made, each try bounded by "
        "`socket.connection.setup.timeout.ms` and the whole wait by `max.block.ms`"),
    "buffer.memory.allocation.strategy": _noted(
        "`buffer.memory` is a byte budget here, taken as batches are made (as the 'incremental' "
        "strategy); nothing is allocated up front"),
    "client.dns.lookup": _noted(
        "each connection tries every address its host name resolves to, in turn (use_all_dns_ips, "
        "Java's default); bootstrap names are not canonicalised"),
    "client.rack": _noted("partitions are chosen without regard to racks here (no rack-aware partitioning)"),
    "config.providers": _refused(
        "config providers are Java classes that resolve ${provider:path:key} placeholders",
        "give the values themselves (in Spark, read the secret on the driver and pass it as the option)",
        accepted=("",), accepted_reason="no provider given"),
    "interceptor.classes": _refused(
        f"producer interceptors are Java classes, {_JAVA_CLASS}",
        "change the rows before the write (a Spark select/transform), or wrap Producer.send in Python",
        accepted=("",), accepted_reason="no interceptor given"),
    "key.serializer": _refused(
        "keys are bytes here: send() takes bytes or str (UTF-8) and send_batch() binary or string "
        "columns; Spark's own Kafka sink refuses this key too",
        "serialize before the write (in Spark: a binary/string 'key' column, or the sink's keyFormat "
        "option for Avro, JSON Schema or Protobuf)"),
    "value.serializer": _refused(
        "values are bytes here: send() takes bytes or str (UTF-8) and send_batch() binary or string "
        "columns; Spark's own Kafka sink refuses this key too",
        "serialize before the write (in Spark: a binary/string 'value' column, or the sink's "
        "valueFormat option for Avro, JSON Schema or Protobuf)"),
    "metadata.cluster.check.enable": _noted(
        "metadata from a broker of another cluster is not checked against the cluster id here"),
    "metadata.recovery.strategy": _noted(
        "no rebootstrap: a producer here lives for one write task, which fails with a timeout "
        "when no broker it knows answers; Spark retries the task with a new producer, which "
        "bootstraps again"),
    "metadata.recovery.rebootstrap.trigger.ms": _noted(
        "no rebootstrap here (see `metadata.recovery.strategy`)"),
    "metric.reporters": _METRICS,
    "metrics.num.samples": _METRICS,
    "metrics.recording.level": _METRICS,
    "metrics.sample.window.ms": _METRICS,
    "partitioner.class": _refused(
        f"a custom partitioner is a Java class, {_JAVA_CLASS}",
        "a 'partition' column (Spark) or the partition argument of send(); for Kafka's "
        "RoundRobinPartitioner `partitioner`=round_robin, for its UniformStickyPartitioner "
        "`partitioner.ignore.keys`=true; in the standalone Producer (not a Spark option, which is a "
        "string) also a Python callable given as `partitioner`",
        accepted=("", "org.apache.kafka.clients.producer.internals.defaultpartitioner"),
        accepted_reason="Kafka's default partitioning is what happens here: murmur2 of the key, "
                        "sticky batches for null keys"),
    "partitioner.rack.aware": _noted("partitions are chosen without regard to racks here"),
    "sasl.login.class": _refused(
        f"a login class is a Java class, {_JAVA_CLASS}", "the `sasl.*` keys of the mechanism",
        accepted=("",), accepted_reason="no class given"),
    "sasl.kerberos.kinit.cmd": _noted(_KERBEROS),
    "sasl.kerberos.min.time.before.relogin": _noted(_KERBEROS),
    "sasl.kerberos.ticket.renew.jitter": _noted(_KERBEROS),
    "sasl.kerberos.ticket.renew.window.factor": _noted(_KERBEROS),
    "sasl.oauthbearer.allow.unverified.audience": _noted(_NOT_VALIDATED),
    "sasl.oauthbearer.allow.unverified.issuer": _noted(_NOT_VALIDATED),
    "sasl.oauthbearer.clock.skew.seconds": _noted(_NOT_VALIDATED),
    "sasl.oauthbearer.expected.audience": _noted(_NOT_VALIDATED),
    "sasl.oauthbearer.expected.issuer": _noted(_NOT_VALIDATED),
    "sasl.oauthbearer.jwks.endpoint.url": _noted(_NOT_VALIDATED + " (no JWKS is fetched)"),
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": _noted(_NOT_VALIDATED + " (no JWKS is fetched)"),
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": _noted(_NOT_VALIDATED + " (no JWKS is fetched)"),
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": _noted(_NOT_VALIDATED + " (no JWKS is fetched)"),
    "sasl.oauthbearer.jwt.retriever.class": _refused(
        f"a JWT retriever is a Java class, {_JAVA_CLASS}",
        "`sasl.oauthbearer.token.provider` naming a Python 'module:function' that returns the token",
        accepted=("", "org.apache.kafka.common.security.oauthbearer.defaultjwtretriever"),
        accepted_reason="Kafka's default retriever is built in here (`sasl.oauthbearer.token.endpoint.url`)"),
    "sasl.oauthbearer.jwt.validator.class": _refused(
        f"a JWT validator is a Java class, {_JAVA_CLASS}", "leave it out: " + _NOT_VALIDATED,
        accepted=("", "org.apache.kafka.common.security.oauthbearer.defaultjwtvalidator"),
        accepted_reason=_NOT_VALIDATED),
    "security.providers": _noted(_JSSE),
    "ssl.engine.factory.class": _refused(
        f"an SSL engine factory is a Java class, {_JAVA_CLASS}",
        "the `ssl.*` keys (PEM or PKCS12 stores, or PEM text)", accepted=("",), accepted_reason="no class given"),
    "ssl.keymanager.algorithm": _noted(_JSSE),
    "ssl.trustmanager.algorithm": _noted(_JSSE),
    "ssl.provider": _noted(_JSSE),
    "ssl.secure.random.implementation": _noted(_JSSE + " (OpenSSL's own random generator is used)"),
    "transaction.two.phase.commit.enable": _refused(
        "two-phase commit with an external coordinator (KIP-939) is not implemented here",
        "the Spark sink's deliveryGuarantee=exactly-once, or prepare() and complete_transaction() "
        "of a transactional producer", accepted=("false",), accepted_reason="false is what happens here"),
    **{k: _ASSERTION for k in _ONLY_4 if k.startswith("sasl.oauthbearer.assertion.")},
}


def rule_status(key: str) -> str | None:
    """NOTED or REFUSED for a Java producer key this producer does not honour (whatever its
    value); None for any other key (``producer.config.java_key_status`` says HONOURED for ours)."""
    rule = _RULES.get(key)
    return rule.status if rule is not None else None


def accepted_or_explained() -> list[str]:
    """The keys, besides the honoured ones, that get more than "unknown": noted or refused."""
    return [*_RULES, *sorted(OTHER_CLIENT_KEYS)]


def judge(key: str, value: object) -> tuple[str, Message] | None:
    """For a key ``producer.config`` does not know: ``(NOTED, why it has no effect here)``,
    ``(REFUSED, why and the way here)``, or None when Java's producer has no such key either."""
    rule = _RULES.get(key)
    if rule is None:
        return (NOTED, Message(_OTHER_CLIENT_REASON)) if key in OTHER_CLIENT_KEYS else None
    if rule.status == NOTED:
        return NOTED, rule.reason
    text = ",".join(str(v) for v in value) if isinstance(value, (list, tuple)) else str(value)
    if text.strip().lower() in rule.accepted_values:
        return NOTED, rule.accepted_reason
    return REFUSED, Message("{}. Here: {}", rule.reason, rule.way)


def explained(key: str) -> str | None:
    """What happens here to a Java key this producer does not honour, for the docs' migration
    table (None: no rule of this module's: an honoured key, documented by its declaration)."""
    rule = _RULES.get(key)
    if rule is None:
        return None
    if rule.status == NOTED:
        return f"No effect: {rule.reason}"
    accepted = [v for v in rule.accepted_values if v]
    also = ""
    if accepted or "" in rule.accepted_values:
        shown = ", ".join(f"`{v}`" for v in accepted) or "an empty value"
        also = f" Accepted (no effect) with {shown}: {rule.accepted_reason}."
    return f"Refused: {rule.reason}. Instead: {rule.way}.{also}"
