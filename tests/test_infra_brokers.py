"""Tests of the test infrastructure itself: embedded brokers, topic creation, read-back helpers."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from broker_kinds import APACHE_SOURCE
from kafka_helpers import Record, consume_all, partition_count, produce_all

from sparkkafka_sink.testing.brokers import (
    BROKER_KINDS,
    BrokerStartError,
    TansuBroker,
    create_topics,
    probe_api_versions,
    start_broker,
)


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("kind", BROKER_KINDS)
def test_start_restart_stop(kind):
    broker = start_broker(kind)
    try:
        port, pid = broker.port, broker.pid
        assert broker.bootstrap_servers == f"127.0.0.1:{port}"
        assert broker.name == f"{kind}@127.0.0.1:{port}"
        assert probe_api_versions("127.0.0.1", port) == 0
        broker.restart()
        assert broker.port == port and broker.pid != pid and not _pid_alive(pid)
        assert probe_api_versions("127.0.0.1", port) == 0
    finally:
        pid = broker.pid
        broker.stop()
    assert not _pid_alive(pid)
    assert not _port_open(port)
    assert not os.path.exists(broker.log_path)
    if kind == "noida":
        assert broker.data_dir is None


def test_start_failure_reports_log_tail():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        broker = TansuBroker(port=port, startup_timeout=10)
        with pytest.raises(BrokerStartError) as exc:
            broker.start()
    assert "log tail" in str(exc.value) and "tansu" in str(exc.value)
    assert not broker.running
    broker.stop()


def test_start_failures_leave_no_files(monkeypatch):
    """A broker that cannot even be spawned (or fails to start) leaves no empty log behind."""
    broker = TansuBroker(startup_timeout=5)
    monkeypatch.setattr(broker, "_command", lambda: ["/nonexistent/tansu-binary"])
    with pytest.raises(OSError):
        broker.start()
    assert not os.path.exists(broker.log_path)
    with socket.socket() as holder:  # and a start refused by a taken port
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        failed = TansuBroker(port=holder.getsockname()[1], startup_timeout=10)
        with pytest.raises(BrokerStartError):
            failed.start()
    assert not os.path.exists(failed.log_path)


@pytest.mark.parametrize("kind", BROKER_KINDS)
def test_pause_resume_kill(fresh_broker, kind):
    handle = fresh_broker(kind)
    broker = handle.broker
    handle.pause()
    # pause() returns once every thread of the broker has stopped, not merely once signalled
    tasks = os.listdir(f"/proc/{broker.pid}/task")
    assert tasks and all(open(f"/proc/{broker.pid}/task/{t}/stat", "rb").read().rsplit(b")", 1)[1].split()[0]
                         in (b"T", b"t") for t in tasks)
    with pytest.raises(OSError):
        probe_api_versions("127.0.0.1", broker.port, timeout=0.3)  # connects, never answers
    handle.resume()
    assert probe_api_versions("127.0.0.1", broker.port) == 0
    broker.pause()
    pid = broker.pid
    handle.kill()  # works on a stopped process too
    assert not broker.running and not _pid_alive(pid)
    handle.restart()
    assert probe_api_versions("127.0.0.1", broker.port) == 0


def test_noida_restart_keeps_data(fresh_broker):
    handle = fresh_broker("noida")
    topic = handle.create_topic(partitions=2)
    produce_all(handle.bootstrap_servers, topic, [{"value": b"v%d" % i, "partition": i % 2} for i in range(20)])
    handle.restart()
    assert partition_count(handle.bootstrap_servers, topic) == 2
    assert sorted(r.value for r in consume_all(handle.bootstrap_servers, topic, 20)) == \
        sorted(b"v%d" % i for i in range(20))


def test_tansu_restart_loses_data(fresh_broker):
    handle = fresh_broker("tansu")
    assert not handle.persistent
    topic = handle.create_topic()
    produce_all(handle.bootstrap_servers, topic, [b"x"] * 5)
    handle.restart()
    with pytest.raises(AssertionError, match="not found in metadata"):
        partition_count(handle.bootstrap_servers, topic, timeout=1)


def test_create_topics_is_idempotent(kafka):
    name = kafka.create_topic(partitions=3)
    create_topics(kafka.bootstrap_servers, {name: 3})
    assert partition_count(kafka.bootstrap_servers, name) == 3
    a, b = f"{name}-a", f"{name}-b"
    create_topics(kafka.bootstrap_servers, {a: 1, b: 2})
    assert partition_count(kafka.bootstrap_servers, a) == 1
    assert partition_count(kafka.bootstrap_servers, b) == 2


def test_roundtrip_keys_headers_nulls(kafka):
    topic = kafka.create_topic(partitions=3)
    n = 300
    sent = [{"key": None if i % 7 == 0 else b"k%d" % i,
             "value": None if i % 5 == 0 else b"v%d" % i,
             "headers": [("idx", str(i).encode()), ("empty", b"")] if i % 2 else None,
             "partition": i % 3,
             "timestamp": 1_700_000_000_000 + i}
            for i in range(n)]
    assert produce_all(kafka.bootstrap_servers, topic, sent) == n
    got = consume_all(kafka.bootstrap_servers, topic, expected_count=n)
    assert len(got) == n and all(isinstance(r, Record) for r in got)
    assert {r.partition for r in got} == {0, 1, 2}
    by_ts = {r.timestamp_ms - 1_700_000_000_000: r for r in got}
    for i, s in enumerate(sent):
        r = by_ts[i]
        assert (r.topic, r.partition, r.key, r.value) == (topic, i % 3, s["key"], s["value"])
        assert r.headers == (s["headers"] or [])
    for p in range(3):  # offsets are dense from 0 in each partition
        assert [r.offset for r in got if r.partition == p] == list(range(n // 3))
    assert len(consume_all(kafka.bootstrap_servers, topic)) == n  # no count: stops at the end
    assert [r.partition for r in consume_all(kafka.bootstrap_servers, topic, partitions=[1])] == [1] * (n // 3)


def test_consume_all_reports_shortfall(kafka):
    topic = kafka.create_topic(partitions=2)
    produce_all(kafka.bootstrap_servers, topic, [b"a", b"b"])
    start = time.monotonic()
    with pytest.raises(AssertionError, match=r"got 2 records, expected 3"):
        consume_all(kafka.bootstrap_servers, topic, expected_count=3, timeout=1.5)
    assert time.monotonic() - start < 5
    assert consume_all(kafka.bootstrap_servers, kafka.create_topic()) == []


def test_cli_runs_broker_in_foreground(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "sparkkafka_sink.testing.brokers", "tansu"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        host, port = line.split(":")
        assert host == "127.0.0.1"
        assert probe_api_versions(host, int(port)) == 0
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=15) == 0
        assert not _port_open(int(port))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_kafka_fixture_flags(kafka):
    assert kafka.kind in ("tansu", "noida", "apache", "external")
    assert kafka.strict_errors == (kafka.kind != "tansu") or kafka.kind == "external"
    # embedded brokers and the Apache Kafka node started from Maven jars are ours to pause
    assert kafka.supports_pause == (kafka.kind in BROKER_KINDS or kafka.broker is not None)
    if kafka.kind == "apache":
        assert kafka.strict_errors and kafka.persistent and not kafka.answers_acks0


# ---------------------------------------------------------------------------------------------
# Apache Kafka from its Maven jars (sparkkafka_sink.testing.apache_kafka)
# ---------------------------------------------------------------------------------------------

apache_only = pytest.mark.skipif(APACHE_SOURCE != "maven", reason="needs java and mvn")


@apache_only
def test_apache_node_pause_kill_restart_keeps_its_data(apache_kafka):
    node = apache_kafka.nodes[0]
    topic = f"infra-apache-{os.getpid()}-{time.monotonic_ns()}"
    create_topics(node.bootstrap_servers, {topic: 1})
    assert produce_all(node.bootstrap_servers, topic, [b"before"]) == 1
    port, pid = node.port, node.pid
    node.pause()
    assert node.paused
    with pytest.raises(OSError):
        probe_api_versions("127.0.0.1", port, timeout=0.5)  # a stopped JVM answers nothing
    node.resume()
    assert probe_api_versions("127.0.0.1", port) == 0
    node.kill()
    assert not node.running and not _pid_alive(pid)
    node.start()  # same port, same data directory
    assert node.port == port and node.pid != pid
    apache_kafka.wait_for_brokers(1)
    assert [r.value for r in consume_all(node.bootstrap_servers, topic, 1)] == [b"before"]
    # (a clean stop and start, and the data it keeps: the failover tests' rolling restart)


@apache_only
def test_apache_start_failure_shows_the_log_tail(tmp_path):
    from sparkkafka_sink.testing.apache_kafka import ApacheKafka

    cluster = ApacheKafka(1, broker_config={"num.io.threads": "not-a-number"}, startup_timeout=60)
    with pytest.raises(BrokerStartError) as info:
        cluster.start()
    message = str(info.value)
    assert "num.io.threads" in message, message[-2000:]
    assert not cluster.base_dir.exists()  # close() removed the files
    assert all(not n.running for n in cluster.nodes)


@pytest.mark.parametrize("docker, maven, expected", [
    (True, True, "maven"),    # every test that needs Kafka's own jars runs, even where Docker answers
    (True, False, "docker"),  # the plain Apache Kafka tests in a container; the rest skip, saying why
    (False, True, "maven"),
    (False, False, None),
])
def test_apache_kafka_comes_from_maven_wherever_java_and_mvn_are(monkeypatch, docker, maven, expected):
    import broker_kinds

    monkeypatch.setattr(broker_kinds, "_docker_answers", lambda: docker)
    monkeypatch.setattr(broker_kinds, "java_and_maven_available", lambda: maven)
    assert broker_kinds._apache_source() == expected


def test_the_fault_tests_keep_their_apache_cases_where_only_docker_could_run_it():
    """The faults' ``apache`` cases are collected wherever Apache Kafka runs here -- and skip,
    saying they need java and mvn, where only a container could -- never vanish without a line."""
    import broker_kinds

    assert ("apache" in broker_kinds.FAULT_KINDS) == (APACHE_SOURCE is not None and "apache" in broker_kinds._LOCAL)
