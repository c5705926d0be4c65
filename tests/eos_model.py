"""The exactly-once protocol explored: the package's own code (``exactly_once.commit``,
``settle``, ``fence``) run by every actor of a write -- the driver, its task attempts (late,
zombie, speculative, retried), Spark's abort, the keeper, a next write that misjudged the driver
gone -- against transaction coordinators modelled in memory, under every interleaving of their
steps up to a bound, with lost answers, failed requests, listings that miss an open transaction
and coordinators timing transactions out.  After every step the safety invariant is checked,
and at the end of each schedule what readers see:

* nothing of a write is committed unless its decision was recorded, and then only its recorded
  winners (no row twice: one winner per partition);
* at the end every write is visible whole or not at all;
* a commit that returned success had every winner committed when it returned;
* every error's words are true: "nothing of it is visible" -- nothing is, at the end; "readers
  see the rows of the N committed now" -- exactly those are; the rest "committed as recorded"
  -- they are, at the end.

How: each actor is a thread that stops at every request it makes to the model (a *step*); a
scheduler lets one step run at a time, choosing which actor goes next, and whether a request's
answer is lost or fails, from a *choice sequence*.  :func:`explore` enumerates choice sequences
depth first (stateless model checking: each schedule runs from the start), bounded by how often
the scheduler preempts a running actor and how many faults it injects; :func:`sample` draws them
at random from a seed.  A violation comes back with its schedule, replayable by its choices.

The suite runs bounded scenarios (tests/unit/test_exactly_once_explored.py, about a minute,
and shows each of three bugs put back is found); ``python tests/eos_model.py --help`` runs more.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import random
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sparkkafka_sink.errors import KafkaError, KafkaTimeoutError, ProducerFencedError
from sparkkafka_sink.exactly_once import commit as commit_module
from sparkkafka_sink.exactly_once.commit import CommitError, IncompleteCommitError, commit_write
from sparkkafka_sink.exactly_once.decision import Decision
from sparkkafka_sink.exactly_once.fence import write_closed
from sparkkafka_sink.exactly_once.ids import WriteId, is_decision_id
from sparkkafka_sink.exactly_once.settle import plan as _PLAN
from sparkkafka_sink.exactly_once.settle import settle
from sparkkafka_sink.producer.control_requests import TransactionDescription
from sparkkafka_sink.producer.handover import PreparedTransaction

W = WriteId("pfx", "0123abcd", "a1b2c3")
#: model time each request takes (the commit's own time passes, so a winner can run out of it)
OP_MS = 1000
TIMEOUT_MS = 900_000


class Killed(BaseException):
    """An actor's process died: its thread unwinds (nothing it would do after happens)."""


class Violation(AssertionError):
    """An invariant broken: the message says which, with the schedule that broke it."""


# -- the coordinators ---------------------------------------------------------------------------------------
@dataclass
class Txn:
    pid: int
    epoch: int
    timeout_ms: int
    state: str = "Empty"
    start_ms: int = -1
    rows: list[str] = field(default_factory=list)


