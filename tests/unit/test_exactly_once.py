"""The exactly-once write protocol without a broker (``sparkkafka_sink.exactly_once``): the ids,
the decision record, the judgement of what ending a write takes, the driver's commit and whoever
ends a write for it, each against a coordinator modelled in memory -- and the schedules where a
driver and an ender interleave.  The same schedules against Apache Kafka, with real processes:
tests/spark/test_spark_exactly_once_schedules.py."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time

import pytest
from eos_model import TIMEOUT_MS, Admin, Cluster, Decisions, Direct, on_model

from sparkkafka_sink.errors import ProducerFencedError
from sparkkafka_sink.exactly_once.commit import (
    IncompleteCommitError,
    UndecidedError,
    WriteEndedError,
    commit_write,
)
from sparkkafka_sink.exactly_once.decision import Decision, DecisionFormatError
from sparkkafka_sink.exactly_once.decision_log import _committed, _whole_batches
from sparkkafka_sink.exactly_once.ids import WriteId, is_decision_id, lease_id, parse
from sparkkafka_sink.exactly_once.keeper import RETAIN_S, KeeperSpec, Registry, sweep
from sparkkafka_sink.exactly_once.leases import judge
from sparkkafka_sink.exactly_once.owner import stat
from sparkkafka_sink.exactly_once.settle import Listed, plan, settle
from sparkkafka_sink.producer.control_requests import TransactionDescription
from sparkkafka_sink.producer.handover import PreparedTransaction
from sparkkafka_sink.record.batch import RecordBatchBuilder

W = WriteId("pfx", "0123abcd", "a1b2c3")
STREAM = WriteId("q", "0123abcd", "a1b2c3", 7)


# -- ids and the record ----------------------------------------------------------------------------
def test_ids_name_the_write_and_parse_back():
    assert W.name == "pfx-r0123abcda1b2c3" and W.attempt(3, 17) == "pfx-r0123abcda1b2c3-p3-t17"
    assert W.decision_id == "pfx-r0123abcda1b2c3-decision" and is_decision_id(W.decision_id)
    assert not is_decision_id(W.attempt(0, 1))
    assert STREAM.name == "q-r0123abcda1b2c3-b7" and STREAM.streaming and STREAM.decision_key == "q"
    assert W.decision_key == W.name and not W.streaming
    for write in (W, STREAM, WriteId("a-rb-r-p1", "ffffffff", "000000", 12)):
        assert parse(write.attempt(2, 5)) == write and parse(write.decision_id) == write and parse(write.name) == write
    assert parse("pfx-lease-0123abcd") is None and parse("loader-7") is None
    assert lease_id("pfx", "0123abcd") == "pfx-lease-0123abcd"


def test_the_decision_record_round_trips_and_refuses_what_is_not_one():
    winners = (PreparedTransaction(W.attempt(0, 1), 7, 2, (), True), PreparedTransaction(W.attempt(1, 4), 8, 0, ()))
    decision = Decision(W, winners)
    assert Decision.from_bytes(decision.to_bytes()) == decision
    assert len(decision.to_bytes()) < 200  # the partitions are not kept
    with pytest.raises(ValueError, match="not a transaction of the write"):
        Decision(W, (PreparedTransaction("other-p0-t1", 1, 0, ()),)).to_bytes()
    for junk in (b"{}", b"not json", json.dumps({"v": 9, "write": W.name, "winners": []}).encode(),
                 json.dumps({"v": 1, "write": "no-write", "winners": []}).encode()):
        with pytest.raises(DecisionFormatError):
            Decision.from_bytes(junk)


def test_a_record_counts_once_its_producer_s_commit_marker_follows_it():
    assert _committed([(10, True)], 5) and not _committed([(10, False)], 5)
    assert not _committed([], 5) and not _committed([(3, True)], 5)  # an earlier transaction's marker
    assert not _committed([(12, True), (9, False)], 5)  # the first marker after the record decides


def test_a_fetch_ending_inside_a_batch_keeps_the_whole_ones():
    builder = RecordBatchBuilder(0, 1 << 20)
    builder.try_append(0, b"k", b"v" * 100, [])
    batch = bytes(builder.build())
    assert _whole_batches(batch + batch[:30]) == batch and _whole_batches(batch * 2) == batch * 2


# -- the protocol on the coordinator model (tests/eos_model.py), in hand-picked schedules -----------------
def winners_of(cluster: Cluster, *attempts: tuple[int, int], write: WriteId = W) -> list[PreparedTransaction]:
    """Task attempts that began and wrote their partition's row: their prepared transactions."""
    out = []
    for partition, attempt in attempts:
        txn_id = write.attempt(partition, attempt)
        t = cluster.init(txn_id)
        cluster.begin(txn_id, t.pid, t.epoch)
        cluster.produce(txn_id, t.pid, t.epoch, f"row-{partition}")
        out.append(PreparedTransaction(txn_id, t.pid, t.epoch, (("t", partition),), cluster.v2))
    return out


