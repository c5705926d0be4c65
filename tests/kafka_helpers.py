"""Independent read-back of what reached the broker, with confluent-kafka (librdkafka), and the
few things every broker test needs besides: a producer with a module's settings
(:func:`producer_for`), the transactions left open (:func:`open_transactions`), a broker's
producer state (:func:`describe_producers`), ACLs (:func:`allow_on_topic`).

Tests check our producer's output with a different client: ``check.crcs=True`` so a bad batch
CRC fails loudly, and ``assign()`` to explicit partitions from offset 0 (a group join takes
~23 s on tansu, so never ``subscribe()``).

Stopping rule: librdkafka's partition-EOF events, which come from the *Fetch* high watermark
(right on both embedded brokers; tansu's ListOffsets is wrong, so ``get_watermark_offsets``
without ``cached=True`` is never used).  With ``expected_count`` we keep waiting until that many
records arrived AND every partition is at EOF, so extra (duplicate) records are returned too and
tests can assert exact counts.
"""

from __future__ import annotations

import socket
import time
import uuid
from collections import namedtuple
from collections.abc import Iterable, Sequence

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

Record = namedtuple("Record", "topic partition offset key value headers timestamp_ms")
Record.__doc__ = "One consumed record; headers is a list of (str, bytes), value None for a null."


def _consumer(bootstrap: str, isolation_level: str, extra: dict | None = None) -> Consumer:
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": f"readback-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "check.crcs": True,
        "enable.partition.eof": True,
        "isolation.level": isolation_level,
        "allow.auto.create.topics": False,
        "topic.metadata.refresh.interval.ms": 1000,
        "fetch.wait.max.ms": 50,
        # noida ignores Fetch byte limits: allow big responses rather than failing the read
        "receive.message.max.bytes": 256 * 1024 * 1024,
    }
    if extra:
        conf.update(extra)
    return Consumer(conf)


def _partitions(client, topic: str, timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    last = "no metadata"
    while True:
        try:
            md = client.list_topics(topic=topic, timeout=max(0.5, min(5.0, deadline - time.monotonic())))
            t = md.topics.get(topic)
            if t is not None and t.error is None and t.partitions:
                return sorted(t.partitions)
            last = "missing" if t is None else str(t.error or "no partitions")
        except KafkaException as e:
            last = str(e)
        if time.monotonic() >= deadline:
            raise AssertionError(f"topic {topic!r} not found in metadata: {last}")
        time.sleep(0.1)


def partition_count(bootstrap: str, topic: str, timeout: float = 10.0) -> int:
    """Number of partitions metadata reports for ``topic`` (AssertionError if it does not exist)."""
    c = _consumer(bootstrap, "read_uncommitted")
    try:
        return len(_partitions(c, topic, timeout))
    finally:
        c.close()


def log_end_offsets(bootstrap: str, topic: str, timeout: float = 10.0) -> dict[int, int]:
    """Each partition's log end offset (read_uncommitted): every record and every transaction
    marker takes an offset, so a log with markers ends past its record count."""
    from confluent_kafka import TopicPartition

    consumer = _consumer(bootstrap, "read_uncommitted")
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1]
                for p in _partitions(consumer, topic, timeout)}
    finally:
        consumer.close()


def assert_in_transactions(bootstrap: str, topic: str, records: int) -> None:
    """``topic``'s ``records`` were written in transactions: their commit markers take offsets
    too, so the log ends past the records (a write that ignored exactly-once would leave none)."""
    ends = sum(log_end_offsets(bootstrap, topic).values())
    assert ends > records, f"{topic}: {records} records end at offset {ends}: no transaction marker"


def _headers(h) -> list[tuple[str, bytes]]:
    return [(k, v) for k, v in (h or [])]


