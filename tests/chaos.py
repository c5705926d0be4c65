"""Exactly-once under randomised faults, against real Apache Kafka and real Spark drivers:
``python tests/chaos.py [--schedules N] [--seed S] [--kafka-version V]``.

Each schedule is drawn from its seed (printed first, so any run can be repeated alone with
``--only SEED``): a write -- a batch write, or a streaming query writing each micro-batch inside
``foreachBatch`` -- and one fault, landed on an observed event, never a timer alone:

* the driver killed (its JVM and Python, one process group) or its host lost (driver, Python
  workers and keeper), while its tasks' transactions are open, or with one of its commit's
  requests held in flight by the fault proxy -- the close (InitProducerId of the decision id),
  the decision's EndTxn, a winner's EndTxn;
* a Python worker killed mid-write; a task attempt failing half way (Spark retries it);
* the driver's keeper stopped (SIGSTOP, 40 s) while a second write under its prefix runs;
* the broker paused a while (SIGSTOP) while the write runs; connections cut at requests in
  flight (the fault proxy, every few requests); transactions shorter than the write takes.

Then what a user or the system does: the keeper, the next write under the prefix, the
operator's command, or the query restarted.  Then every row is read back by confluent-kafka
with ``read_committed`` and checked: each batch write whole or absent; a write whose job said
DONE whole; a failed job's error true ("nothing of it is visible": none is; "do not run the job
again": all is, once ended); a query's micro-batches without gap; nothing twice; every decision
recorded in the decisions topic completed (its winners committed, as their coordinator says); no
transaction left holding readers back.

``tests/exactly_once/test_chaos.py`` runs a handful; docs/delivery.md gives the long runs'
counts.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script: the tests' helpers

from crash_support import Job, keeper_pids, run_command
from kafka_helpers import consume_all

from sparkkafka_sink.exactly_once.decision import Decision, DecisionFormatError
from sparkkafka_sink.exactly_once.ids import DEFAULT_DECISION_TOPIC
from sparkkafka_sink.exactly_once.leases import HOLDING_STATES
from sparkkafka_sink.producer.handover import TransactionAdmin
from sparkkafka_sink.testing.brokers import create_topics
from sparkkafka_sink.testing.waiting import wait_until

JOB = Path(__file__).resolve().with_name("chaos_job.py")
#: the bugs ``--put-back`` can put back (tests/chaos_bugs/sitecustomize.py)
BUGS_DIR = Path(__file__).resolve().with_name("chaos_bugs")
BUGS = ("ender-aborts-decided",)
ROWS = 400
RATE = 80  # rows per second per task: a batch write's transactions stay open ~2.5 s
FAULTS = ("none", "kill-driver", "host-down", "kill-python-worker", "fail-task", "stop-keeper", "pause-broker",
          "cut-connections", "short-timeout")
STREAM_FAULTS = ("none", "kill-driver", "host-down", "kill-python-worker", "pause-broker", "cut-connections")
#: where a kill lands: tasks writing, or one of the commit's requests held in flight
MOMENTS = ("writing", "close", "decision", "winner-commit")
END_TXN, INIT_PRODUCER_ID = 26, 22


@dataclass(frozen=True)
class Schedule:
    seed: int
    kind: str
    fault: str
    moment: str = "writing"
    recovery: str = "next-write"
    delay_s: float = 0.0

    @classmethod
    def draw(cls, seed: int) -> Schedule:
        rng = random.Random(seed)
        kind = rng.choice(("batch", "batch", "foreachBatch"))
        fault = rng.choice(FAULTS if kind == "batch" else STREAM_FAULTS)
        moment = rng.choice(MOMENTS) if fault in ("kill-driver", "host-down") else "writing"
        if kind == "foreachBatch":
            recovery = "restart" if fault in ("kill-driver", "host-down") else "none"
        elif fault == "kill-driver":
            recovery = rng.choice(("keeper", "next-write", "command"))
        elif fault == "host-down":
            recovery = rng.choice(("next-write", "command"))
        else:
            recovery = "next-write"
        return cls(seed, kind, fault, moment, recovery, round(rng.uniform(0, 1.5), 2))

    def __str__(self) -> str:
        where = f" at {self.moment}" + (f" +{self.delay_s}s" if self.moment == "writing" else "") \
            if self.fault in ("kill-driver", "host-down") else ""
        return f"seed {self.seed}: {self.kind}, {self.fault}{where}, then {self.recovery}"


@dataclass
class Outcome:
    schedule: Schedule
    violations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


class Cluster:
    """One Apache Kafka node from its Maven jars, the jobs reaching it through a fault proxy."""

    def __init__(self, version: str | None = None, existing: object = None):
        from faults.harness import proxy_existing_broker

        from sparkkafka_sink.testing.apache_kafka import ApacheKafka

        self.owned = existing is None
        self.kafka = existing or ApacheKafka(nodes=1, **({"version": version} if version else {})).__enter__()
        self.node = self.kafka.nodes[0]
        self.proxied = proxy_existing_broker(self.node)
        self.proxy = self.proxied.proxy
        self.direct = self.kafka.bootstrap_servers
        self.bootstrap = self.proxy.address

    def close(self) -> None:
        self.proxied.stop()
        if self.owned:
            self.kafka.__exit__(None, None, None)


class Run:
    """One schedule's jobs, files and checks."""

    def __init__(self, cluster: Cluster, schedule: Schedule, work: Path, put_back: str | None = None):
        self.c, self.s, self.work, self.put_back = cluster, schedule, work, put_back
        self.topic = f"chaos-{schedule.seed}-{uuid.uuid4().hex[:6]}"
        self.prefix = f"chaos-{schedule.seed}-{uuid.uuid4().hex[:6]}"
        self.lease_dir = work / "leases"
        self.lease_dir.mkdir(parents=True, exist_ok=True)
        self.jobs: dict[str, Job] = {}
        create_topics(cluster.direct, {self.topic: 2}, timeout=30)

    def start(self, tag: str, name: str | None = None, **spec: object) -> Job:
        """A job writing rows tagged ``tag`` (``name``: its log's and the run's name for it, when
        a second job of the tag runs: a restarted query)."""
        name = name or tag
        full = {"bootstrap": self.c.bootstrap, "topic": self.topic, "prefix": self.prefix, "tag": tag,
                "kind": self.s.kind, "rows": ROWS, "rate": RATE, "checkpoint": str(self.work / "checkpoint"),
                "min_batch": 6, **spec}
        with _put_back(self.put_back):
            job = Job(str(JOB), json.dumps(full), lease_dir=self.lease_dir, log=self.work / f"{name}.log",
                      lease_window_ms=None)
        self.jobs[name] = job
        return job

    # -- events the faults land on
    def writing(self, job: Job, timeout: float = 120) -> None:
        with TransactionAdmin({"bootstrap.servers": self.c.direct}) as admin:
            def holding():
                assert job.proc.poll() is None, f"the job ended before it wrote:\n{job.output()[-2000:]}"
                found = admin.open_transactions(self.prefix + "-r", time.monotonic() + 10, HOLDING_STATES)
                return [t for t, _, _ in found if not t.endswith("-decision")] or None
            wait_until("a transaction of the write open", holding, timeout=timeout, interval=0.1)

    def held(self, moment: str) -> object:
        """Hold the request of ``moment`` in flight at the proxy; the handle (``wait()`` until held)."""
        if moment == "close":
            return self.c.proxy.blackhole_request(lambda f: b"-decision" in f, INIT_PRODUCER_ID)
        if moment == "decision":
            return self.c.proxy.blackhole_request(lambda f: b"-decision" in f, END_TXN)
        return self.c.proxy.blackhole_request(lambda f: b"-decision" not in f and self.prefix.encode() in f, END_TXN)

    # -- the checks
    def committed_values(self) -> list[str]:
        return [r.value.decode() for r in consume_all(self.c.direct, self.topic, timeout=10,
                                                      isolation_level="read_committed")]

    def nothing_held_back(self, timeout: float = 60) -> list[str]:
        with TransactionAdmin({"bootstrap.servers": self.c.direct}) as admin:
            def none_open():
                found = admin.open_transactions(self.prefix + "-", time.monotonic() + 10, HOLDING_STATES)
                return not found or None
            try:
                wait_until("no transaction of the prefix open", none_open, timeout=timeout, interval=0.5)
            except AssertionError:
                found = admin.open_transactions(self.prefix + "-", time.monotonic() + 10, HOLDING_STATES)
                return [f"left open, holding readers back: {sorted(t for t, _, _ in found)}"]
        return []

    def decisions_completed(self) -> list[str]:
        """Every decision recorded under the prefix: its winners committed, by their coordinators."""
        records = consume_all(self.c.direct, DEFAULT_DECISION_TOPIC, timeout=10, isolation_level="read_committed")
        problems = []
        with TransactionAdmin({"bootstrap.servers": self.c.direct}) as admin:
            for r in records:
                if r.key is None or not r.key.decode().startswith(self.prefix) or r.value is None:
                    continue
                try:
                    decision = Decision.from_bytes(r.value)
                except DecisionFormatError:
                    continue
                for w in decision.winners:
                    d = admin.describe(w.transactional_id, time.monotonic() + 10)
                    if d is None or d.state not in ("CompleteCommit", "PrepareCommit"):
                        problems.append(f"the decision of {decision.write} names {w.transactional_id}, "
                                        f"{d.state if d else 'unknown'} -- not committed")
        return problems