class Cluster:
    """Transactional ids as Kafka's coordinators keep them, one clock for all, and the decisions
    topic (its committed records).  InitProducerId bumps the epoch (an open transaction aborted
    first); EndTxn under the current epoch ends a transaction, and answers success again for one
    that ended that way; a transaction open past its timeout is aborted (its epoch bumped);
    ``v2``: transactions v2, whose EndTxn bumps the epoch too."""

    def __init__(self, v2: bool = False):
        self.ids: dict[str, Txn] = {}
        self.pids = itertools.count(100)
        self.now_ms = 1_700_000_000_000
        self.v2 = v2
        self.decisions: list[Decision] = []
        self.trace: list[str] = []

    def tick(self) -> None:
        self.now_ms += OP_MS
        self.expire()

    def expire(self) -> None:
        for txn_id, t in self.ids.items():
            if t.state == "Ongoing" and t.start_ms + t.timeout_ms <= self.now_ms:
                t.state, t.epoch, t.rows = "CompleteAbort", t.epoch + 1, []
                self.trace.append(f"  coordinator timed out {txn_id}")

    def init(self, txn_id: str, timeout_ms: int = TIMEOUT_MS) -> Txn:
        t = self.ids.get(txn_id)
        if t is None:
            t = self.ids[txn_id] = Txn(next(self.pids), 0, timeout_ms)
        else:
            t.epoch += 2 if t.state == "Ongoing" else 1
            t.state, t.rows, t.start_ms, t.timeout_ms = "Empty", [], -1, timeout_ms
        return t

    def _current(self, txn_id: str, pid: int, epoch: int) -> Txn:
        t = self.ids.get(txn_id)
        if t is None or (t.pid, t.epoch) != (pid, epoch):
            raise ProducerFencedError(f"{txn_id}: fenced")
        return t

    def begin(self, txn_id: str, pid: int, epoch: int) -> None:
        t = self._current(txn_id, pid, epoch)
        t.state, t.start_ms, t.rows = "Ongoing", self.now_ms, []

    def produce(self, txn_id: str, pid: int, epoch: int, row: str) -> None:
        t = self._current(txn_id, pid, epoch)
        if t.state != "Ongoing":
            raise KafkaError(f"{txn_id}: no transaction open ({t.state})")
        t.rows.append(row)

    def end(self, txn_id: str, pid: int, epoch: int, commit: bool) -> None:
        done = "CompleteCommit" if commit else "CompleteAbort"
        t = self.ids.get(txn_id)
        if t is not None and self.v2 and (t.pid, t.epoch - 1) == (pid, epoch) and t.state == done:
            return  # a retry of an EndTxn that landed
        t = self._current(txn_id, pid, epoch)
        if t.state == "Ongoing":
            t.state = done
            if not commit:
                t.rows = []
            if self.v2:
                t.epoch += 1
        elif t.state != done:
            raise KafkaError(f"{txn_id}: invalid transaction state {t.state}")

    def describe(self, txn_id: str) -> TransactionDescription | None:
        t = self.ids.get(txn_id)
        if t is None:
            return None
        return TransactionDescription(t.state, t.pid, t.epoch, t.timeout_ms,
                                      t.start_ms if t.state == "Ongoing" else -1, ())

    def listing(self, prefix: str, states: tuple[str, ...]) -> list[tuple[str, int, str]]:
        return [(i, t.pid, t.state) for i, t in sorted(self.ids.items()) if i.startswith(prefix) and t.state in states]

    # what readers see
    def committed(self, write: WriteId) -> set[str]:
        return {i for i, t in self.ids.items() if i.startswith(write.name + "-") and not is_decision_id(i)
                and t.state == "CompleteCommit" and t.rows}

    def open(self, write: WriteId) -> set[str]:
        return {i for i, t in self.ids.items() if i.startswith(write.name + "-") and t.state == "Ongoing"}

    def decisions_of(self, write: WriteId) -> list[Decision]:
        return [d for d in self.decisions if d.write == write]


# -- the schedule ---------------------------------------------------------------------------------------------
class Chooser:
    """Answers the scheduler's choices from a prefix, then 0 (the first option), recording each
    (choice, options); ``rng``: random answers past the prefix instead."""

    def __init__(self, prefix: list[int] | None = None, rng: random.Random | None = None):
        self.prefix, self.rng = prefix or [], rng
        self.trace: list[tuple[int, int]] = []

    def choose(self, options: int) -> int:
        if options <= 1:
            return 0
        i = len(self.trace)
        if i < len(self.prefix):
            choice = min(self.prefix[i], options - 1)
        else:
            choice = self.rng.randrange(options) if self.rng is not None else 0
        self.trace.append((choice, options))
        return choice


@dataclass
class Actor:
    name: str
    body: Callable[[], Any]
    #: enabled only while this holds (None: always)
    when: Callable[[], bool] | None = None
    thread: threading.Thread | None = None
    pending: str | None = None
    done: bool = False
    kill: bool = False
    outcome: Any = None


