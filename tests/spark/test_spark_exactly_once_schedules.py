"""The schedules that broke exactly-once before its decision was recorded in Kafka (issue 41),
against Apache Kafka with real processes, each moment reached by an observed event (a request
the fault proxy holds, a transaction seen open at the coordinator, a lease seen standing still):

* a late attempt that begins its transaction after the driver's sweep listed the write;
* a winner whose EndTxn fails after the decision;
* the driver's close (its decision id's InitProducerId) answered into a cut connection;
* a keeper stalled (SIGSTOP) while its driver writes and commits, with a second write under the
  same prefix meanwhile;
* write tasks that begin more than two minutes after planning;
* a streaming query checkpointed under a scheme Python cannot open, its driver killed at each
  step of its commits and restarted;
* the operator's command run against a streaming query's decided micro-batch.

Each ends with every row once, none of a write partly visible, nothing left open.  The driver
killed at each step of its commit: tests/exactly_once/test_crash_recovery.py.  (Here, in the
spark share of a parallel run: most of these run Spark drivers of their own.)"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import crash_support
import pyarrow as pa
import pytest
from crash_support import (
    LEASE_WINDOW_MS,
    STREAM_JOB,
    batch_job,
    committed,
    default_prefix,
    keeper_pids,
    proxied,
    run_command,
    writing,
)
from kafka_helpers import consume_all, open_transactions

from sparkkafka_sink.exactly_once.decision_log import DecisionLog
from sparkkafka_sink.exactly_once.ids import parse
from sparkkafka_sink.exactly_once.leases import alive_owners
from sparkkafka_sink.exactly_once.settle import settle
from sparkkafka_sink.producer.handover import TransactionAdmin
from sparkkafka_sink.protocol.api import ApiKey
from sparkkafka_sink.spark.driver import exactly_once_writes
from sparkkafka_sink.spark.options import parse_options
from sparkkafka_sink.spark.plan import ColumnLayout, WritePlan
from sparkkafka_sink.spark.sink_errors import SinkWriteError
from sparkkafka_sink.spark.task import task_producer
from sparkkafka_sink.spark.task.task_info import TaskInfo
from sparkkafka_sink.spark.task.write_task import run_write_task
from sparkkafka_sink.testing.brokers import create_topics
from sparkkafka_sink.testing.waiting import wait_until

pytestmark = [pytest.mark.broker, pytest.mark.transactions]

PYSPARK_JARS = Path(__import__("pyspark").__file__).parent / "jars"


@pytest.fixture(params=["4.4", pytest.param("3.9", marks=[pytest.mark.kafka3, pytest.mark.uses("kafka3")])])
def cluster(request):
    """The schedules run in this process on both transaction protocols: Apache Kafka 4.4
    (transactions v2) and 3.9 (v1).  The Spark-process tests run on 4.4."""
    return request.getfixturevalue("apache_kafka" if request.param == "4.4" else "kafka3")


@pytest.fixture
def topic(apache_kafka):
    name = f"sched-{uuid.uuid4().hex[:8]}"
    create_topics(apache_kafka.bootstrap_servers, {name: 2})
    return name


@pytest.fixture
def proxy(apache_kafka):
    with proxied(apache_kafka) as fault_proxy:
        yield fault_proxy


@pytest.fixture
def cluster_topic(cluster):
    name = f"sched-{uuid.uuid4().hex[:8]}"
    create_topics(cluster.bootstrap_servers, {name: 2})
    return name


@pytest.fixture
def cluster_proxy(cluster):
    from faults.harness import proxy_existing_broker

    proxied = proxy_existing_broker(cluster.nodes[0])
    yield proxied.proxy
    proxied.stop()


def rows(start: int, n: int) -> list[pa.RecordBatch]:
    return [pa.record_batch({"value": pa.array([str(i) for i in range(start, start + n)])})]


def started(bootstrap: str, topic: str) -> WritePlan:
    """An exactly-once write planned as the driver plans it (owner named, keeper beating)."""
    return WritePlan(exactly_once_writes.start_exactly_once(parse_options({
        "kafka.bootstrap.servers": bootstrap, "topic": topic, "deliveryGuarantee": "exactly-once",
        "transactionalIdPrefix": f"{topic}-txn", "producerCacheTimeoutMs": "0"})), ColumnLayout("value"))


def read_committed(bootstrap: str, topic: str, expected: int | None = None) -> list[int]:
    return sorted(int(r.value) for r in consume_all(bootstrap, topic, expected, isolation_level="read_committed",
                                                    timeout=30))


# -- a late attempt after the sweep's listing --------------------------------------------------------
def test_a_late_attempt_beginning_after_the_sweep_listed_the_write_is_never_committed(cluster, cluster_topic,
                                                                                      monkeypatch):
    """The attempt initialised its producer and found the write open (before the driver closed
    it); it begins its transaction -- observed Ongoing at its coordinator, its records in the log --
    after the driver's one listing of the write returned and before the driver acts on it.  Before
    the decision was recorded, the sweep listed Ongoing then Empty transactions in two calls, missed
    such an attempt, and a keeper ending the write later committed it with the winners.  Now the listing
    holds it as initialised, the sweep fences it, its transaction is aborted, and a keeper ending
    the write afterwards commits only the recorded winners."""
    bootstrap, topic = cluster.bootstrap_servers, cluster_topic
    plan = started(bootstrap, topic)
    winner = run_write_task(iter(rows(0, 100)), plan, None, TaskInfo(0, 1, 0, attempt_id=31))
    late = TaskInfo(0, 1, 1, attempt_id=32)
    late_id = task_producer.transactional_id(plan.options, late)
    checked, listed, failed = threading.Event(), threading.Event(), []  # failed: the attempt's error, if any

    real_closed = task_producer.write_closed

    def closed_then_wait(producer, write):
        answer = real_closed(producer, write)  # the write is open: the driver has not closed it yet
        checked.set()
        assert listed.wait(60), "the driver never listed the write"
        return answer

    monkeypatch.setattr(task_producer, "write_closed", closed_then_wait)

    def the_late_attempt():
        try:
            run_write_task(iter(rows(1000, 100)), plan, None, late)
        except SinkWriteError as e:
            failed.append(e)

    attempt = threading.Thread(target=the_late_attempt)
    attempt.start()
    assert checked.wait(60), "the late attempt never checked its write"

    from sparkkafka_sink.exactly_once import settle as settle_module
    real_list = settle_module.list_write

    def listing_then_the_late_attempt_begins(admin, write, deadline):
        found = real_list(admin, write, deadline)
        assert [t.state for t in found if t.transactional_id == late_id] == ["Empty"]
        listed.set()
        with TransactionAdmin({"bootstrap.servers": bootstrap}) as observer:
            wait_until("the late attempt's transaction open at its coordinator",
                       lambda: (d := observer.describe(late_id, time.monotonic() + 10)) is not None
                       and d.state == "Ongoing", timeout=60, interval=0.05)
        # and its records in the log (read uncommitted): a commit of its transaction would show them
        wait_until("the late attempt's records in the log", lambda: len(consume_all(bootstrap, topic)) > 100,
                   timeout=60, interval=0.1)
        return found

    monkeypatch.setattr("sparkkafka_sink.exactly_once.commit.list_write", listing_then_the_late_attempt_begins)
    exactly_once_writes.commit_all([winner], plan.options)
    attempt.join(120)
    assert not attempt.is_alive()
    # it may have flushed and handed its transaction over before the fence, or failed fenced
    # after: either way its transaction was aborted, and nothing can commit it any more
    assert not failed or "fenced" in str(failed[0]), failed
    with TransactionAdmin(plan.options.producer_config) as admin:  # a keeper ending the write afterwards
        again = settle(admin, DecisionLog(admin), plan.options.write(), time.monotonic() + 60)
    assert again.committed == []  # (the decision was forgotten once all of it was committed)
    assert read_committed(bootstrap, topic, 100) == list(range(100))
    assert open_transactions(bootstrap, f"{topic}-txn") == []
    assert len(consume_all(bootstrap, topic, 101, timeout=30)) > 100, "the late attempt wrote nothing: no bite"


# -- a winner's EndTxn failing after the decision -----------------------------------------------------
def test_a_winner_whose_commit_fails_after_the_decision_is_completed_never_aborted(cluster, cluster_proxy,
                                                                                   cluster_topic, monkeypatch):
    """The fault proxy swallows the EndTxn of partition 1's winner, past the commit's bound
    (made short here): the job fails naming the write, partition 0's rows are visible and
    partition 1's are held.  Spark's abort, which follows a failed commit, ends the write as
    decided: partition 1's winner is committed, not aborted -- the write ends wholly visible."""
    proxy, topic = cluster_proxy, cluster_topic
    plan = started(proxy.address, topic)
    messages = [run_write_task(iter(rows(p * 1000, 100)), plan, None, TaskInfo(0, p, 0, attempt_id=40 + p))
                for p in (0, 1)]
    held = proxy.blackhole_request(lambda frame: b"-p1-t41" in frame, ApiKey.END_TXN)
    monkeypatch.setattr(exactly_once_writes, "_END_TIMEOUT_S", 8.0)
    with pytest.raises(exactly_once_writes.TransactionCommitError, match="is decided .* nothing decided is ever aborted"):
        exactly_once_writes.commit_all(messages, plan.options)
    assert held.wait(0)
    direct = cluster.bootstrap_servers
    assert read_committed(direct, topic, 100) == list(range(100)), "partition 0's winner is committed, visible"
    assert open_transactions(direct, f"{topic}-txn"), "partition 1's winner is open (held), not aborted"
    proxy.clear_faults()
    proxy.cut_all()
    text = exactly_once_writes.abort_all(messages, plan.options)
    assert "completed as decided (1 committed, 0 aborted)" in text, text
    assert read_committed(direct, topic, 200) == list(range(100)) + list(range(1000, 1100))
    assert open_transactions(direct, f"{topic}-txn") == []