def consume_all(bootstrap: str, topic: str, expected_count: int | None = None, timeout: float = 30.0,
                partitions: Sequence[int] | None = None, isolation_level: str = "read_uncommitted",
                config: dict | None = None) -> list[Record]:
    """Read ``topic`` from offset 0 and return its records, ordered by (partition, offset).

    Without ``expected_count``: stops once every partition reached its end (Fetch high watermark).
    With it: stops once at least that many arrived and every partition is at its end; raises
    AssertionError with per-partition counts if fewer arrived by ``timeout``.
    """
    deadline = time.monotonic() + timeout
    c = _consumer(bootstrap, isolation_level, config)
    try:
        parts = list(partitions) if partitions is not None else _partitions(c, topic, min(timeout, 10.0))
        c.assign([TopicPartition(topic, p, 0) for p in parts])
        at_eof: dict[int, bool] = {p: False for p in parts}
        counts: dict[int, int] = {p: 0 for p in parts}
        records: list[Record] = []
        while True:
            enough = expected_count is None or len(records) >= expected_count
            if enough and all(at_eof.values()):
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(
                    f"consume_all({topic!r}): got {len(records)} records"
                    + (f", expected {expected_count}" if expected_count is not None else "")
                    + f" within {timeout}s; per partition {counts}; at end {at_eof}")
            for msg in c.consume(num_messages=10000, timeout=min(0.2, remaining)):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        at_eof[msg.partition()] = True
                        continue
                    if err.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART,) and not err.fatal():
                        continue  # topic still propagating; keep polling until the deadline
                    raise AssertionError(f"consume_all({topic!r}) error: {err}")
                p = msg.partition()
                at_eof[p] = False
                counts[p] += 1
                ts_type, ts = msg.timestamp()
                records.append(Record(msg.topic(), p, msg.offset(), msg.key(), msg.value(),
                                      _headers(msg.headers()), ts))
        records.sort(key=lambda r: (r.partition, r.offset))
        return records
    finally:
        c.close()


def produce_all(bootstrap: str, topic: str, records: Iterable, timeout: float = 30.0,
                config: dict | None = None) -> int:
    """Produce with confluent-kafka (a reference producer) and return how many were delivered.

    ``records`` items are values, or dicts of ``Producer.produce`` keyword arguments
    (key, value, headers, partition, timestamp).  Raises on any delivery error.
    """
    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": False}
    conf.update(config or {})
    p = Producer(conf)
    errors: list = []
    delivered = [0]

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)
        else:
            delivered[0] += 1

    sent = 0
    for r in records:
        kwargs = dict(r) if isinstance(r, dict) else {"value": r}
        while True:
            try:
                p.produce(topic, on_delivery=on_delivery, **kwargs)
                break
            except BufferError:
                p.poll(0.05)
        sent += 1
    left = p.flush(timeout)
    if errors or left:
        raise AssertionError(f"produce_all({topic!r}): {len(errors)} errors ({errors[:3]}), "
                             f"{left} undelivered of {sent}")
    return delivered[0]


# ---------------------------------------------------------------------------------------------
# The producer under test, and what it left on the broker
# ---------------------------------------------------------------------------------------------

def producer_for(target, /, defaults: dict | None = None, client=None, **overrides):
    """A producer on ``target`` (a bootstrap string, or anything with ``bootstrap_servers``:
    a broker handle, a cluster): ``bootstrap.servers``, then ``defaults`` (a test module's
    settings, bound with ``functools.partial``), then ``overrides`` (a test's own; ``linger_ms``
    may stand for ``linger.ms``).  ``client``: the producer class, our ``Producer`` unless given
    (confluent-kafka's ``Producer`` takes the same dict)."""
    if client is None:
        from sparkkafka_sink import Producer as client
    bootstrap = target if isinstance(target, str) else target.bootstrap_servers
    config = {"bootstrap.servers": bootstrap, **(defaults or {})}
    config.update({k.replace("_", "."): v for k, v in overrides.items()})
    return client(config)