class Scheduler:
    """Runs one actor's step at a time, as the chooser says."""

    def __init__(self, chooser: Chooser, cluster: Cluster, preemptions: int, faults: int):
        self.chooser, self.cluster = chooser, cluster
        self.preemptions_left, self.faults_left = preemptions, faults
        self.actors: list[Actor] = []
        self.cond = threading.Condition()
        self.running: str | None = None
        self.last: str | None = None
        self.local = threading.local()
        self.steps = 0
        self.check: Callable[[], None] = lambda: None
        self.faulted: list[str] = []
        #: the driver's close always goes unanswered (``Scenario.lost_close``)
        self.lost_close = False

    def spawn(self, name: str, body: Callable[[], Any], when: Callable[[], bool] | None = None) -> Actor:
        actor = Actor(name, body, when)
        self.actors.append(actor)
        return actor

    def actor(self, name: str) -> Actor:
        return next(a for a in self.actors if a.name == name)

    # -- inside an actor's thread
    def step(self, what: str, when: Callable[[], bool] | None = None) -> None:
        """The calling actor stops here until the scheduler lets it go on (``when``: only once that holds)."""
        actor: Actor = self.local.actor
        with self.cond:
            actor.pending, actor.when = what, when
            self.running = None
            self.cond.notify_all()
            while self.running != actor.name:
                self.cond.wait()
            actor.pending = None
            if actor.kill:
                raise Killed()
        self.cluster.trace.append(f"{actor.name}: {what}")
        self.cluster.tick()

    def fault(self, kinds: tuple[str, ...]) -> str | None:
        """A fault for the request about to be made: one of ``kinds``, or None."""
        if self.faults_left <= 0:
            return None
        choice = self.chooser.choose(len(kinds) + 1)
        if choice == 0:
            return None
        self.faults_left -= 1
        kind = kinds[choice - 1]
        self.faulted.append(kind)
        self.cluster.trace.append(f"  fault: {kind}")
        return kind

    def missed(self, listed: list[tuple[str, int, str]]) -> tuple[str, int, str]:
        """Which id a listing misses."""
        return listed[self.chooser.choose(len(listed))]

    def _thread(self, actor: Actor) -> None:
        self.local.actor = actor
        try:
            self.step("starts")
            actor.outcome = actor.body()
        except Killed:
            actor.outcome = Killed()
        except BaseException as e:  # noqa: BLE001 - the actor's outcome (an error the protocol raised)
            actor.outcome = e
        finally:
            with self.cond:
                actor.done = True
                self.running = None
                self.cond.notify_all()

    # -- the loop
    def run(self, max_steps: int = 400) -> None:
        for a in self.actors:
            a.thread = threading.Thread(target=self._thread, args=(a,), daemon=True)
            a.pending = "starting"
            a.thread.start()
        try:
            while self.steps < max_steps:
                with self.cond:
                    while self.running is not None or any(a.pending == "starting" for a in self.actors):
                        self.cond.wait()
                    ready = [a for a in self.actors if not a.done and not a.kill and a.pending is not None
                             and (a.when is None or a.when())]
                    if not ready:
                        break
                    pick = self._pick(ready)
                    self.last = pick.name
                    self.running = pick.name
                    self.steps += 1
                    self.cond.notify_all()
                with self.cond:
                    while self.running is not None:
                        self.cond.wait()
                self.check()
        finally:
            self._unwind()

    def _pick(self, ready: list[Actor]) -> Actor:
        last = next((a for a in ready if a.name == self.last), None)
        if last is not None:
            if self.preemptions_left <= 0:
                return last
            others = [a for a in ready if a is not last]
            choice = self.chooser.choose(len(others) + 1)
            if choice == 0:
                return last
            self.preemptions_left -= 1
            return others[choice - 1]
        return ready[self.chooser.choose(len(ready))]

    def _unwind(self) -> None:
        """Every actor still waiting dies (its thread unwinds)."""
        for a in self.actors:
            with self.cond:
                if a.done or a.thread is None:
                    continue
                a.kill = True
                self.running = a.name
                self.cond.notify_all()
                while not a.done:
                    self.cond.wait(1.0)


class Direct:
    """The model driven by one caller, no threads: a unit test's hand-picked schedule.  ``hook(step)``
    runs before each step (another actor's moves go there); ``faults`` maps the start of a step's
    text to the fault its request meets, once; ``miss``: the id a faulted listing misses."""

    lost_close = False  # (its close meets the faults it is given)

    def __init__(self, cluster: Cluster | None = None, hook: Callable[[str], Any] | None = None,
                 faults: dict[str, str] | None = None, miss: str | None = None, name: str = "driver"):
        self.cluster = cluster or Cluster()
        self.hook, self.faults, self.miss, self.name = hook, dict(faults or {}), miss, name
        self._current = ""

    def step(self, what: str, when: Callable[[], bool] | None = None) -> None:
        self._current = what
        self.cluster.trace.append(f"{self.name}: {what}")
        if self.hook is not None:
            self.hook(what)
        self.cluster.tick()

    def fault(self, kinds: tuple[str, ...]) -> str | None:
        for start, kind in list(self.faults.items()):
            if self._current.startswith(start) and kind in kinds:
                del self.faults[start]
                self.cluster.trace.append(f"  fault: {kind}")
                return kind
        return None

    def missed(self, listed: list[tuple[str, int, str]]) -> tuple[str, int, str]:
        return next(t for t in listed if t[0] == self.miss)

    def as_(self, name: str, hook: Callable[[str], Any] | None = None) -> Direct:
        """Another caller on the same cluster (an ender acting inside a hook)."""
        return Direct(self.cluster, hook, name=name)


