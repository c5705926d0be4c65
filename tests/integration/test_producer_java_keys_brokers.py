"""Java producer keys honoured for issue 33, against a real Apache Kafka node: a compression level
changes the batches the broker stores, and confluent-kafka reads every level back; a bootstrap
name whose first address refuses connections still reaches the broker (client.dns.lookup)."""

from __future__ import annotations

import socket
import uuid

import pytest
from kafka_helpers import consume_all
from oracle.raw_fetch import RawFetchClient

from sparkkafka_sink import Producer
from sparkkafka_sink.network import connection
from sparkkafka_sink.record.batch import decode_batches
from sparkkafka_sink.record.compression import CompressionType
from sparkkafka_sink.testing.brokers import create_topics

pytestmark = pytest.mark.broker

_FAST = {"max.block.ms": 20000, "delivery.timeout.ms": 60000, "linger.ms": 50}
VALUES = [b"%d the quick brown fox %d jumps over the lazy dog %x " % (i, i * 7 % 113, i * i) * 3
          for i in range(3000)]


def _topic(cluster, partitions: int = 1) -> str:
    name = f"java-keys-{uuid.uuid4().hex[:10]}"
    create_topics(cluster.bootstrap_servers, {name: partitions})
    return name


def _produce(cluster, topic: str, config: dict) -> None:
    """Half the values record by record (``send``), half as a column (``send_batch``)."""
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, **_FAST, "batch.size": 1 << 20, **config}) as p:
        half = len(VALUES) // 2
        futures = [p.send(topic, value=v) for v in VALUES[:half]]
        bulk = p.send_batch(topic, values=VALUES[half:], partitions=0)
        p.flush(30)
        for f in futures:
            f.get(0)
        bulk.get(0)


def _stored(cluster, topic: str) -> tuple[int, set[int]]:
    """Bytes of the batches the broker stores for partition 0, and their codecs."""
    with RawFetchClient(cluster.bootstrap_servers) as client:
        raw = client.batches(topic, 0)
    codecs = {batch.compression_type for data in raw for batch in decode_batches(data)}
    return sum(len(b) for b in raw), codecs


@pytest.mark.parametrize("codec,key,fast,small", [
    ("gzip", "compression.gzip.level", 1, 9),
    ("lz4", "compression.lz4.level", 1, 17),
    ("zstd", "compression.zstd.level", -5, 19),
])
def test_a_compression_level_changes_the_stored_batches_and_reads_back(apache_kafka, codec, key, fast, small):
    sizes = {}
    for level in (fast, small):
        topic = _topic(apache_kafka)
        _produce(apache_kafka, topic, {"compression.type": codec, key: str(level)})
        got = consume_all(apache_kafka.bootstrap_servers, topic, expected_count=len(VALUES))
        assert [r.value for r in got] == VALUES  # librdkafka, check.crcs on
        sizes[level], codecs = _stored(apache_kafka, topic)
        assert codecs == {CompressionType[codec.upper()]}
    assert sizes[small] < sizes[fast] * 0.95, sizes


def test_a_connection_tries_the_next_address_of_its_host(apache_kafka, monkeypatch):
    """A bootstrap name resolving to a refused address first, then the broker's (as a name with
    an IPv6 address where only IPv4 listens): Java's use_all_dns_ips reaches the broker, so
    client.dns.lookup is only noted."""
    host, port = apache_kafka.bootstrap_servers.split(",")[0].rsplit(":", 1)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    real = socket.getaddrinfo
    asked = []

    def getaddrinfo(name, port_, *args, **kwargs):
        if name != "two-addresses.test":
            return real(name, port_, *args, **kwargs)
        asked.append(name)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", closed)),
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", (host, int(port)))]

    monkeypatch.setattr(connection.socket, "getaddrinfo", getaddrinfo)
    topic = _topic(apache_kafka)
    with Producer({"bootstrap.servers": f"two-addresses.test:{port}", **_FAST, "reconnect.backoff.ms": 10,
                   "client.dns.lookup": "use_all_dns_ips"}) as p:
        p.send(topic, value=b"through the second address").get(20)
    assert asked  # the fake name was resolved (and its first address refused)
    got = consume_all(apache_kafka.bootstrap_servers, topic, expected_count=1)
    assert [r.value for r in got] == [b"through the second address"]


def test_the_socket_buffer_sizes_are_applied(apache_kafka):
    """send.buffer.bytes and receive.buffer.bytes set SO_SNDBUF and SO_RCVBUF of every broker
    connection (Linux reports twice what was asked, its bookkeeping included)."""
    topic = _topic(apache_kafka)
    with Producer({"bootstrap.servers": apache_kafka.bootstrap_servers, **_FAST,
                   "send.buffer.bytes": "65536", "receive.buffer.bytes": "49152"}) as p:
        p.send(topic, value=b"x").get(20)
        node = p._metadata.cluster.leader_for(topic, 0)
        sock = p._client.connection(node).sock
        sent, received = (sock.getsockopt(socket.SOL_SOCKET, o) for o in (socket.SO_SNDBUF, socket.SO_RCVBUF))
    assert (sent, received) in ((65536, 49152), (2 * 65536, 2 * 49152))