# -- the driver's close unanswered ---------------------------------------------------------------------
@pytest.mark.parametrize("lost", ["answer", "request"])
def test_a_close_whose_connection_is_cut_is_read_back_and_the_write_commits(cluster, cluster_proxy, cluster_topic,
                                                                           lost):
    """The fault proxy cuts the connection of the driver's close -- the InitProducerId of the
    write's decision id -- as its answer comes back (the coordinator initialised the id) or as
    the request goes out (it never did).  The close asks DescribeTransactions and reads the id
    back (epoch 0, idle: its own first initialisation) or initialises it then; either way it
    knows no one else ended the write, and the write commits whole.  (The chaos harness's seed
    79: before, the retried InitProducerId took the epoch to 1, and the driver failed the job as
    if another process had ended its write.)"""
    proxy, topic = cluster_proxy, cluster_topic
    plan = started(proxy.address, topic)
    messages = [run_write_task(iter(rows(p * 1000, 100)), plan, None, TaskInfo(0, p, 0, attempt_id=50 + p))
                for p in (0, 1)]
    decision_id = plan.options.write().decision_id
    cut = proxy.cut_in_flight(ApiKey.INIT_PRODUCER_ID, every=0, at={"answer": "response"}.get(lost, lost), times=1,
                              predicate=lambda frame: decision_id.encode() in frame)
    exactly_once_writes.commit_all(messages, plan.options)
    assert cut.hits == 1, "the close's connection was not cut: the test did not bite"
    direct = cluster.bootstrap_servers
    assert read_committed(direct, topic, 200) == list(range(100)) + list(range(1000, 1100))
    assert open_transactions(direct, f"{topic}-txn") == []