# -- what the protocol asks, on the model ------------------------------------------------------------------------
class Admin:
    """``TransactionAdmin`` on the model: each request a step, faults where the scheduler says."""

    def __init__(self, s: Scheduler):
        self.s, self.c = s, s.cluster

    def fence(self, txn_id: str, deadline: float) -> tuple[int, int]:
        self.s.step(f"InitProducerId {txn_id}")
        fault = self.s.fault(("no answer", "answer lost"))
        if fault == "no answer":
            raise KafkaTimeoutError(f"InitProducerId {txn_id}: no answer")
        t = self.c.init(txn_id)
        if fault == "answer lost":
            raise KafkaTimeoutError(f"InitProducerId {txn_id}: the answer was lost")
        return t.pid, t.epoch

    def end(self, prepared: PreparedTransaction, commit: bool, deadline: float) -> None:
        self.s.step(f"EndTxn {'commit' if commit else 'abort'} {prepared.transactional_id}")
        fault = self.s.fault(("no answer", "answer lost"))
        if fault == "no answer":
            raise KafkaTimeoutError(f"EndTxn {prepared.transactional_id}: no answer")
        self.c.end(prepared.transactional_id, prepared.producer_id, prepared.producer_epoch, commit)
        if fault == "answer lost":
            raise KafkaTimeoutError(f"EndTxn {prepared.transactional_id}: the answer was lost")

    def describe(self, txn_id: str, deadline: float) -> TransactionDescription | None:
        self.s.step(f"DescribeTransactions {txn_id}")
        if self.s.fault(("no answer",)):
            raise KafkaTimeoutError(f"DescribeTransactions {txn_id}: no answer")
        return self.c.describe(txn_id)

    def open_transactions(self, prefix: str, deadline: float, states: tuple[str, ...] = ("Ongoing",)) -> list:
        self.s.step(f"ListTransactions {prefix}")
        listed = self.c.listing(prefix, states)
        fault = self.s.fault(("no answer", "misses one"))
        if fault == "no answer":
            raise KafkaTimeoutError("ListTransactions: no answer")
        if fault == "misses one" and listed:  # a __transaction_state partition changing leader
            gone = self.s.missed(listed)
            self.c.trace.append(f"  the listing misses {gone[0]}")
            listed = [t for t in listed if t is not gone]
        return listed


class Decisions:
    """``DecisionLog`` on the model: the committed decision records."""

    topic = "pyprod-kafka-decisions"

    def __init__(self, s: Scheduler):
        self.s, self.c = s, s.cluster

    def partitions(self, deadline: float, create: bool = False) -> int:
        return 16

    def decision_of(self, write: WriteId, deadline: float) -> Decision | None:
        self.s.step(f"read the decision of {write}")
        if self.s.fault(("no answer",)):
            raise KafkaTimeoutError("Fetch: no answer")
        found = self.c.decisions_of(write)
        return found[-1] if found else None


class Recorder:
    """``DecisionRecorder`` on the model: the decision id's producer; its transaction commits only
    under the epoch its close got.  A commit whose answer is lost is retried as the producer
    does: success again while the epoch stands, fenced once someone initialised the id."""

    def __init__(self, s: Scheduler, write: WriteId):
        self.s, self.c, self.write = s, s.cluster, write
        self.held: tuple[int, int] | None = None

    def close(self, timeout_s: float) -> bool:
        """The producer's ``init_transactions(resume_lost_answer=True)``: an InitProducerId whose
        answer is lost (``answer lost, resumed``) is followed -- as a step of its own, so others
        may act in between -- by DescribeTransactions: an idle id at epoch 0 is taken as its
        answer, anything else initialised again."""
        self.s.step(f"close {self.write} (InitProducerId {self.write.decision_id})")
        lost = ("answer lost, resumed", "request lost, resumed")
        if self.s.lost_close:
            fault: str | None = lost[self.s.chooser.choose(2)]
            self.c.trace.append(f"  {fault}")
        else:
            fault = self.s.fault(("no answer", *lost))
        if fault == "no answer":
            raise KafkaTimeoutError("InitProducerId: no answer")
        t = self.c.ids.get(self.write.decision_id)
        if fault != "request lost, resumed":  # (that one never reached the coordinator)
            t = self.c.init(self.write.decision_id, 60_000)
        if fault in ("answer lost, resumed", "request lost, resumed"):
            self.s.step(f"close {self.write}: unanswered, DescribeTransactions {self.write.decision_id}")
            found = self.c.describe(self.write.decision_id)
            if found is not None and found.state == "Empty" and found.producer_epoch == 0:
                self.held = (found.producer_id, 0)  # taken for its own request's answer
                return True
            self.s.step(f"close {self.write}: InitProducerId {self.write.decision_id} again")
            t = self.c.init(self.write.decision_id, 60_000)
        assert t is not None
        self.held = (t.pid, t.epoch)
        return t.epoch == 0

    def record(self, decision: Decision, timeout_s: float) -> bool:
        self.s.step(f"record the decision of {self.write}")
        fault = self.s.fault(("answer lost, then retried", "answer lost, no answer after", "no answer"))
        if fault == "no answer":
            raise KafkaTimeoutError("EndTxn of the decision: no answer")
        t = self.c.ids[self.write.decision_id]
        if (t.pid, t.epoch) != self.held:
            return False  # fenced: ProducerFencedError, which record() turns into False
        self.c.decisions.append(decision)
        if fault == "answer lost, no answer after":
            raise KafkaTimeoutError("EndTxn of the decision: the answer was lost, and its retries got none")
        if fault == "answer lost, then retried":
            self.s.step(f"retry the decision's EndTxn of {self.write}")
            t = self.c.ids[self.write.decision_id]
            return (t.pid, t.epoch) == self.held
        return True

    def forget(self, timeout_s: float) -> None:
        self.s.step(f"forget the decision of {self.write}")

    def close_producer(self) -> None:
        pass