def said(job: Job) -> str:
    lines = [line for line in job.output().splitlines() if line.startswith(("DONE", "REACHED", "FAILED"))]
    return lines[-1] if lines else ""


def check_batch(run: Run, out: Outcome) -> None:
    values = run.committed_values()
    if len(values) != len(set(values)):
        out.violations.append(f"a row twice: {sorted(v for v in set(values) if values.count(v) > 1)[:5]}")
    for tag, job in run.jobs.items():
        seen = {v for v in values if v.startswith(tag + "-")}
        if seen and len(seen) != ROWS:
            out.violations.append(f"write {tag} partly visible: {len(seen)} of {ROWS} rows")
        words = said(job)
        out.notes.append(f"{tag}: {words[:200] or 'killed'}; {len(seen)} rows visible")
        if words == "DONE" and len(seen) != ROWS:
            out.violations.append(f"write {tag} said DONE, but {len(seen)} of {ROWS} rows are visible")
        if any(p in words for p in ("nothing of it is visible", "nothing of it is committed")) and seen:
            out.violations.append(f"write {tag} said nothing of it is visible, but {len(seen)} rows are")
        if "do not run the job again" in words and len(seen) != ROWS:
            out.violations.append(f"write {tag} said it was decided, but {len(seen)} of {ROWS} rows are visible")


