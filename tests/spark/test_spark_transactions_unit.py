"""The driver's exactly-once decisions without a broker: which transactions are committed, which
aborted, and what is recorded beside the checkpoint (the broker round trips:
tests/spark/test_spark_exactly_once.py)."""

from __future__ import annotations

import pytest

from sparkkafka_sink.producer.handover import PreparedTransaction
from sparkkafka_sink.spark.commit_message import TaskCommitMessage
from sparkkafka_sink.spark.driver import transactions as T
from sparkkafka_sink.spark.options import SinkOptions


@pytest.fixture
def calls(monkeypatch):
    log = {"end": [], "lingering": [], "admins": 0, "closed": 0, "fenced": [], "order": []}

    class Admin:
        """The coordinator client the driver uses, recording instead of asking a broker."""

        def __init__(self, config):
            log["admins"] += 1

        def close(self):
            log["closed"] += 1

        def fence(self, transactional_id, deadline, timeout_ms=60000):
            log["fenced"].append(transactional_id)
            log["order"].append(f"init {transactional_id}")

        def end(self, prepared, commit, deadline):
            if prepared.transactional_id.endswith("broken"):
                raise T.KafkaError("coordinator says no")
            log["end"].append((prepared.transactional_id, commit))
            log["order"].append("end")

        def abort_lingering(self, prefix, deadline, exclude=(), states=("Ongoing",)):
            log["lingering"].append((prefix, sorted(exclude), tuple(states)))
            log["order"].append("sweep")
            return []

    monkeypatch.setattr(T, "TransactionAdmin", Admin)
    return log


def message(partition: int, txn: str | None) -> TaskCommitMessage:
    prepared = PreparedTransaction(txn, 7, 1, (("t", partition),)).to_json() if txn else None
    return TaskCommitMessage(partition, 0, 1, {}, {}, prepared)


def options(tmp_path) -> SinkOptions:
    return SinkOptions("t", {"bootstrap.servers": "h:9092"}, 0, "q", "run1", str(tmp_path / "log"))


def test_batch_commit_commits_the_kept_attempts_and_aborts_the_rest(calls, tmp_path):
    text = T.commit_all([message(0, "q-p0-t1"), message(1, "q-p1-t5"), None, message(2, None)], options(tmp_path))
    assert calls["end"] == [("q-p0-t1", True), ("q-p1-t5", True)]
    # the write is closed first (its closed marker), the others fenced (open transactions under
    # the prefix, and this write's producers not yet in one), the decision recorded (its commit
    # marker), then the winners committed
    assert calls["fenced"] == ["q-rrun1-closed", "q-rrun1-commit"]
    assert calls["lingering"] == [("q", ["q-p0-t1", "q-p1-t5"], ("Ongoing",)),
                                  ("q-rrun1-p", ["q-p0-t1", "q-p1-t5"], ("Empty",))]
    assert calls["order"] == ["init q-rrun1-closed", "sweep", "sweep", "init q-rrun1-commit", "end", "end"]
    assert "2 transactions committed" in text
    assert calls["admins"] == calls["closed"] == 1  # one set of connections for the whole commit


def test_batch_commit_failure_says_what_is_visible(calls, tmp_path):
    with pytest.raises(T.TransactionCommitError) as info:
        T.commit_all([message(0, "q-p0-t1"), message(1, "q-p1-broken")], options(tmp_path))
    text = str(info.value)
    assert "1 of 2 tasks" in text and "t-1" in text and "NOT visible" in text and "t-0" in text


def test_micro_batch_commit_then_replays(calls, tmp_path):
    opts = options(tmp_path)
    T.commit_micro_batch([message(0, "q-b3-p0-t1")], 3, opts)
    assert calls["end"] == [("q-b3-p0-t1", True)]
    assert (tmp_path / "log" / "3.intent").exists() and (tmp_path / "log" / "3.done").exists()
    calls["end"].clear()
    text = T.commit_micro_batch([message(0, "q-b3-p0-t9")], 3, opts)  # Spark replays batch 3
    assert calls["end"] == [("q-b3-p0-t9", False)] and "committed before" in text


def test_micro_batch_commit_finishes_what_a_crashed_run_decided(calls, tmp_path):
    opts = options(tmp_path)
    log = T.MicroBatchLog(opts.commit_log_dir)
    log.write_intent(4, [PreparedTransaction("q-b4-p0-old", 7, 1, (("t", 0),))])
    text = T.commit_micro_batch([message(0, "q-b4-p0-new")], 4, opts)
    assert calls["end"] == [("q-b4-p0-old", True), ("q-b4-p0-new", False)]
    assert log.done(4) and "crashed" in text


def test_micro_batch_abort_keeps_a_decided_batch(calls, tmp_path):
    opts = options(tmp_path)
    T.MicroBatchLog(opts.commit_log_dir).write_intent(5, [PreparedTransaction("q-b5-old", 7, 1, ())])
    T.abort_micro_batch([message(0, "q-b5-new")], 5, opts)
    assert calls["end"] == [("q-b5-new", False)] and calls["lingering"] == []



def test_micro_batches_close_their_own_write(calls, tmp_path):
    T.abort_micro_batch([message(0, "q-rrun1-b7-p0-t3")], 7, options(tmp_path))
    assert calls["fenced"] == ["q-rrun1-b7-closed"]
    assert calls["lingering"][-1] == ("q-rrun1-b7-p", [], ("Empty",))


def test_a_replayed_micro_batch_is_not_summarised_as_committed(calls, tmp_path, capfd):
    """Spark replays a committed micro-batch: its new transactions are aborted, so the driver's
    log must not say its records were committed."""
    from sparkkafka_sink.spark.driver.commit import commit_write
    from sparkkafka_sink.spark.plan import ColumnLayout, WritePlan

    plan = WritePlan(options(tmp_path), ColumnLayout("value"))
    first = TaskCommitMessage(0, 0, 40, {("t", 0): (40, 0, 39)}, {}, PreparedTransaction("q-b6-p0-t1", 7, 1,
                                                                                        (("t", 0),)).to_json())
    commit_write([first], plan, 6)
    assert "micro-batch 6 committed: 40 records" in capfd.readouterr().err
    replay = TaskCommitMessage(0, 0, 40, {("t", 0): (40, 40, 79)}, {}, PreparedTransaction("q-b6-p0-t2", 7, 1,
                                                                                         (("t", 0),)).to_json())
    commit_write([replay], plan, 6)
    err = capfd.readouterr().err
    assert "was committed before (a replay)" in err and "committed: 40 records" not in err