def drive(d: Direct, winners: list[PreparedTransaction], write: WriteId = W):
    """The driver's commit of ``write`` on the model, as ``d`` schedules it."""
    with on_model(d):
        return commit_write(Admin(d), Decisions(d), {}, write, winners, time.monotonic() + 10)


def end(d: Direct, write: WriteId = W):
    """An ender (the keeper, the next write, the command, Spark's abort) ends ``write``."""
    return settle(Admin(d), Decisions(d), write, time.monotonic() + 10)


def steps(d: Direct, name: str = "driver") -> list[str]:
    return [line.split(": ", 1)[1] for line in d.cluster.trace if line.startswith(name + ": ")]


# -- the judgement ---------------------------------------------------------------------------------
def test_plan_commits_the_winners_their_coordinators_describe_open_and_fences_the_rest():
    winners = [PreparedTransaction(W.attempt(p, a), pid, 0, ()) for p, a, pid in
               ((0, 1, 7), (1, 2, 8), (2, 3, 9), (3, 4, 10), (4, 5, 11))]
    described = {W.attempt(0, 1): TransactionDescription("Ongoing", 7, 0, 60000, 0, ()),
                 W.attempt(1, 2): TransactionDescription("CompleteCommit", 8, 1, 60000, -1, ()),  # v2 bumped it
                 W.attempt(2, 3): TransactionDescription("Ongoing", 99, 0, 60000, 0, ()),  # another producer id
                 W.attempt(3, 4): TransactionDescription("CompleteAbort", 10, 1, 60000, -1, ()),  # timed out
                 W.attempt(4, 5): None}  # expired long ago
    listed = [Listed(W.attempt(0, 5), 11, "Ongoing"),   # a loser
              Listed(W.attempt(1, 6), 12, "Empty"),     # initialised before the close, not begun
              Listed(W.decision_id, 13, "Empty")]       # the listing missed winner 0: it is still committed
    ending = plan(W, listed, winners, described)
    assert [w.transactional_id for w in ending.commit] == [W.attempt(0, 1)]
    assert ending.fence == (W.attempt(0, 5), W.attempt(1, 6))
    assert [w.transactional_id for w in ending.committed] == [W.attempt(1, 2)]
    assert [w.transactional_id for w in ending.aborted] == [W.attempt(3, 4)]
    assert [w.transactional_id for w in ending.unknown] == [W.attempt(2, 3), W.attempt(4, 5)]
    assert plan(W, listed, (), {}).commit == () and W.attempt(0, 5) in plan(W, listed, (), {}).fence


# -- the driver's commit ----------------------------------------------------------------------------
def test_the_driver_closes_sweeps_decides_then_commits():
    d = Direct()
    winners = winners_of(d.cluster, (0, 1), (1, 2))
    d.cluster.begin(W.attempt(0, 3), *(lambda t: (t.pid, t.epoch))(d.cluster.init(W.attempt(0, 3))))  # a loser
    d.cluster.init(W.attempt(1, 4))    # one initialised, not begun
    done = drive(d, winners)
    assert done.committed == [W.attempt(0, 1), W.attempt(1, 2)] and done.aborted == [W.attempt(0, 3), W.attempt(1, 4)]
    assert steps(d) == [f"close {W} (InitProducerId {W.decision_id})", f"DescribeTransactions {W.attempt(0, 1)}",
                        f"DescribeTransactions {W.attempt(1, 2)}", f"ListTransactions {W}-",
                        f"InitProducerId {W.attempt(0, 3)}", f"InitProducerId {W.attempt(1, 4)}",
                        f"record the decision of {W}", f"EndTxn commit {W.attempt(0, 1)}",
                        f"EndTxn commit {W.attempt(1, 2)}", f"forget the decision of {W}"]
    assert d.cluster.committed(W) == {W.attempt(0, 1), W.attempt(1, 2)} and not d.cluster.open(W)