def check_stream(run: Run, out: Outcome) -> None:
    values = run.committed_values()
    if len(values) != len(set(values)):
        out.violations.append(f"a row twice: {sorted(v for v in set(values) if values.count(v) > 1)[:5]}")
    numbers = sorted(int(v.rsplit(":", 1)[1]) for v in set(values))
    if len(numbers) != len(set(numbers)):
        out.violations.append("a rate row written by two micro-batches")
    if numbers and numbers != list(range(numbers[-1] + 1)):
        missing = sorted(set(range(numbers[-1] + 1)) - set(numbers))
        out.violations.append(f"micro-batches missing before the last committed one: rows {missing[:10]}")
    out.notes.append(f"{len(numbers)} rows of {len({v.split(':')[1] for v in values})} micro-batches visible; "
                     + "; ".join(f"{tag}: {said(job)[:120] or 'killed'}" for tag, job in run.jobs.items()))


@contextlib.contextmanager
def stopped(pids: list[int]) -> Iterator[None]:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            signal_pid(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                signal_pid(pid, signal.SIGCONT)


def signal_pid(pid: int, sig: int) -> None:
    import os

    os.kill(pid, sig)


def python_workers(job: Job) -> list[int]:
    """The Spark Python workers of ``job`` (the pyspark daemon's children)."""
    out = subprocess.run(["ps", "-eo", "pid,ppid,args"], capture_output=True, text=True).stdout.splitlines()[1:]
    rows = [(int(p), int(pp), a) for p, pp, a in (line.split(None, 2) for line in out if line.strip())]
    daemons = {p for p, _, a in rows if "pyspark.daemon" in a and _descends(p, job.proc.pid, rows)}
    return [p for p, pp, _ in rows if pp in daemons]


def _descends(pid: int, ancestor: int, rows: list[tuple[int, int, str]]) -> bool:
    parents = {p: pp for p, pp, _ in rows}
    while pid and pid != 1:
        if pid == ancestor:
            return True
        pid = parents.get(pid, 0)
    return False


@contextlib.contextmanager
def _put_back(bug: str | None) -> Iterator[None]:
    """The environment a job starts with: ``bug`` put back into every Python process of it."""
    import os

    if bug is None:
        yield
        return
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "SPARKKAFKA_PUT_BACK")}
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (str(BUGS_DIR), saved["PYTHONPATH"])))
    os.environ["SPARKKAFKA_PUT_BACK"] = bug
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