class TaskProducer:
    """The calls ``fence.write_closed`` makes of a task's producer."""

    def __init__(self, s: Scheduler):
        self.s = s

    def transaction_state(self, txn_id: str, timeout: float) -> str | None:
        self.s.step(f"ask whether {txn_id} exists")
        d = self.s.cluster.describe(txn_id)
        return None if d is None else d.state


# -- a write, its actors, and what must hold --------------------------------------------------------------------
@dataclass(frozen=True)
class Scenario:
    """Who takes part in a write of ``partitions`` tasks."""

    name: str
    partitions: int = 2
    #: a second attempt of partition 0 runs beside the first; the first to finish wins
    speculative: bool = False
    #: partition 0's first attempt is lost to Spark (its executor gone) but keeps running: a retry replaces it
    zombie: bool = False
    #: the driver may die at any step (its keeper then ends the write)
    driver_dies: bool = False
    #: a next write that misjudged the driver gone ends the write at any time
    misjudging_ender: bool = False
    #: time may jump to just before the oldest transaction's timeout, before the decision
    slow_tasks: bool = False
    v2: bool = False
    #: the driver's close goes unanswered (its request or its answer lost): it reads the id back
    lost_close: bool = False


@dataclass
class Run:
    scenario: Scenario
    cluster: Cluster
    scheduler: Scheduler
    #: (partition, attempt) -> prepared, of the attempts Spark kept
    kept: dict[int, PreparedTransaction] = field(default_factory=dict)
    failed_partitions: set[int] = field(default_factory=set)
    driver_result: Any = None
    #: committed winners when the commit returned or raised
    seen_at_end_of_commit: set[str] | None = None
    abandoned: bool = False
    listing_missed: bool = False

    @property
    def driver_alive(self) -> bool:
        a = self.scheduler.actor("driver")
        return not a.kill and not isinstance(a.outcome, Killed)

    def winners(self) -> list[PreparedTransaction]:
        return [self.kept[p] for p in sorted(self.kept)]


def _task(run: Run, partition: int, attempt: int, kind: str) -> Callable[[], Any]:
    """One task attempt: initialise, check the write is open, begin, write, hand over.  ``kind``:
    "runs" (Spark keeps it if it finishes first), "zombie" (Spark gave up on it: its result is
    dropped)."""
    s, c = run.scheduler, run.cluster

    def body() -> Any:
        txn_id = W.attempt(partition, attempt)
        s.step(f"InitProducerId {txn_id}")
        t = c.init(txn_id)
        held = (t.pid, t.epoch)
        if write_closed(TaskProducer(s), W):
            return "found the write closed: wrote nothing"
        s.step(f"begin {txn_id}")
        c.begin(txn_id, *held)
        s.step(f"produce partition {partition}'s row in {txn_id}")
        c.produce(txn_id, *held, f"row-{partition}")
        prepared = PreparedTransaction(txn_id, held[0], held[1], (("t", partition),), c.v2)
        if kind == "runs" and partition not in run.kept:
            run.kept[partition] = prepared
        return prepared

    return body


def _driver(run: Run) -> Callable[[], Any]:
    s = run.scheduler

    def tasks_done() -> bool:
        return len(run.kept) == run.scenario.partitions or all(
            a.done for a in s.actors if a.name.startswith("task-"))

    def body() -> Any:
        s.step("waits for its tasks", when=tasks_done)
        if len(run.kept) < run.scenario.partitions:  # a task failed: Spark fails the job and aborts the write
            run.driver_result = "a task failed"
            try:
                settle(Admin(s), Decisions(s), W, time.monotonic() + 60)
            except KafkaError:
                run.abandoned = True
            return run.driver_result
        winners = run.winners()
        try:
            done = commit_write(Admin(s), Decisions(s), {}, W, winners, time.monotonic() + 60)
            run.driver_result = done
        except CommitError as e:
            run.driver_result = e
        run.seen_at_end_of_commit = run.cluster.committed(W)
        if isinstance(run.driver_result, CommitError):  # Spark's abort ends the write as decided
            try:
                settle(Admin(s), Decisions(s), W, time.monotonic() + 60)
            except KafkaError:
                run.abandoned = True  # the keeper ends it
        return run.driver_result

    return body