def test_an_ender_never_leaves_a_decision_id_at_epoch_0(cluster, cluster_topic):
    """Whoever ends a write its driver never closed initialises its decision id past epoch 0 --
    which a driver's unanswered close would otherwise read back as its own."""
    plan = started(cluster.bootstrap_servers, cluster_topic)
    write = plan.options.write()
    with TransactionAdmin(plan.options.producer_config) as admin:
        settle(admin, DecisionLog(admin), write, time.monotonic() + 60)
        found = admin.describe(write.decision_id, time.monotonic() + 10)
    assert found is not None and found.state == "Empty" and found.producer_epoch >= 1, found


# -- no keeper ---------------------------------------------------------------------------------------
def test_lease_keeper_none_starts_no_keeper_and_the_write_commits(apache_kafka, topic, tmp_path, monkeypatch):
    """``leaseKeeper=none``, for platforms that forbid extra processes: no keeper starts (nor its
    files), the write commits every row once, and its lease is unknown to the coordinator -- so
    an observer judges the driver gone at once (the crash table's keeper-dead rows)."""
    monkeypatch.setenv("SPARKKAFKA_LEASE_DIR", str(tmp_path / "leases"))
    bootstrap = apache_kafka.bootstrap_servers
    options = exactly_once_writes.start_exactly_once(parse_options({
        "kafka.bootstrap.servers": bootstrap, "topic": topic, "deliveryGuarantee": "exactly-once",
        "transactionalIdPrefix": f"{topic}-txn", "leaseKeeper": "none", "producerCacheTimeoutMs": "0"}))
    plan = WritePlan(options, ColumnLayout("value"))
    message = run_write_task(iter(rows(0, 100)), plan, None, TaskInfo(0, 0, 0, attempt_id=51))
    assert not (tmp_path / "leases").exists() or not list((tmp_path / "leases").rglob("keeper.json"))
    with TransactionAdmin({"bootstrap.servers": bootstrap}) as admin:
        owner = (options.transactional_id_prefix, options.owner)
        assert alive_owners(admin, {owner}, time.monotonic() + 30, window_s=3) == set()
    exactly_once_writes.commit_all([message], options)
    assert read_committed(bootstrap, topic, 100) == list(range(100))
    assert open_transactions(bootstrap, f"{topic}-txn") == []