#: faults a write rides out: its job must succeed (Spark retries a failed task; the producer
#: and the driver's requests retry a lost connection or a broker that answers again)
RIDDEN_OUT = ("none", "cut-connections", "pause-broker", "fail-task")


def check_ridden_out(run: Run, out: Outcome) -> None:
    first = next(iter(run.jobs.values()))
    if run.s.fault in RIDDEN_OUT and not said(first).startswith(("DONE", "REACHED")):
        out.violations.append(f"the write did not ride out {run.s.fault}: {said(first)[:600]}")


def run_schedule(cluster: Cluster, s: Schedule, work: Path, put_back: str | None = None) -> Outcome:
    out = Outcome(s)
    started = time.monotonic()
    run = Run(cluster, s, work, put_back)
    try:
        if s.kind == "batch":
            _batch(run, s, out)
            check_batch(run, out)
        else:
            _stream(run, s, out)
            check_stream(run, out)
        check_ridden_out(run, out)
        out.violations += run.nothing_held_back()
        out.violations += run.decisions_completed()
    except Exception:  # noqa: BLE001 - a schedule that could not run says why
        out.violations.append("the schedule itself failed: " + traceback.format_exc()[-1500:])
    finally:
        cluster.proxy.clear_faults()
        cluster.proxy.stop_cutting()
        for job in run.jobs.values():
            if job.proc.poll() is None:
                job.kill()
        for pid in keeper_pids(run.lease_dir):
            with contextlib.suppress(ProcessLookupError):
                signal_pid(pid, signal.SIGKILL)
    out.seconds = time.monotonic() - started
    return out


def _kill(run: Run, job: Job, s: Schedule) -> None:
    if s.moment == "writing":
        run.writing(job)
        time.sleep(s.delay_s)
    else:
        handle = run.held(s.moment)
        if not handle.wait(180):  # type: ignore[attr-defined]
            raise AssertionError(f"the commit's {s.moment} request never came")
    if s.fault == "host-down":
        job.host_down()
    else:
        job.kill()
    run.c.proxy.clear_faults()