def test_a_streaming_write_keeps_its_decision():
    d = Direct()
    drive(d, winners_of(d.cluster, (0, 1), write=STREAM), STREAM)
    assert f"forget the decision of {STREAM}" not in steps(d) and d.cluster.decisions[-1].write == STREAM


def test_a_write_ended_before_its_close_commits_nothing():
    d = Direct()
    winners = winners_of(d.cluster, (0, 1))
    end(d.as_("ender"))  # an ender judged the driver gone
    with pytest.raises(WriteEndedError, match="was ended before its driver closed it: by another process"):
        drive(d, winners)
    assert not d.cluster.committed(W) and not d.cluster.open(W) and not d.cluster.decisions


def test_an_ender_between_close_and_decision_leaves_nothing_visible():
    """The driver closed, an ender fenced and aborted all of it, then the driver's decision: it
    is fenced, so nothing is committed -- never half of the write."""
    d = Direct()
    d.hook = lambda step: step.startswith("record") and end(d.as_("ender"))
    winners = winners_of(d.cluster, (0, 1), (1, 2))
    with pytest.raises(WriteEndedError, match="before its driver's decision was recorded.*nothing of it is visible"):
        drive(d, winners)
    assert not d.cluster.committed(W) and not d.cluster.open(W) and not d.cluster.decisions


def test_an_ender_after_the_decision_completes_it_as_recorded():
    """An ender that comes once the decision is recorded commits the winners (the driver's own
    commits of them then answer success again): the write is visible whole."""
    d = Direct()
    d.hook = lambda step: step.startswith("EndTxn commit") and not d.cluster.committed(W) and end(d.as_("ender"))
    winners = winners_of(d.cluster, (0, 1), (1, 2))
    done = drive(d, winners)
    assert d.cluster.committed(W) == {W.attempt(0, 1), W.attempt(1, 2)} and len(done.committed) == 2


def test_a_decision_whose_answer_was_lost_and_whose_retry_was_fenced_is_a_success():
    """Bug 3 of issue 51: the decision's EndTxn landed, its answer was lost, an ender fenced the
    id (and, reading the decision, committed the winners) before the producer's retry, which is
    then fenced.  The driver reads the decisions topic: the write is whole, and the job succeeds
    -- before, it said nothing was visible, and a user who ran it again had every row twice."""
    d = Direct(faults={"record the decision": "answer lost, then retried"})
    d.hook = lambda step: step.startswith("retry the decision's EndTxn") and end(d.as_("ender"))
    winners = winners_of(d.cluster, (0, 1), (1, 2))
    done = drive(d, winners)
    assert sorted(done.committed) == [W.attempt(0, 1), W.attempt(1, 2)]
    assert d.cluster.committed(W) == {W.attempt(0, 1), W.attempt(1, 2)}


def test_no_answer_to_the_decision_is_resolved_by_reading_the_decisions_topic():
    """The decision's transaction got no answer (it never landed): the driver fences the id
    itself, reads that no decision was recorded, aborts all of it and says so truly."""
    d = Direct(faults={"record the decision": "no answer"})
    winners = winners_of(d.cluster, (0, 1))
    with pytest.raises(WriteEndedError, match="nothing of it is visible; running the job again writes its rows once"):
        drive(d, winners)
    assert not d.cluster.committed(W) and not d.cluster.open(W)


def test_when_the_decisions_topic_cannot_be_read_either_the_error_says_it_is_not_known():
    d = Direct(faults={"record the decision": "no answer", "read the decision": "no answer"})
    winners = winners_of(d.cluster, (0, 1))
    with pytest.raises(UndecidedError, match="not known here.*all of it visible.*or none.*may write its rows twice"):
        drive(d, winners)
    settled = end(d.as_("ender"))  # whoever ends it next knows
    assert not settled.decided and not d.cluster.committed(W) and not d.cluster.open(W)


