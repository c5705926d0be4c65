"""A crashed exactly-once write never freezes the topic's readers (issue 34), against Apache Kafka
with real kills: the driver of a write (its JVM and its Python, one process group) is SIGKILLed
while its task transactions are open, then a read_committed reader must see rows written after
the crash within seconds -- not after transaction.timeout.ms (15 minutes) -- and each row of the
writes that completed exactly once, none of the dead write's.

Who ends the dead write's transactions: its driver's lease keeper, which outlives the driver on
its host; where the keeper died too (the host went down), the next exactly-once write under the
same prefix, before its tasks begin, or the operator's command.  A write whose driver is alive
is never touched.  The topics have one partition, so a dead write's open transaction holds back
every row written after it (the tests show that stall before they end it)."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest
from crash_support import (
    AFTER,
    JOB,
    STREAM_JOB,
    Job,
    batch_job,
    committed,
    default_prefix,
    keeper_log,
    keeper_pids,
    pause_workers,
    proxied,
    resume,
    run_command,
    stalled,
    visible,
    write_after,
    writing,
)
from kafka_helpers import open_transactions

from sparkkafka_sink.protocol.api import ApiKey
from sparkkafka_sink.spark.options import parse_options
from sparkkafka_sink.testing.brokers import create_topics
from sparkkafka_sink.testing.waiting import wait_until

pytestmark = [pytest.mark.broker, pytest.mark.transactions, pytest.mark.spark, pytest.mark.slow]

@pytest.fixture
def cluster(request, apache_kafka, kafka3):
    """The broker a test runs on: Apache Kafka 4.4 (transactions v2), or 3.9 (v1) where a test is
    parametrized with ``cluster`` "3.9" (indirect).  Both asked for by name, so that the 3.9 node
    (shared with the compatibility pass) stays up until the last test here."""
    return apache_kafka if getattr(request, "param", "4.4") == "4.4" else kafka3


@pytest.fixture
def topic(cluster):
    name = f"crash-{uuid.uuid4().hex[:8]}"
    create_topics(cluster.bootstrap_servers, {name: 1})
    return name


def test_a_killed_driver_s_keeper_ends_its_write_within_seconds(apache_kafka, topic, lease_dir, tmp_path):
    """The driver killed with its Python workers (none of them can abort a transaction): only
    its keeper is left to end the write, and its log says it did."""
    prefix = default_prefix(apache_kafka, topic)
    job = batch_job(apache_kafka, topic, 0, 400_000, 20_000, lease_dir, tmp_path / "job.log")
    try:
        open_ids = writing(apache_kafka, prefix, job)
        (keeper,) = keeper_pids(lease_dir)
    finally:
        job.kill_all_but_keeper()
    write_after(apache_kafka, topic)
    started = time.monotonic()
    got = committed(apache_kafka, topic, AFTER, timeout=30)
    took = time.monotonic() - started
    assert sorted(got) == sorted(f"after-{i}" for i in range(AFTER)), "a row of the dead write is visible"
    assert took < 20, f"readers stood still {took:.0f} s after the crash"
    assert open_transactions(apache_kafka.bootstrap_servers, prefix) == [], open_ids
    wait_until("the keeper to end after its driver", lambda: not _alive(keeper), timeout=30)
    said = keeper_log(lease_dir)
    assert "the driver's JVM is gone: write" in said and "undecided: aborted" in said, said[-2000:]


def test_with_the_keeper_dead_too_the_next_write_ends_the_leftovers(apache_kafka, topic, lease_dir, tmp_path):
    """The host went down: driver and keeper gone.  The next exactly-once write to the topic (the
    same default prefix) finds the dead driver's lease standing still and ends its transactions
    before its own tasks begin."""
    prefix = default_prefix(apache_kafka, topic)
    job = batch_job(apache_kafka, topic, 0, 400_000, 20_000, lease_dir, tmp_path / "dead.log")
    try:
        writing(apache_kafka, prefix, job)
    finally:
        job.host_down()  # driver and keeper at once
    write_after(apache_kafka, topic)
    assert stalled(apache_kafka, topic) == 0  # the dead write holds every reader back
    assert open_transactions(apache_kafka.bootstrap_servers, prefix + "-r")
    nxt = batch_job(apache_kafka, topic, 1_000_000, 1000, 0, lease_dir, tmp_path / "next.log")
    assert nxt.wait(240) == 0, nxt.output()[-3000:]
    got = committed(apache_kafka, topic, AFTER + 1000, timeout=30)
    assert sorted(got) == sorted([f"after-{i}" for i in range(AFTER)] + [str(v) for v in range(1_000_000, 1_001_000)])
    assert "left open by drivers that are gone" in nxt.output()


def test_the_operator_command_lists_then_aborts_what_a_dead_driver_left(apache_kafka, topic, lease_dir, tmp_path):
    prefix = default_prefix(apache_kafka, topic)
    job = batch_job(apache_kafka, topic, 0, 400_000, 20_000, lease_dir, tmp_path / "dead.log")
    try:
        open_ids = writing(apache_kafka, prefix, job)
    finally:
        job.host_down()  # driver and keeper at once
    write_after(apache_kafka, topic)

    listed = run_command(apache_kafka, "list")  # every prefix the sink makes
    for txn_id in open_ids:
        assert txn_id in listed and "gone" in listed.splitlines()[[prefix in line for line in
                                                                   listed.splitlines()].index(True)]
    assert "would end (run again with --yes): " in run_command(apache_kafka, "abort", "--prefix", prefix)
    assert stalled(apache_kafka, topic) == 0  # the dry run aborted nothing
    assert "aborted, 0 committed" in run_command(apache_kafka, "abort", "--prefix", prefix, "--yes")
    got = committed(apache_kafka, topic, AFTER, timeout=30)
    assert sorted(got) == sorted(f"after-{i}" for i in range(AFTER))
    assert "no open transaction" in run_command(apache_kafka, "list", "--prefix", prefix)


@pytest.fixture
def proxy(cluster):
    with proxied(cluster) as fault_proxy:
        yield fault_proxy


def _second_decision_end_txn():
    """A predicate on EndTxn frames: true at the second one of a decision id."""
    seen = []

    def second(frame: bytes) -> bool:
        if b"-decision" in frame:
            seen.append(frame)
        return len(seen) == 2
    return second


#: where the driver's commit is stopped: the request the proxy holds, as (its api key, a new
#: predicate on its frame)
_COMMIT_STEPS = {
    "close": (ApiKey.INIT_PRODUCER_ID, lambda: lambda frame: b"-decision" in frame),    # before the decision
    "first-commit": (ApiKey.END_TXN, lambda: lambda frame: b"-p0-" in frame),          # decided, nothing committed
    "second-commit": (ApiKey.END_TXN, lambda: lambda frame: b"-p1-" in frame),         # between the two commits
    # after the last commit: the decision record's tombstone, in the decision id's second
    # transaction (its EndTxn: the first one's came before the winners' commits)
    "after-last": (ApiKey.END_TXN, _second_decision_end_txn),
}


@pytest.mark.parametrize("held, ender, cluster", [
    ("close", "keeper", "4.4"), ("first-commit", "next", "4.4"), ("second-commit", "keeper", "4.4"),
    ("second-commit", "command", "4.4"), ("after-last", "keeper", "4.4"),
    pytest.param("second-commit", "keeper", "3.9", marks=pytest.mark.kafka3),  # transactions v1
], indirect=["cluster"])
def test_a_batch_driver_killed_during_its_commit(cluster, proxy, topic, lease_dir, tmp_path, held, ender):
    """The driver of a batch write (two tasks) is killed inside its commit, at a request the
    proxy holds (observed, then SIGKILL), at each step of ``exactly_once.commit``:

    * ``close``: the InitProducerId of the write's decision id, before anything is decided: the
      write is aborted whole;
    * ``first-commit``, ``second-commit``: partition 0's or 1's EndTxn, after the decision: the
      write is committed whole -- never half of it, which a re-run would write twice;
    * ``after-last``: every transaction committed, the decision record not yet deleted: nothing
      is left open, everything visible once.

    On Apache Kafka 4.4 (transactions v2) each step; on 3.9 (v1) the one that would leave a write
    half visible.  Who ends it: its keeper; the keeper dead too, the next exactly-once write under the prefix
    (once the dead driver's lease stood still for the window) or the operator's command.  Then
    rows written after the crash are read, and nothing stays open."""
    rows = 1000
    prefix = default_prefix(cluster, topic, proxy.address)
    api_key, predicate = _COMMIT_STEPS[held]
    hold = proxy.blackhole_request(predicate(), api_key)
    job = Job(str(JOB), proxy.address, topic, "0", str(rows), "0", lease_dir=lease_dir, log=tmp_path / "job.log")
    try:
        deadline = time.monotonic() + 180
        while not hold.wait(0.05):  # observed: the driver's request is held by the proxy
            assert job.proc.poll() is None, f"the job ended before its commit was held:\n{job.output()[-3000:]}"
            assert time.monotonic() < deadline, f"the driver never got there:\n{job.output()[-3000:]}"
    finally:
        job.kill() if ender == "keeper" else job.host_down()  # the keeper lives on, or goes with it
    proxy.clear_faults()
    write_after(cluster, topic)
    written = [] if held == "close" else [str(v) for v in range(rows)]
    if ender == "command":
        # the open transaction holds back every row after its first (the other task's committed before it may show)
        assert not [v for v in visible(cluster, topic) if v.startswith("after-")]
        assert "1 committed (their driver had decided to commit them)" in run_command(cluster, "abort", "--prefix", prefix)
        assert "0 aborted, 1 committed" in run_command(cluster, "abort", "--prefix", prefix, "--yes")
    if ender == "next":
        nxt = Job(str(JOB), proxy.address, topic, "1000000", "10", "0", lease_dir=lease_dir, log=tmp_path / "next.log")
        assert nxt.wait(240) == 0, nxt.output()[-3000:]
        assert "completed as decided (2 committed" in nxt.output(), nxt.output()[-3000:]
        written += [str(v) for v in range(1_000_000, 1_000_010)]
    got = committed(cluster, topic, len(written) + AFTER, timeout=30)
    assert sorted(got) == sorted(written + [f"after-{i}" for i in range(AFTER)])
    # (after the last commit the one transaction left is the decision's tombstone, on the
    # decisions topic: it holds back no reader of the write's topic, and its ender ends it too)
    wait_until("nothing open under the prefix", lambda: open_transactions(cluster.bootstrap_servers, prefix) == [],
               timeout=30)


def test_a_live_write_under_the_same_prefix_is_never_touched(apache_kafka, topic, lease_dir, tmp_path):
    """Two exactly-once writes to one topic at once share its default prefix: once the first has
    open transactions its write tasks are paused (SIGSTOP; its driver and keeper go on) while the
    second runs; the second's sweep sees the first's lease beat and leaves them alone; then the
    tasks resume, both writes commit, every row once."""
    prefix = default_prefix(apache_kafka, topic)
    first = batch_job(apache_kafka, topic, 0, 100_000, 5_000, lease_dir, tmp_path / "first.log")  # ~10 s of rows
    paused: list[int] = []
    try:
        held = writing(apache_kafka, prefix, first)
        paused = pause_workers(first)
        assert paused, "no Python worker of the first job to pause"
        second = batch_job(apache_kafka, topic, 1_000_000, 1000, 0, lease_dir, tmp_path / "second.log",
                           lease_window_ms=None)  # the default window: a live driver's beats are seen
        assert second.wait(240) == 0, second.output()[-3000:]
        still = [t for t, _, _ in open_transactions(apache_kafka.bootstrap_servers, prefix + "-r")]
        assert set(held) <= set(still), "the live write's transactions were ended"
        resume(paused)
        assert first.wait(240) == 0, first.output()[-3000:]
    finally:
        resume(paused)
        if first.proc.poll() is None:
            first.kill()
    got = committed(apache_kafka, topic, 101_000, timeout=60)
    assert sorted(map(int, got)) == list(range(100_000)) + list(range(1_000_000, 1_001_000))


@pytest.mark.parametrize("how", ["writeStream", "foreachBatch"])
def test_a_killed_streaming_driver_leaves_nothing_open(apache_kafka, topic, lease_dir, tmp_path, how):
    """A streaming query under exactly-once, as the sink or inside foreachBatch with its batch id:
    the query's driver killed while a micro-batch's transactions are open; its keeper ends them.
    The sink's query is checkpointed at a ``file:///`` URL (Spark's own; the sink opens nothing
    under it: its decisions are in Kafka), and its driver leaves nothing in its working directory."""
    checkpoint = f"file://{tmp_path / 'checkpoint'}" if how == "writeStream" else str(tmp_path / "checkpoint")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    options = {"kafka.bootstrap.servers": apache_kafka.bootstrap_servers, "topic": topic,
               "deliveryGuarantee": "exactly-once", "checkpointLocation": checkpoint}
    prefix = (parse_options(options, streaming=True) if how == "writeStream"
              else parse_options({**options, "batchId": "0"})).transactional_id_prefix
    job = Job(str(STREAM_JOB), apache_kafka.bootstrap_servers, topic, checkpoint, "100000",
              *(["foreachBatch"] if how == "foreachBatch" else []), lease_dir=lease_dir, log=tmp_path / "stream.log",
              cwd=cwd)
    try:
        writing(apache_kafka, prefix, job)
        keepers = keeper_pids(lease_dir)
    finally:
        job.kill_all_but_keeper()  # only the keeper is left to end the micro-batch's transactions
    before = stalled(apache_kafka, topic)  # the micro-batches committed before the kill
    write_after(apache_kafka, topic)
    got = committed(apache_kafka, topic, before + AFTER, timeout=30)
    assert sorted(g for g in got if g.startswith("after-")) == sorted(f"after-{i}" for i in range(AFTER))
    values = [int(g) for g in got if not g.startswith("after-")]
    assert len(values) == len(set(values)) and set(values) == set(range(len(values)))
    assert sorted(p.name for p in cwd.iterdir()) in ([], ["spark-warehouse"]), list(cwd.iterdir())
    assert (tmp_path / "checkpoint" / "offsets").is_dir(), "Spark kept no checkpoint there: the test did not bite"
    # the keeper logs a write's end once its settling returns, after the aborts readers see: wait for it to exit
    assert keepers, "no keeper beat for the query's driver"
    wait_until("the keeper to end after its driver", lambda: not any(map(_alive, keepers)), timeout=60)
    assert open_transactions(apache_kafka.bootstrap_servers, prefix) == []
    assert "the driver's JVM is gone: write" in keeper_log(lease_dir), keeper_log(lease_dir)[-2000:]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()