def _batch(run: Run, s: Schedule, out: Outcome) -> None:
    spec: dict = {}
    if s.fault == "fail-task":
        spec["fail_task"] = True
    if s.fault == "short-timeout":  # tasks that take ~25 s, transactions that live 60 s (15 s for the tasks)
        spec.update(rate=8, timeout_ms=60_000)
    if s.fault == "cut-connections":
        run.c.proxy.cut_in_flight(every=7)
    a = run.start("a", **spec)
    if s.fault in ("kill-driver", "host-down"):
        _kill(run, a, s)
    elif s.fault == "kill-python-worker":
        run.writing(a)
        workers = python_workers(a)
        if workers:
            signal_pid(random.Random(s.seed).choice(workers), signal.SIGKILL)
        out.notes.append(f"killed one of {len(workers)} Python workers")
    elif s.fault == "pause-broker":
        run.writing(a)
        run.c.node.pause()
        time.sleep(3 + s.delay_s * 4)
        run.c.node.resume()
    elif s.fault == "stop-keeper":
        run.writing(a)
        with stopped(keeper_pids(run.lease_dir)):
            b = run.start("b")  # the next write, under the same prefix, judges a's driver gone
            b.wait(240)
    if a.proc.poll() is None:
        a.wait(240)
    run.c.proxy.stop_cutting()
    if s.recovery == "command":
        with _put_back(run.put_back):
            said_ = run_command(_Bootstrap(run.c.direct), "abort", "--prefix", run.prefix, "--yes")
        out.notes.append("command: " + said_.strip().splitlines()[-1][:200])
    if s.recovery == "keeper":
        time.sleep(3)
    if s.recovery == "next-write" and "b" not in run.jobs:
        b = run.start("b")
        b.wait(240)
        if said(b) != "DONE":
            out.violations.append(f"the next write failed: {said(b)[:500]}")


def _stream(run: Run, s: Schedule, out: Outcome) -> None:
    if s.fault == "cut-connections":
        run.c.proxy.cut_in_flight(every=7)
    q = run.start("s", min_batch=4)
    if s.fault in ("kill-driver", "host-down"):
        _kill(run, q, s)
    elif s.fault == "kill-python-worker":
        run.writing(q)
        workers = python_workers(q)
        if workers:
            signal_pid(random.Random(s.seed).choice(workers), signal.SIGKILL)
    elif s.fault == "pause-broker":
        run.writing(q)
        run.c.node.pause()
        time.sleep(3 + s.delay_s * 4)
        run.c.node.resume()
    if q.proc.poll() is None:
        q.wait(300)
    run.c.proxy.stop_cutting()
    first = said(q)
    if s.recovery == "restart" or not first.startswith("REACHED"):
        again = run.start("s", name="s2", min_batch=8)
        again.wait(300)
        if not said(again).startswith("REACHED"):
            out.violations.append(f"the restarted query failed: {said(again)[:500]}")


class _Bootstrap:
    def __init__(self, bootstrap: str):
        self.bootstrap_servers = bootstrap


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Exactly-once under randomised faults, against Apache Kafka and Spark.")
    ap.add_argument("--schedules", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1, help="the first schedule's seed; the others follow it")
    ap.add_argument("--only", type=int, action="append", help="run only this seed (repeatable)")
    ap.add_argument("--kafka-version", default=None)
    ap.add_argument("--put-back", choices=BUGS, help="run with this bug put back into the package (it must be found)")
    ap.add_argument("--work", type=Path, help="keep each schedule's files (the jobs' logs, the keepers') here")
    args = ap.parse_args(argv)
    seeds = args.only or list(range(args.seed, args.seed + args.schedules))
    cluster = Cluster(args.kafka_version)
    violations = 0
    counts: dict[str, int] = {}
    try:
        with (contextlib.nullcontext(str(args.work)) if args.work else tempfile.TemporaryDirectory(prefix="chaos-")) \
                as root:
            for seed in seeds:
                s = Schedule.draw(seed)
                print(s, flush=True)
                out = run_schedule(cluster, s, Path(root) / str(seed), args.put_back)
                counts[s.fault] = counts.get(s.fault, 0) + 1
                for note in out.notes:
                    print(f"  {note}", flush=True)
                for v in out.violations:
                    print(f"  VIOLATION: {v}", flush=True)
                print(f"  {'ok' if not out.violations else 'VIOLATED'} in {out.seconds:.0f} s", flush=True)
                violations += bool(out.violations)
    finally:
        cluster.close()
    print(f"{len(seeds)} schedules ({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}) on Apache Kafka "
          f"{cluster.kafka.version}: {violations} with a violation")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