# -- a stalled keeper and a second write under the prefix -----------------------------------------------
def test_a_stalled_keeper_with_a_second_write_under_the_prefix_never_half_shows_a_write(apache_kafka, topic,
                                                                                       tmp_path, lease_dir):
    """The first job's keeper is stopped (SIGSTOP) while its job writes (~30 s of rows); a second
    exactly-once job to the same topic (the same default prefix) starts meanwhile, sees the first
    driver's lease stand still for the window and ends the first write -- its log says so.  The
    first job, live all along, then fails cleanly -- its tasks fenced, or its commit finding the
    write ended: none of its rows visible; the second's rows are all visible, none twice.  The
    keeper resumes after 40 s."""
    bootstrap = apache_kafka.bootstrap_servers
    prefix = default_prefix(apache_kafka, topic)
    first = batch_job(apache_kafka, topic, 0, 300_000, 5_000, lease_dir, tmp_path / "first.log")  # ~30 s of rows
    stopped: list[int] = []
    try:
        writing(apache_kafka, prefix, first)
        stopped = keeper_pids(lease_dir)
        assert stopped, "no keeper beats for the first job"
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)
        stalled_at = time.monotonic()
        second = batch_job(apache_kafka, topic, 1_000_000, 1000, 0, lease_dir, tmp_path / "second.log")
        assert second.wait(240) == 0, second.output()[-3000:]
        first_rc = first.wait(240)
        time.sleep(max(0.0, 40 - (time.monotonic() - stalled_at)))
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
        if first.proc.poll() is None:
            first.kill()
    got = [int(v) for v in committed(apache_kafka, topic, 1000, timeout=60)]
    assert len(got) == len(set(got)), "a row twice"
    mine = [v for v in got if v < 1_000_000]
    assert sorted(v for v in got if v >= 1_000_000) == list(range(1_000_000, 1_001_000))
    assert "left open by drivers that are gone" in second.output(), second.output()[-3000:]
    assert mine == [], f"the first write is visible ({len(mine)} of 300000 rows) though the second write ended it"
    # its tasks fenced while writing, or its commit finding the write ended: either way it failed
    assert first_rc != 0 and ("ended by another process" in first.output() or "was fenced" in first.output()), \
        first.output()[-3000:]
    wait_until("nothing open under the prefix", lambda: open_transactions(bootstrap, prefix) == [], timeout=60)


