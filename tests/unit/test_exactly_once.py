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
from dataclasses import dataclass

import pytest

from sparkkafka_sink.errors import KafkaError, ProducerFencedError
from sparkkafka_sink.exactly_once import commit as commit_module
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


# -- a coordinator in memory ------------------------------------------------------------------------
@dataclass
class Txn:
    pid: int
    epoch: int
    state: str = "Empty"


class Coordinator:
    """Transactional ids as Kafka's coordinator keeps them: InitProducerId bumps the epoch (an
    open transaction aborted first), EndTxn under the current epoch ends it, a commit asked
    again answers success; the decisions topic is a list of committed records."""

    def __init__(self):
        self.ids: dict[str, Txn] = {}
        self.pids = iter(range(100, 10_000))
        self.log: list[str] = []
        self.decisions: list[Decision] = []
        self.fail_end: set[str] = set()

    # the task side
    def begin(self, txn_id: str) -> PreparedTransaction:
        t = self.init(txn_id)
        t.state = "Ongoing"
        return PreparedTransaction(txn_id, t.pid, t.epoch, (("t", 0),))

    def init(self, txn_id: str) -> Txn:
        t = self.ids.get(txn_id)
        if t is None:
            t = self.ids[txn_id] = Txn(next(self.pids), 0)
        else:
            t.epoch += 2 if t.state == "Ongoing" else 1
            t.state = "Empty"
        return t

    # the admin the protocol uses
    def fence(self, txn_id: str, deadline: float) -> None:
        self.log.append(f"fence {txn_id}")
        self.init(txn_id)

    def end(self, prepared: PreparedTransaction, commit: bool, deadline: float) -> None:
        self.log.append(f"end {prepared.transactional_id}")
        if prepared.transactional_id in self.fail_end:
            raise KafkaError("no answer in time")
        t = self.ids[prepared.transactional_id]
        if (t.pid, t.epoch) != (prepared.producer_id, prepared.producer_epoch):
            raise ProducerFencedError("fenced")
        if t.state == "Ongoing":
            t.state = "CompleteCommit" if commit else "CompleteAbort"
        elif t.state != ("CompleteCommit" if commit else "CompleteAbort"):
            raise KafkaError(f"invalid state {t.state}")

    def open_transactions(self, prefix: str, deadline: float, states: tuple[str, ...] = ("Ongoing",)) -> list:
        self.log.append(f"list {prefix}")
        return [(i, t.pid, t.state) for i, t in sorted(self.ids.items()) if i.startswith(prefix) and t.state in states]

    def describe(self, txn_id: str, deadline: float) -> TransactionDescription | None:
        t = self.ids.get(txn_id)
        return None if t is None else TransactionDescription(t.state, t.pid, t.epoch, 60000, -1, ())

    def visible(self) -> set[str]:
        return {i for i, t in self.ids.items() if t.state == "CompleteCommit" and not is_decision_id(i)}

    def still_open(self) -> set[str]:
        return {i for i, t in self.ids.items() if t.state == "Ongoing"}


class Decisions:
    """The decisions topic as ``DecisionLog`` answers: the committed record of a write."""

    topic = "pyprod-kafka-decisions"

    def __init__(self, coordinator: Coordinator):
        self.c = coordinator

    def partitions(self, deadline: float, create: bool = False) -> int:
        return 16

    def decision_of(self, write: WriteId, deadline: float) -> Decision | None:
        self.c.log.append(f"read {write}")
        return next((d for d in reversed(self.c.decisions) if d.write == write), None)


class Recorder:
    """``DecisionRecorder`` on the model: its transaction commits only under the epoch its close got."""

    def __init__(self, c: Coordinator, write: WriteId, hook=None, fail_record: bool = False):
        self.c, self.write, self.hook, self.fail_record = c, write, hook or (lambda step: None), fail_record
        self.epoch = None

    def close(self, timeout_s: float) -> bool:
        self.c.log.append(f"close {self.write}")
        self.epoch = self.c.init(self.write.decision_id).epoch
        self.hook("closed")
        return self.epoch == 0

    def record(self, decision: Decision, timeout_s: float) -> bool:
        self.hook("recording")
        if self.fail_record:
            raise KafkaError("the EndTxn got no answer")
        if self.c.ids[self.write.decision_id].epoch != self.epoch:
            return False
        self.c.log.append(f"record {self.write}")
        self.c.decisions.append(decision)
        self.hook("recorded")
        return True

    def forget(self, timeout_s: float) -> None:
        self.c.log.append(f"forget {self.write}")

    def close_producer(self) -> None:
        pass