def test_a_decided_write_is_never_aborted_after_a_failed_commit():
    """EndTxn of one winner gets no answer past the budget: the job fails naming the write, the
    other winners are not aborted, and whoever ends the write next commits the rest."""
    d = Direct(faults={f"EndTxn commit {W.attempt(1, 2)}": "no answer"})
    winners = winners_of(d.cluster, (0, 1), (1, 2))
    with pytest.raises(IncompleteCommitError) as info:
        drive(d, winners)
    assert info.value.pending == (W.attempt(1, 2),) and "nothing decided is ever aborted" in str(info.value)
    assert "do not run the job again" in str(info.value)
    assert d.cluster.committed(W) == {W.attempt(0, 1)} and d.cluster.open(W) == {W.attempt(1, 2)}
    settled = end(d.as_("ender"))  # Spark's abort, the keeper, the command
    assert settled.decided and settled.committed == [W.attempt(1, 2)] and settled.aborted == []
    assert d.cluster.committed(W) == {W.attempt(0, 1), W.attempt(1, 2)}


def test_an_ender_whose_listing_misses_an_open_winner_still_commits_it():
    """Bug 2 of issue 51: a listing taken while a __transaction_state partition changes leader
    misses an open winner; the ender asks the winner's own coordinator, and commits it -- before,
    it recorded the winner lost, and its coordinator aborted it later: the write partly visible."""
    d = Direct(faults={f"EndTxn commit {W.attempt(1, 2)}": "no answer"})
    winners = winners_of(d.cluster, (0, 1), (1, 2))
    with pytest.raises(IncompleteCommitError):
        drive(d, winners)
    ender = Direct(d.cluster, faults={"ListTransactions": "misses one"}, miss=W.attempt(1, 2), name="ender")
    settled = end(ender)
    assert settled.committed == [W.attempt(1, 2)] and not settled.lost
    d.cluster.now_ms += 10 * TIMEOUT_MS
    d.cluster.expire()
    assert d.cluster.committed(W) == {W.attempt(0, 1), W.attempt(1, 2)}


def test_a_winner_its_coordinator_aborted_means_nothing_is_committed():
    d = Direct()
    winners = winners_of(d.cluster, (0, 1), (1, 2))
    d.cluster.init(W.attempt(1, 2))  # its transaction aborted, the epoch bumped
    with pytest.raises(WriteEndedError, match=r"no longer open .*nothing of it is visible"):
        drive(d, winners)
    assert not d.cluster.committed(W) and not d.cluster.open(W) and not d.cluster.decisions


def test_a_write_whose_winners_are_about_to_time_out_is_aborted_before_anything_is_decided():
    """Bug 1 of issue 51: the driver's commit needs time after it decides; a winner whose
    transaction has less left (counted from its start, as its coordinator counts) would be
    aborted by its coordinator mid-commit, the rest committed.  The driver aborts all of it
    first, naming kafka.transaction.timeout.ms -- before, it decided, and the write was left
    partly visible."""
    d = Direct()
    winners = winners_of(d.cluster, (0, 1), (1, 2))
    d.cluster.now_ms += TIMEOUT_MS - 20_000  # the tasks took all but 20 s of their transactions' time

    def slow(step: str) -> None:  # the commit's own steps take their time
        if step.startswith("EndTxn commit"):
            d.cluster.now_ms += 15_000

    d.hook = slow
    with pytest.raises(WriteEndedError, match=r"oldest transactions have \d+ s left of their "
                                              r"transaction.timeout.ms .*nothing of it is committed"):
        drive(d, winners)
    assert not d.cluster.committed(W) and not d.cluster.decisions
    d.cluster.now_ms += 10 * TIMEOUT_MS
    d.cluster.expire()
    assert not d.cluster.committed(W)


def test_the_commit_runs_within_its_winners_time():
    """With time enough, the commit's own deadline is no later than its oldest winner's end."""
    d = Direct()
    winners = winners_of(d.cluster, (0, 1))
    d.cluster.now_ms += TIMEOUT_MS - 100_000
    assert drive(d, winners).committed == [W.attempt(0, 1)]