def _ender(run: Run, who: str, retries: int = 3) -> Callable[[], Any]:
    s = run.scheduler

    def body() -> Any:
        for _ in range(retries):
            try:
                return settle(Admin(s), Decisions(s), W, time.monotonic() + 60)
            except KafkaError as e:
                s.step(f"{who} tries again ({e})")
        return "gave up"

    return body


def _crash(run: Run) -> Callable[[], Any]:
    def body() -> Any:
        driver = run.scheduler.actor("driver")
        driver.kill = True
        run.cluster.trace.append("  the driver's JVM dies")

    return body


def _time_jump(run: Run) -> Callable[[], Any]:
    c = run.cluster

    def body() -> Any:
        started = [t.start_ms + t.timeout_ms for i, t in c.ids.items() if t.state == "Ongoing" and not is_decision_id(i)]
        if not started:
            return None
        # to a few seconds before the oldest transaction times out: the commit's own steps may outlast it
        margin = (3, 6)[run.scheduler.chooser.choose(2)]
        c.now_ms = max(c.now_ms, min(started) - margin * OP_MS)
        c.trace.append(f"  time passes: the oldest transaction has {(min(started) - c.now_ms) / 1000:.0f} s left")

    return body


def build(scenario: Scenario, chooser: Chooser, preemptions: int, faults: int) -> Run:
    cluster = Cluster(scenario.v2)
    s = Scheduler(chooser, cluster, preemptions, faults)
    s.lost_close = scenario.lost_close
    run = Run(scenario, cluster, s)
    attempt = itertools.count(1)
    for p in range(scenario.partitions):
        if p == 0 and scenario.zombie:
            s.spawn("zombie-p0", _task(run, 0, next(attempt), "zombie"))
        s.spawn(f"task-p{p}", _task(run, p, next(attempt), "runs"))
        if p == 0 and scenario.speculative:
            s.spawn("speculative-p0", _task(run, 0, next(attempt), "runs"))
    s.spawn("driver", _driver(run))
    if scenario.driver_dies:
        s.spawn("crash", _crash(run))
        s.spawn("keeper", _ender(run, "keeper"), when=lambda: not run.driver_alive)
    if scenario.misjudging_ender:
        s.spawn("next-write", _ender(run, "next-write"))
    if scenario.slow_tasks:
        s.spawn("time", _time_jump(run), when=lambda: not cluster.decisions_of(W))
    s.spawn("abandoned", _ender(run, "keeper (abandoned)"), when=lambda: run.abandoned)
    s.check = lambda: check_step(run)
    return run


def check_step(run: Run) -> None:
    """Safety, after every step: nothing committed but the recorded winners."""
    c = run.cluster
    committed = c.committed(W)
    decided = c.decisions_of(W)
    if len({d.winner_ids for d in decided}) > 1:
        raise Violation(f"two different decisions recorded for {W}")
    if committed and not decided:
        raise Violation(f"committed before any decision: {sorted(committed)}")
    if decided and not committed <= decided[0].winner_ids:
        raise Violation(f"committed beyond the decision: {sorted(committed - decided[0].winner_ids)}")


def check_end(run: Run) -> None:
    """What readers see once the write is ended and every transaction's time has passed."""
    c = run.cluster
    if run.abandoned and not run.scheduler.actor("abandoned").done:
        raise Violation("the write was abandoned and never ended")
    still_open = c.open(W)
    if still_open and not run.listing_missed:
        raise Violation(f"left open, holding readers back: {sorted(still_open)}")
    c.now_ms += 10 * TIMEOUT_MS
    c.expire()
    committed = c.committed(W)
    decided = c.decisions_of(W)
    winners = decided[0].winner_ids if decided else frozenset()
    if committed and committed != winners:
        raise Violation(f"partly visible: {sorted(committed)} of the decided {sorted(winners)}")
    result = run.driver_result
    if not isinstance(result, (CommitError, commit_module.Committed)):
        return  # the driver died, or a task failed (its abort ended the write)
    if isinstance(result, commit_module.Committed):
        if run.seen_at_end_of_commit != {w.transactional_id for w in run.winners()}:
            raise Violation(f"the commit returned success with {sorted(run.seen_at_end_of_commit or ())} committed "
                            f"of {sorted(w.transactional_id for w in run.winners())}")
        return
    said = str(result)
    if "nothing of it is visible" in said or "nothing of it is committed" in said:
        if committed:
            raise Violation(f"{type(result).__name__} said nothing is visible, but {sorted(committed)} are: {said}")
    if isinstance(result, IncompleteCommitError):
        lost = set(result.lost)
        confirmed = winners - set(result.pending) - lost
        if result.pending and not confirmed <= (run.seen_at_end_of_commit or set()):
            raise Violation(f"IncompleteCommitError said {sorted(confirmed)} are visible, but only "
                            f"{sorted(run.seen_at_end_of_commit or ())} were")
        if committed != winners - lost:
            raise Violation(f"IncompleteCommitError said the rest would be committed as recorded; visible at the "
                            f"end: {sorted(committed)} of {sorted(winners)}")
        if any(c.ids[t].state != "CompleteAbort" for t in lost):
            raise Violation(f"IncompleteCommitError called {sorted(lost)} lost, but their coordinator did not abort them")