@pytest.fixture
def c(monkeypatch):
    coordinator = Coordinator()
    coordinator.recorder = {}

    def recorder(config, write, topic, partitions):
        return Recorder(coordinator, write, **coordinator.recorder)

    monkeypatch.setattr(commit_module, "DecisionRecorder", recorder)
    return coordinator


def drive(c: Coordinator, winners: list[PreparedTransaction], write: WriteId = W):
    return commit_write(c, Decisions(c), {}, write, winners, time.monotonic() + 10)


# -- the judgement ---------------------------------------------------------------------------------
def test_plan_commits_open_winners_and_fences_everything_else():
    winners = [PreparedTransaction(W.attempt(0, 1), 7, 0, ()), PreparedTransaction(W.attempt(1, 2), 8, 0, ()),
               PreparedTransaction(W.attempt(2, 3), 9, 0, ()), PreparedTransaction(W.attempt(3, 4), 10, 0, ())]
    listed = [Listed(W.attempt(0, 1), 7, "Ongoing"), Listed(W.attempt(1, 2), 8, "PrepareCommit"),
              Listed(W.attempt(2, 3), 99, "Ongoing"),   # re-initialised: not the recorded transaction
              Listed(W.attempt(0, 5), 11, "Ongoing"),   # a loser
              Listed(W.attempt(1, 6), 12, "Empty"),     # initialised before the close, not begun
              Listed(W.decision_id, 13, "Empty")]
    ending = plan(W, listed, winners)
    assert [w.transactional_id for w in ending.commit] == [W.attempt(0, 1), W.attempt(1, 2)]
    assert ending.fence == (W.attempt(0, 5), W.attempt(1, 6))
    assert [w.transactional_id for w in ending.missing] == [W.attempt(2, 3), W.attempt(3, 4)]
    assert plan(W, listed, ()).commit == () and W.attempt(0, 1) in plan(W, listed, ()).fence


# -- the driver's commit ----------------------------------------------------------------------------
def test_the_driver_closes_sweeps_decides_then_commits(c):
    winners = [c.begin(W.attempt(0, 1)), c.begin(W.attempt(1, 2))]
    c.begin(W.attempt(0, 3))   # a losing attempt
    c.init(W.attempt(1, 4))    # one initialised, not begun
    done = drive(c, winners)
    assert done.committed == [W.attempt(0, 1), W.attempt(1, 2)] and done.aborted == [W.attempt(0, 3), W.attempt(1, 4)]
    assert c.log == [f"close {W}", f"list {W}-", f"fence {W.attempt(0, 3)}", f"fence {W.attempt(1, 4)}",
                     f"record {W}", f"end {W.attempt(0, 1)}", f"end {W.attempt(1, 2)}", f"forget {W}"]
    assert c.visible() == {W.attempt(0, 1), W.attempt(1, 2)} and not c.still_open()


def test_a_streaming_write_keeps_its_decision(c):
    drive(c, [c.begin(STREAM.attempt(0, 1))], STREAM)
    assert f"forget {STREAM}" not in c.log and c.decisions[-1].write == STREAM


def test_a_write_ended_before_its_close_commits_nothing(c):
    winners = [c.begin(W.attempt(0, 1))]
    settle(c, Decisions(c), W, time.monotonic() + 10)  # an ender judged the driver gone
    with pytest.raises(WriteEndedError, match="ended by another process before its driver closed it"):
        drive(c, winners)
    assert not c.visible() and not c.still_open() and not c.decisions


def test_an_ender_between_close_and_decision_leaves_nothing_visible(c):
    """The driver closed, an ender fenced and aborted all of it, then the driver's decision: it
    is fenced, so nothing is committed -- never half of the write."""
    winners = [c.begin(W.attempt(0, 1)), c.begin(W.attempt(1, 2))]
    c.recorder = {"hook": lambda step: step == "recording" and settle(c, Decisions(c), W, time.monotonic() + 10)}
    with pytest.raises(WriteEndedError, match="before its driver's decision was recorded"):
        drive(c, winners)
    assert not c.visible() and not c.still_open() and not c.decisions