def test_a_late_attempt_that_begins_after_the_sweep_is_never_committed():
    """The schedule of the two listings: an attempt initialised before the close, beginning its
    transaction after the driver listed the write.  One listing holds it while it is initialised,
    so it is fenced: its begin fails, and a later ender commits only the recorded winners."""
    d = Direct()
    winners = winners_of(d.cluster, (0, 1))
    late = d.cluster.init(W.attempt(0, 2))  # the late attempt, initialised (it found the write open)
    held = (late.pid, late.epoch)
    drive(d, winners)
    with pytest.raises(ProducerFencedError):
        d.cluster.begin(W.attempt(0, 2), *held)
    end(d.as_("ender"))
    assert d.cluster.committed(W) == {W.attempt(0, 1)} and not d.cluster.open(W)


# -- liveness ------------------------------------------------------------------------------------
def test_a_lease_that_moves_is_a_live_owner_and_one_that_stands_still_is_gone():
    live, dead = WriteId("p", "aaaaaaaa", "000001"), WriteId("p", "bbbbbbbb", "000002")
    d = Direct()
    winners_of(d.cluster, (0, 1), write=live)
    winners_of(d.cluster, (0, 1), write=dead)
    d.cluster.init(lease_id("p", "aaaaaaaa"))
    d.cluster.init(lease_id("p", "bbbbbbbb"))
    d.hook = lambda step: step == f"DescribeTransactions {lease_id('p', 'aaaaaaaa')}" and \
        d.cluster.init(lease_id("p", "aaaaaaaa"))  # its keeper beats
    alive, gone = judge(Admin(d), "p-r", time.monotonic() + 10, window_s=1.5)
    assert list(alive) == [live] and list(gone) == [dead]
    _, gone = judge(Admin(d), "p-r", time.monotonic() + 10, spare=("bbbbbbbb",), window_s=1.5)
    assert not gone


# -- the keeper's files --------------------------------------------------------------------------
def test_the_registry_keeps_writes_and_knows_its_keeper_by_more_than_a_pid(tmp_path):
    registry = Registry("pfx", "0123abcd", tmp_path)
    registry.register(W.name, 60)
    registry.abandon(STREAM.name)
    entries = registry.entries()
    assert not entries[W.name]["abandoned"] and entries[STREAM.name]["abandoned"]
    registry.unregister(W.name)
    assert list(registry.entries()) == [STREAM.name]
    assert registry.keeper() is None
    registry.announce()  # as the keeper does: this process, its start time, its lease
    assert registry.keeper() is not None and registry.keeper()[0] == os.getpid()
    found = json.loads((registry.dir / "keeper.json").read_text())
    (registry.dir / "keeper.json").write_text(json.dumps({**found, "start": found["start"] + 1}))
    assert registry.keeper() is None  # the pid lives, but it is another process now
    (registry.dir / "keeper.json").write_text(json.dumps({**found, "lease": "pfx-lease-ffffffff"}))
    assert registry.keeper() is None
    spec = KeeperSpec({"bootstrap.servers": "h:1"}, "pfx", "0123abcd", (1, 2), "d")
    assert KeeperSpec.from_json(spec.to_json()) == spec