# -- exploring ------------------------------------------------------------------------------------------------
@dataclass
class Found:
    scenario: Scenario
    choices: list[int]
    error: str
    trace: list[str]

    def __str__(self) -> str:
        return (f"{self.scenario.name}: {self.error}\n  choices {self.choices}\n" + "\n".join(self.trace[-60:]))


@contextlib.contextmanager
def on_model(s: Any) -> Iterator[None]:
    """The driver's commit records its decision on the model (``Recorder``) and reads the
    coordinators' clock, not the machine's, for the time its winners have left."""
    saved = commit_module.DecisionRecorder, commit_module.time
    commit_module.DecisionRecorder = lambda config, write, topic, partitions: Recorder(s, write)  # type: ignore
    commit_module.time = types.SimpleNamespace(time=lambda: s.cluster.now_ms / 1000,  # type: ignore[assignment]
                                               monotonic=time.monotonic)
    try:
        yield
    finally:
        commit_module.DecisionRecorder, commit_module.time = saved  # type: ignore[misc]


def run_once(scenario: Scenario, chooser: Chooser, preemptions: int, faults: int) -> Found | None:
    run = build(scenario, chooser, preemptions, faults)
    try:
        with on_model(run.scheduler):
            run.scheduler.run()
        run.listing_missed = any("misses" in line for line in run.cluster.trace)
        driver = run.scheduler.actor("driver").outcome
        if not isinstance(driver, (Killed, CommitError, commit_module.Committed, str)) and driver is not None:
            raise Violation(f"the driver failed unexpectedly: {type(driver).__name__}: {driver}")
        check_end(run)
    except Violation as v:
        return Found(scenario, [c for c, _ in chooser.trace], str(v), run.cluster.trace)
    return None


def _next(trace: list[tuple[int, int]]) -> list[int] | None:
    """The choice sequence after ``trace`` in depth-first order, None when all were run."""
    for i in range(len(trace) - 1, -1, -1):
        choice, options = trace[i]
        if choice + 1 < options:
            return [c for c, _ in trace[:i]] + [choice + 1]
    return None


@dataclass
class Explored:
    schedules: int = 0
    found: list[Found] = field(default_factory=list)
    complete: bool = True


def explore(scenario: Scenario, preemptions: int = 1, faults: int = 1, budget_s: float = 60.0,
            stop_at_first: bool = True) -> Explored:
    """Every schedule of ``scenario`` with at most ``preemptions`` preemptions and ``faults``
    faults (until ``budget_s`` runs out: then ``complete`` is False)."""
    out = Explored()
    prefix: list[int] | None = []
    until = time.monotonic() + budget_s
    while prefix is not None:
        if time.monotonic() > until:
            out.complete = False
            break
        chooser = Chooser(prefix)
        found = run_once(scenario, chooser, preemptions, faults)
        out.schedules += 1
        if found is not None:
            out.found.append(found)
            if stop_at_first:
                break
        prefix = _next(chooser.trace)
    return out


def sample(scenario: Scenario, seed: int, schedules: int, preemptions: int = 3, faults: int = 2) -> Explored:
    """``schedules`` schedules drawn at random from ``seed``."""
    out = Explored(complete=False)
    rng = random.Random(seed)
    for _ in range(schedules):
        chooser = Chooser(rng=rng)
        found = run_once(scenario, chooser, preemptions, faults)
        out.schedules += 1
        if found is not None:
            out.found.append(found)
    return out