def signed_in_round_trip(config: dict, read_from: str, topic_prefix: str, count: int = 200) -> None:
    """``count`` values written by our producer with ``config`` (a sign-in under test, on its
    listener) to a new two-partition topic, acknowledged each, and read back whole, by
    confluent-kafka, over ``read_from`` (a listener without sign-in)."""
    from sparkkafka_sink.testing.brokers import create_topics

    topic = f"{topic_prefix}-{uuid.uuid4().hex[:10]}"
    create_topics(read_from, {topic: 2}, timeout=30)
    values = [f"v{i}".encode() for i in range(count)]
    with producer_for(config["bootstrap.servers"], {"max.block.ms": 15000, "delivery.timeout.ms": 30000,
                                                    "request.timeout.ms": 10000, **config}) as producer:
        futures = [producer.send(topic, value=v) for v in values]
        producer.flush(30)
        for f in futures:
            f.get(0)
    got = consume_all(read_from, topic, expected_count=count, timeout=30)
    assert sorted(r.value for r in got) == sorted(values)


def open_transactions(bootstrap: str, prefix: str) -> list:
    """The transactions whose ids start with ``prefix`` still open on their coordinators (``[]``:
    nothing left hanging), as the driver's ``TransactionAdmin`` sees them."""
    from sparkkafka_sink.producer.handover import TransactionAdmin

    with TransactionAdmin({"bootstrap.servers": bootstrap}) as admin:
        return admin.open_transactions(prefix, time.monotonic() + 30)


# ---------------------------------------------------------------------------------------------
# DescribeProducers (KIP-664), to see a broker's producer state
# ---------------------------------------------------------------------------------------------

def describe_producers(bootstrap: str, topic: str, partition: int) -> list:
    """``[(producer_id, epoch, last_sequence)]`` active on one partition, as its leader (the
    first address of ``bootstrap``) reports them: DescribeProducers v0, declared in our protocol
    layer (the producer itself never sends it), over a blocking socket."""
    from sparkkafka_sink.protocol import messages
    from sparkkafka_sink.protocol.broker_protocol import BrokerProtocol

    schema = messages.schema_of("DescribeProducersRequest")
    request = schema.cls(topics=[schema.structs["TopicRequest"].cls(name=topic, partition_indexes=[partition])])
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    proto = BrokerProtocol("kafka-helpers")
    _, frame = proto.send(request, 0)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"".join(bytes(p) for p in frame))
        answers = []
        while not answers:
            data = s.recv(65536)
            if not data:
                raise ConnectionError("broker closed the connection")
            answers = proto.receive(data)
    ((_, response),) = answers
    producers = []
    for t in response.topics:
        for p in t.partitions:
            assert p.error_code == 0, f"DescribeProducers error {p.error_code}: {p.error_message}"
            producers += [(x.producer_id, x.producer_epoch, x.last_sequence) for x in p.active_producers]
    return producers


# ---------------------------------------------------------------------------------------------
# ACLs (a cluster with an authorizer, e.g. BrokerSecurity(authorizer=True))
# ---------------------------------------------------------------------------------------------

def allow_on_topic(bootstrap: str, topic: str, principal: str, operations: Iterable[str]) -> None:
    """ALLOW ``principal`` ("User:carol") the ``operations`` ("WRITE", "DESCRIBE") on ``topic``,
    through a client the cluster lets create ACLs (a super user), and wait until they apply."""
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    bindings = [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, "*",
                           getattr(AclOperation, op), AclPermissionType.ALLOW) for op in operations]
    for future in admin.create_acls(bindings, request_timeout=30).values():
        future.result(30)
    wanted = {getattr(AclOperation, op) for op in operations}
    query = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, None,
                             AclOperation.ANY, AclPermissionType.ANY)
    deadline = time.monotonic() + 30
    while {b.operation for b in admin.describe_acls(query, request_timeout=30).result(30)} != wanted:
        if time.monotonic() > deadline:
            raise AssertionError(f"ACLs {sorted(operations)} for {principal} on {topic!r} not applied after 30 s")
        time.sleep(0.1)