# -- streaming checkpoints Python cannot open ------------------------------------------------------------
@pytest.fixture(scope="module")
def scheme_jar(tmp_path_factory) -> Path:
    """``SchemeOnLocalDisk`` (tests/spark/java): the ``dbfs`` scheme on the local disk, compiled
    against pyspark's own Hadoop client."""
    work = tmp_path_factory.mktemp("scheme")
    api = next(PYSPARK_JARS.glob("hadoop-client-api-*.jar"))
    source = Path(__file__).parents[1] / "spark" / "java" / "SchemeOnLocalDisk.java"
    subprocess.run(["javac", "-nowarn", "-cp", str(api), "-d", str(work / "classes"), str(source)], check=True)
    subprocess.run(["jar", "cf", str(work / "scheme.jar"), "-C", str(work / "classes"), "."], check=True)
    return work / "scheme.jar"


def stream(bootstrap: str, topic: str, checkpoint: str, until: int, cwd: Path, log: Path, conf: dict,
           lease_dir: Path, kill_at=None, host_down: bool = False) -> str:
    """Run the streaming job (working directory ``cwd``) until micro-batch ``until``, or kill its
    whole process group once the proxy holds ``kill_at``'s request (with ``host_down``, its
    keepers too: :func:`crash_support.host_down`)."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1",
               SPARKKAFKA_LEASE_DIR=str(lease_dir), STREAM_JOB_CONF=json.dumps(conf),
               JOB_LEASE_WINDOW_MS=str(LEASE_WINDOW_MS))
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, str(STREAM_JOB), bootstrap, topic, checkpoint, str(until)], env=env,
                                cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        if kill_at is None:
            proc.wait(300)
        else:
            deadline = time.monotonic() + 300
            while not kill_at.wait(0.05):
                assert proc.poll() is None, f"the job ended before its commit was held:\n{log.read_text()[-3000:]}"
                assert time.monotonic() < deadline, f"the driver never got there:\n{log.read_text()[-3000:]}"
            crash_support.host_down(proc.pid, lease_dir) if host_down else os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    return log.read_text()


def exactly_once_values(bootstrap: str, topic: str) -> list[int]:
    got = [int(r.value) for r in consume_all(bootstrap, topic, isolation_level="read_committed", timeout=60)]
    assert got, "nothing committed"
    assert len(got) == len(set(got)), "a row was written twice"
    assert sorted(got) == list(range(len(got))), "rows were lost"
    return got


@pytest.mark.spark
def test_a_streaming_driver_killed_around_its_commits_then_restarted_checkpointed_where_python_cannot_write(
        apache_kafka, proxy, topic, tmp_path, scheme_jar, lease_dir):
    """The query's checkpoint is ``dbfs:/...`` -- a scheme only Hadoop knows here
    (``spark.hadoop.fs.dbfs.impl``), as on Databricks: Python cannot open it.  The driver is
    killed at each point of a micro-batch's commit, each time at a request the proxy holds, and
    restarted; Spark then replays the batch:

    1. before the commit of micro-batch 2 (its tasks' transactions prepared): its first request,
       InitProducerId closing the write (its decision id), never reaches the broker.  The
       driver's keeper aborts the killed run's transactions; the replay writes the batch anew.
    2. between the decision and the last commit of micro-batch 4: the EndTxn of partition 1's
       transaction never reaches the broker (partition 0's may be committed).  The keeper
       commits what the decision records, and the replay finds micro-batch 4 decided (the
       query's latest decision, in the decisions topic) and aborts its own new exactly_once_writes.
    3. after the sink committed micro-batch 6, before Spark recorded it.  Killing between two
       steps would be a race, so the driver is stopped at an observed point just after --
       micro-batch 7's first commit request (nothing of 7 decided) -- and Spark's checkpoint is
       put back to what the crash leaves (``_forget_recorded_batch``).  On restart Spark re-runs
       the newest batch of its offset log that its commit log lacks
       (MicroBatchExecution.populateStartOffsets): 6, whose replay finds it decided and aborts
       its new transactions; micro-batch 7's open ones go with the keeper.

    Every row once, none lost: read_committed shows exactly 0..n-1; read_uncommitted shows more
    (the killed and replayed transactions' rows exist: the test bites).  Nothing is written
    beside the checkpoint or under the working directory: the decisions are in Kafka."""
    checkpoint_dir = tmp_path / "checkpoint"
    checkpoint = f"dbfs:{checkpoint_dir}"
    conf = {"spark.hadoop.fs.dbfs.impl": "SchemeOnLocalDisk", "spark.driver.extraClassPath": str(scheme_jar),
            "spark.executor.extraClassPath": str(scheme_jar)}
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    direct = apache_kafka.bootstrap_servers

    def run(n: int, until: int, kill_at=None) -> str:
        return stream(proxy.address, topic, checkpoint, until, cwd, tmp_path / f"run{n}.log", conf, lease_dir,
                      kill_at=kill_at)

    def held(what: bytes, api_key: ApiKey):
        return proxy.blackhole_request(lambda frame: what in frame, api_key=api_key)

    run(1, 99, held(b"-b2-decision", ApiKey.INIT_PRODUCER_ID))
    assert (checkpoint_dir / "commits").is_dir(), "Spark kept its checkpoint elsewhere: the test did not bite"
    assert _latest_decided(direct, checkpoint) == 1

    out = run(2, 99, held(b"-b4-p1-", ApiKey.END_TXN))
    assert "2 transactions committed" in _decision(out, 2)  # the replay's; the killed run's were the keeper's
    assert _latest_decided(direct, checkpoint) == 4

    out = run(3, 99, held(b"-b7-decision", ApiKey.INIT_PRODUCER_ID))
    assert "was decided before by" in _decision(out, 4)
    assert _latest_decided(direct, checkpoint) == 6
    _forget_recorded_batch(checkpoint_dir, 6)

    out = run(4, 8)
    assert "REACHED" in out, out[-3000:]
    assert "(a replay)" in _decision(out, 6)
    assert not (checkpoint_dir / "pyprod-kafka").exists()
    assert sorted(p.name for p in cwd.iterdir()) in ([], ["spark-warehouse"]), list(cwd.iterdir())
    committed_values = exactly_once_values(direct, topic)
    everything = consume_all(direct, topic, timeout=60)
    assert len(everything) > len(committed_values), "no replayed rows were written: the test did not bite"


def _decision(out: str, batch: int) -> str:
    """What the driver's exactly-once commit of micro-batch ``batch`` said it did."""
    found = [line for line in out.splitlines() if re.search(rf"exactly-once: micro-batch {batch}\b", line)]
    assert found, f"no exactly-once commit of micro-batch {batch}:\n{out[-3000:]}"
    return found[-1]


def _forget_recorded_batch(checkpoint: Path, batch: int) -> None:
    """Spark's checkpoint as a crash right after the sink committed ``batch`` leaves it: Spark
    writes ``offsets/<n>`` before running micro-batch n and ``commits/<n>`` once the sink's
    commit() returned, and plans n+1 (``offsets/<n+1>``) only after that.  So the crash leaves
    ``offsets/<batch>`` without ``commits/<batch>``, and no ``offsets/<batch+1>``; both files,
    written after the moment, go (with their checksums)."""
    for path in (checkpoint / "commits" / str(batch), checkpoint / "offsets" / str(batch + 1)):
        assert path.exists(), f"{path} missing: the driver was not where the test thinks"
        path.unlink()
        path.with_name(f".{path.name}.crc").unlink(missing_ok=True)
    assert not (checkpoint / "commits" / str(batch + 1)).exists()


def _latest_decided(bootstrap: str, checkpoint: str) -> int | None:
    """The micro-batch of the query's latest decision, as the decisions topic holds it."""
    prefix = parse_options({"kafka.bootstrap.servers": bootstrap, "deliveryGuarantee": "exactly-once",
                            "checkpointLocation": str(checkpoint)}, streaming=True).transactional_id_prefix
    with TransactionAdmin({"bootstrap.servers": bootstrap}) as admin:
        latest = DecisionLog(admin).latest_of_query(prefix, time.monotonic() + 30)
    return latest.write.batch if latest is not None else None



# -- the command and a streaming query's decided micro-batch ---------------------------------------------
@pytest.mark.spark
def test_the_command_completes_a_streaming_query_s_decided_micro_batch(apache_kafka, proxy, topic, tmp_path,
                                                                      lease_dir):
    """The query's driver and keeper die between micro-batch 3's decision and its last commit;
    the operator runs the command before restarting: it commits what the decision records (it
    does not abort it), and the restarted query goes on from there, every row once."""
    checkpoint = str(tmp_path / "checkpoint")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    prefix = parse_options({"kafka.bootstrap.servers": "x:1", "deliveryGuarantee": "exactly-once",
                            "checkpointLocation": checkpoint}, streaming=True).transactional_id_prefix
    held = proxy.blackhole_request(lambda frame: b"-b3-p1-" in frame, ApiKey.END_TXN)
    stream(proxy.address, topic, checkpoint, 99, cwd, tmp_path / "run1.log", {}, lease_dir, kill_at=held,
           host_down=True)
    assert list(lease_dir.glob("*/keeper.log")), "no keeper was started for the query: the test did not bite"
    proxy.clear_faults()
    direct = apache_kafka
    # a beat the killed keeper had in flight may land during the command's first look: it then
    # calls the driver alive, and a second look sees the lease stand still
    def dry_run_ending_it() -> str | None:
        out = run_command(direct, "abort", "--prefix", prefix)
        return out if "would end" in out else None

    dry = wait_until("the command to find the query's driver gone", dry_run_ending_it, timeout=60, interval=0)
    assert "commit" in dry, dry
    done = run_command(direct, "abort", "--prefix", prefix, "--yes")
    assert ", 1 committed (their driver had decided to commit them)" in done, done
    assert open_transactions(direct.bootstrap_servers, prefix) == []
    out = stream(proxy.address, topic, checkpoint, 6, cwd, tmp_path / "run2.log", {}, lease_dir)
    assert "REACHED" in out and "(a replay)" in out, out[-3000:]
    exactly_once_values(direct.bootstrap_servers, topic)


# -- write tasks that begin long after planning -------------------------------------------------------------
@pytest.fixture(scope="module", autouse=True)
def late_write(apache_kafka, tmp_path_factory):
    """Started before the module's other tests: a batch write whose tasks begin 130 s after its
    driver planned it (a stage of that long before them, behind a shuffle), while the other
    tests run; a thread watches for its tasks' transactions and then asks, as an observer would,
    whether the driver's lease beats.  Its test, last in the module, reads the verdict."""
    work = tmp_path_factory.mktemp("late-write")
    topic = f"sched-late-{uuid.uuid4().hex[:8]}"
    create_topics(apache_kafka.bootstrap_servers, {topic: 2})
    prefix = default_prefix(apache_kafka, topic)
    lease_dir = work / "leases"
    job = batch_job(apache_kafka, topic, 0, 20_000, 2_000, lease_dir, work / "late.log", delay_s=130)
    planned = time.monotonic()
    verdict: dict = {}

    def watch() -> None:
        try:
            held = writing(apache_kafka, prefix, job, timeout=400)
            verdict["after_s"] = time.monotonic() - planned
            verdict["keepers"] = keeper_pids(lease_dir)
            write = parse(held[0])
            assert write is not None
            with TransactionAdmin({"bootstrap.servers": apache_kafka.bootstrap_servers}) as admin:
                verdict["alive"] = alive_owners(admin, {(prefix, write.owner)}, time.monotonic() + 60)
            verdict["owner"] = (prefix, write.owner)
        except BaseException as e:  # noqa: BLE001 - the test reports it
            verdict["error"] = e

    watcher = threading.Thread(target=watch, name="late-write-watch", daemon=True)
    watcher.start()
    yield {"job": job, "topic": topic, "watcher": watcher, "verdict": verdict}
    if job.proc.poll() is None:
        job.kill()


@pytest.mark.slow
def test_write_tasks_beginning_minutes_after_planning_keep_their_lease(apache_kafka, late_write):
    """The write whose tasks began more than two minutes after planning (``late_write``): the
    keeper still beat for its driver then (an observer saw its lease move), and the write
    committed every row once."""
    job, verdict = late_write["job"], late_write["verdict"]
    late_write["watcher"].join(400)
    assert "error" not in verdict, verdict.get("error")
    assert verdict["after_s"] > 120, "the write's tasks began too early: the test did not bite"
    assert verdict["keepers"], "the keeper is gone"
    assert verdict["alive"] == {verdict["owner"]}, "an observer judged the driver gone"
    assert job.wait(240) == 0, job.output()[-3000:]
    got = committed(apache_kafka, late_write["topic"], 20_000, timeout=60)
    assert sorted(int(v) for v in got) == list(range(20_000))