SCENARIOS = (
    Scenario("two tasks, a driver, Spark's abort"),
    Scenario("a speculative copy", partitions=1, speculative=True),
    Scenario("a zombie attempt beside its retry", partitions=1, zombie=True),
    Scenario("the driver dies, its keeper ends the write", driver_dies=True),
    Scenario("a next write misjudges the driver gone", misjudging_ender=True),
    Scenario("slow tasks: the oldest transaction nearly timed out", slow_tasks=True),
    Scenario("transactions v2, a misjudging ender", v2=True, misjudging_ender=True, partitions=1),
    Scenario("the driver's close unanswered, a misjudging ender", misjudging_ender=True, partitions=1,
             lost_close=True),
)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """The protocol's own warnings stay out of an exploration's output."""
    import logging

    logger = logging.getLogger("sparkkafka_sink")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Explore the exactly-once protocol's schedules on the coordinator model.")
    ap.add_argument("--preemptions", type=int, default=2)
    ap.add_argument("--faults", type=int, default=2)
    ap.add_argument("--budget", type=float, default=600.0, help="seconds per scenario (exhaustive until then)")
    ap.add_argument("--sample", type=int, default=0, metavar="N", help="N random schedules per scenario instead")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    total, violations = 0, 0
    with quiet():
        for scenario in SCENARIOS:
            started = time.monotonic()
            if args.sample:
                out = sample(scenario, args.seed, args.sample, args.preemptions, args.faults)
            else:
                out = explore(scenario, args.preemptions, args.faults, args.budget, stop_at_first=False)
            total += out.schedules
            violations += len(out.found)
            print(f"{scenario.name}: {out.schedules} schedules{' (all within the bounds)' if out.complete else ''}, "
                  f"{len(out.found)} violations, {time.monotonic() - started:.0f} s", flush=True)
            for f in out.found[:3]:
                print(f, flush=True)
    print(f"total: {total} schedules, {violations} violations (preemptions <= {args.preemptions}, "
          f"faults <= {args.faults}{f', seed {args.seed}' if args.sample else ''})")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())


# -- the three bugs of issue 51, put back: each must be found -------------------------------------------------
def _old_plan(write: WriteId, listed: Any, winners: Any, described: Any) -> Any:
    """Before: a winner counted as open only when the listing showed it so; a winner the listing
    missed was looked up only to be called committed -- or lost, even while it was open."""
    from sparkkafka_sink.exactly_once import settle as settle_module

    listed = list(listed)
    shown = {t.transactional_id: t for t in listed}
    ending = _PLAN(write, listed, winners, described)
    opened, lost = [], list(ending.aborted) + list(ending.unknown)
    for w in ending.commit:
        t = shown.get(w.transactional_id)
        (opened if t is not None and t.state in ("Ongoing", "PrepareCommit") else lost).append(w)
    return settle_module.Ending(tuple(opened), ending.fence, ending.committed, tuple(lost), ())


@contextlib.contextmanager
def bug_put_back(name: str) -> Iterator[None]:
    """``deciding-late``: the driver decides however little time its winners have left;
    ``listing-trusted``: an ender trusts the listing for its winners; ``fenced-means-undecided``:
    a fenced decision record is taken for "not recorded", and the job says nothing is visible;
    ``ender-leaves-epoch-0``: an ender initialises a decision id once, so one it was first to
    initialise stays at epoch 0 -- which a driver whose close went unanswered takes for its own."""
    from sparkkafka_sink.exactly_once import settle as settle_module

    saved: list[tuple[Any, str, Any]] = []

    def patch(target: Any, attr: str, value: Any) -> None:
        saved.append((target, attr, getattr(target, attr)))
        setattr(target, attr, value)

    if name == "deciding-late":
        patch(commit_module, "COMMIT_NEEDS_S", -1e9)
    elif name == "listing-trusted":
        patch(settle_module, "plan", _old_plan)
    elif name == "fenced-means-undecided":
        def old_resolved(admin: Any, decisions: Any, write: WriteId, winners: Any, losers: Any, deadline: float,
                         recorded: bool | None) -> Any:
            if recorded is None:
                raise commit_module.UndecidedError(f"exactly-once write {write}: the decision's transaction got no "
                                                   "answer")
            settle_module.settle(admin, decisions, write, deadline)  # the old code: end it, then say nothing shows
            raise commit_module.WriteEndedError(f"exactly-once write {write} was ended by another process before its "
                                                "driver's decision was recorded: nothing of it is visible")
        patch(commit_module, "_resolved", old_resolved)
    elif name == "ender-leaves-epoch-0":
        def fence_once(admin: Any, write: WriteId, deadline: float) -> None:
            admin.fence(write.decision_id, deadline)
        patch(settle_module, "fence", fence_once)
    else:
        raise ValueError(name)
    try:
        yield
    finally:
        for target, attr, value in reversed(saved):
            setattr(target, attr, value)


BUGS = ("deciding-late", "listing-trusted", "fenced-means-undecided", "ender-leaves-epoch-0")