def test_a_registry_goes_once_its_driver_and_keeper_are_gone_and_it_stood_still_for_a_week(tmp_path):
    exited = subprocess.Popen([sys.executable, "-c", "pass"])
    exited.wait()
    dead = (exited.pid, 1)  # a process that ended (a pid reused since is another: its start differs)
    me = (os.getpid(), stat(os.getpid())[2])

    def age(found: Registry) -> None:
        then = time.time() - RETAIN_S - 60
        for path in [found.dir, *found.dir.rglob("*")]:
            os.utime(path, (then, then))

    def registry(owner: str, driver: tuple[int, int] | None, *, old: bool = True) -> Registry:
        found = Registry("pfx", owner, tmp_path)
        found.register(W.name, 60)
        found.log_file.write_text("the keeper's log")
        if driver is not None:
            found.own(driver)
        if old:
            age(found)
        return found

    gone = registry("0000dead", dead)
    unrecorded = registry("00000old", None)  # written before driver.json: its driver unknown
    recent = registry("0000late", dead, old=False)  # its log may still be read
    living = registry("00000me0", me)
    kept_by_keeper = registry("000keep0", dead)
    kept_by_keeper.announce()  # this process beats for it
    age(kept_by_keeper)
    starting = registry("00000lck", dead)
    held = starting.lock()  # a keeper being started for it
    age(starting)
    spared = registry("0000self", dead)
    (tmp_path / "not-a-registry").mkdir()

    removed = sweep(tmp_path, spared.dir)
    assert sorted(removed) == sorted([gone.dir, unrecorded.dir])
    assert not gone.dir.exists() and not unrecorded.dir.exists()
    for kept in (recent, living, kept_by_keeper, starting, spared):
        assert kept.log_file.exists(), kept.owner
    assert (tmp_path / "not-a-registry").is_dir()
    fcntl.flock(held, fcntl.LOCK_UN)
    held.close()
    assert sweep(tmp_path, spared.dir) == [starting.dir]
    assert sweep(tmp_path / "absent", spared.dir) == []


def test_a_keeper_goes_only_when_no_write_is_registered_under_the_lock_writes_register_under(tmp_path):
    """The keeper's decision to go and a write's registration take one lock: a write registered
    while the keeper decides keeps it, and a keeper that went is seen gone by the next write,
    which then starts one (before, a write could register with a keeper that was exiting)."""
    registry = Registry("pfx", "0123abcd", tmp_path)
    registry.announce()  # the keeper beats
    with registry.lock():  # a write registers, holding the lock (ensure_keeper)
        registry.register(W.name, 60)
    assert not registry.retire_if_idle() and registry.keeper() is not None
    registry.unregister(W.name)
    assert registry.retire_if_idle() and registry.keeper() is None  # gone: the next write starts one
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time\n"
                               f"h = open({str(registry.dir / 'keeper.lock')!r}, 'w'); fcntl.flock(h, fcntl.LOCK_EX)\n"
                               "print('held', flush=True); time.sleep(1.5)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        registry.announce()
        started = time.monotonic()
        assert not registry.retire_if_idle() or time.monotonic() - started > 1.0  # it waited for the lock
    finally:
        holder.wait()


def test_the_keeper_keeps_trying_until_its_dead_drivers_write_is_ended(tmp_path, monkeypatch):
    """The driver died after recording its decision; the keeper's first attempts fail (a broker
    down): it tries again until the write is completed as recorded, then lets it go."""
    from sparkkafka_sink.exactly_once import keeper

    d = Direct(name="keeper", faults={f"InitProducerId {W.decision_id}": "no answer",
                                      "read the decision": "no answer"})
    winners = winners_of(d.cluster, (0, 1), (1, 2))
    d.cluster.init(W.decision_id)
    d.cluster.decisions.append(Decision(W, tuple(winners)))
    registry = Registry("pfx", "0123abcd", tmp_path)
    registry.register(W.name, 600)
    spec = KeeperSpec({"bootstrap.servers": "h:1"}, "pfx", "0123abcd", (1, 2), "d")
    keeper._end_all(Admin(d), Decisions(d), spec, registry, backoff_s=0.01)
    assert d.cluster.committed(W) == {W.attempt(0, 1), W.attempt(1, 2)} and not registry.entries()
    assert sum(step == f"InitProducerId {W.decision_id}" for step in steps(d, "keeper")) == 3


def test_the_keeper_lets_a_write_go_once_its_transactions_time_passed(tmp_path, caplog):
    from sparkkafka_sink.exactly_once import keeper

    class Down(Admin):
        def fence(self, txn_id, deadline):
            raise ProducerFencedError("the cluster cannot be reached")  # any KafkaError

    d = Direct(name="keeper")
    registry = Registry("pfx", "0123abcd", tmp_path)
    registry.register(W.name, -1)  # its time passed already
    spec = KeeperSpec({"bootstrap.servers": "h:1"}, "pfx", "0123abcd", (1, 2), "d")
    keeper._end_all(Down(d), Decisions(d), spec, registry, backoff_s=0.01)
    assert not registry.entries() and "could not be ended before its transactions' time passed" in caplog.text