def test_an_ender_after_the_decision_completes_it_as_recorded(c):
    """An ender that comes once the decision is recorded commits the winners (the driver's own
    commits of them then answer success again): the write is visible whole."""
    winners = [c.begin(W.attempt(0, 1)), c.begin(W.attempt(1, 2))]
    c.recorder = {"hook": lambda step: step == "recorded" and settle(c, Decisions(c), W, time.monotonic() + 10)}
    done = drive(c, winners)
    assert c.visible() == {W.attempt(0, 1), W.attempt(1, 2)} and len(done.committed) == 2


def test_no_answer_to_the_decision_commits_nothing_and_the_next_ender_knows(c):
    winners = [c.begin(W.attempt(0, 1))]
    c.recorder = {"fail_record": True}
    with pytest.raises(UndecidedError, match="nothing was committed"):
        drive(c, winners)
    assert not c.visible() and c.still_open() == {W.attempt(0, 1)}
    settled = settle(c, Decisions(c), W, time.monotonic() + 10)
    assert not settled.decided and not c.still_open() and not c.visible()


def test_a_decided_write_is_never_aborted_after_a_failed_commit(c):
    """EndTxn of one winner fails past the budget: the job fails naming the write, the other
    winners are not aborted, and whoever ends the write next commits the rest."""
    winners = [c.begin(W.attempt(0, 1)), c.begin(W.attempt(1, 2))]
    c.fail_end = {W.attempt(1, 2)}
    with pytest.raises(IncompleteCommitError) as info:
        drive(c, winners)
    assert info.value.pending == (W.attempt(1, 2),) and "nothing decided is ever aborted" in str(info.value)
    assert c.visible() == {W.attempt(0, 1)} and c.still_open() == {W.attempt(1, 2)}
    assert not any(line.startswith("fence") and "-p" in line for line in c.log)
    c.fail_end = set()
    settled = settle(c, Decisions(c), W, time.monotonic() + 10)  # Spark's abort, the keeper, the command
    assert settled.decided and settled.committed == [W.attempt(1, 2)] and settled.aborted == []
    assert c.visible() == {W.attempt(0, 1), W.attempt(1, 2)}


def test_a_winner_its_coordinator_aborted_means_nothing_is_committed(c):
    winners = [c.begin(W.attempt(0, 1)), c.begin(W.attempt(1, 2))]
    c.init(W.attempt(1, 2))  # its transaction timed out: aborted, the epoch bumped
    with pytest.raises(WriteEndedError, match=r"no longer open .*nothing of it is visible"):
        drive(c, winners)
    assert not c.visible() and not c.still_open() and not c.decisions


def test_a_late_attempt_that_begins_after_the_sweep_is_never_committed(c):
    """The schedule of the two listings (issue 41): an attempt initialised before the close,
    beginning its transaction after the driver listed the write.  One listing holds it while
    it is initialised, so it is fenced: its begin fails, and a later ender commits only the
    recorded winners."""
    winners = [c.begin(W.attempt(0, 1))]
    c.init(W.attempt(0, 2))  # the late attempt, initialised (it found the write open)
    real = c.open_transactions

    def listing_then_the_late_attempt_begins(prefix, deadline, states=("Ongoing",)):
        found = real(prefix, deadline, states)
        late = c.ids[W.attempt(0, 2)]
        c.late_epoch = late.epoch  # the epoch it holds when it begins
        return found

    c.open_transactions = listing_then_the_late_attempt_begins
    drive(c, winners)
    assert c.ids[W.attempt(0, 2)].epoch > c.late_epoch  # fenced: its begin under the old epoch fails
    settle(c, Decisions(c), W, time.monotonic() + 10)
    assert c.visible() == {W.attempt(0, 1)} and not c.still_open()


# -- liveness ------------------------------------------------------------------------------------
def test_a_lease_that_moves_is_a_live_owner_and_one_that_stands_still_is_gone(c):
    live, dead = WriteId("p", "aaaaaaaa", "000001"), WriteId("p", "bbbbbbbb", "000002")
    c.begin(live.attempt(0, 1))
    c.begin(dead.attempt(0, 1))
    c.init(lease_id("p", "aaaaaaaa"))
    c.init(lease_id("p", "bbbbbbbb"))
    real = c.describe

    def beating(txn_id, deadline):
        if txn_id == lease_id("p", "aaaaaaaa"):
            c.init(txn_id)  # its keeper beats
        return real(txn_id, deadline)

    c.describe = beating
    alive, gone = judge(c, "p-r", time.monotonic() + 10, window_s=1.5)
    assert list(alive) == [live] and list(gone) == [dead]
    _, gone = judge(c, "p-r", time.monotonic() + 10, spare=("bbbbbbbb",), window_s=1.5)
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
