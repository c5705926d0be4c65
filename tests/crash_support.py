"""What the crash and schedule tests of exactly-once share: Spark drivers run as process groups
of their own (killed whole), the wait for a write's open transaction, the keepers' pids, and what
read_committed readers see."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kafka_helpers import consume_all

from sparkkafka_sink import Producer
from sparkkafka_sink.exactly_once.ids import is_decision_id
from sparkkafka_sink.producer.handover import TransactionAdmin
from sparkkafka_sink.spark.options import parse_options
from sparkkafka_sink.testing.waiting import wait_until

JOB = Path(__file__).parent / "exactly_once" / "crash_job.py"
STREAM_JOB = Path(__file__).parent / "spark" / "exactly_once_stream_job.py"
AFTER = 100  # rows another producer writes after the crash
#: the jobs' leaseWindowMs, as the command's --lease-window below: the drivers here are dead or
#: beat every 2 s (a test of a live driver beside another gives the default, None)
LEASE_WINDOW_MS = 4000


class Job:
    """A Spark driver in a process group of its own (killed whole, as a node or scheduler does)."""

    def __init__(self, *args: str, lease_dir: Path, log: Path, lease_window_ms: int | None = LEASE_WINDOW_MS,
                 cwd: Path | None = None):
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1",
                   SPARKKAFKA_LEASE_DIR=str(lease_dir))
        if lease_window_ms is not None:
            env["JOB_LEASE_WINDOW_MS"] = str(lease_window_ms)
        self.log, self.lease_dir = log, lease_dir
        self._out = open(log, "w")
        self.proc = subprocess.Popen([sys.executable, *args], env=env, stdout=self._out, stderr=subprocess.STDOUT,
                                     cwd=cwd, start_new_session=True)

    def kill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        self._out.close()

    def kill_all_but_keeper(self) -> None:
        """The driver killed with every process of its session -- its JVM, its Python, Spark's
        Python workers (process groups of their own, so ``kill`` spares them) -- leaving only its
        keeper (a session of its own): no one but the keeper can end the write's transactions."""
        os.killpg(self.proc.pid, signal.SIGSTOP)
        for pid in _session(self.proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        self._out.close()

    def host_down(self) -> None:
        """The driver and its keepers killed at once (:func:`host_down`)."""
        host_down(self.proc.pid, self.lease_dir)
        self.proc.wait(30)
        self._out.close()

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            self._out.close()

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def batch_job(kafka, topic, first, rows, rate, lease_dir, log, delay_s: float = 0,
              lease_window_ms: int | None = LEASE_WINDOW_MS) -> Job:
    return Job(str(JOB), kafka.bootstrap_servers, topic, str(first), str(rows), str(rate),
               *([str(delay_s)] if delay_s else []), lease_dir=lease_dir, log=log, lease_window_ms=lease_window_ms)


def default_prefix(kafka, topic, bootstrap: str | None = None) -> str:
    return parse_options({"kafka.bootstrap.servers": bootstrap or kafka.bootstrap_servers, "topic": topic,
                          "deliveryGuarantee": "exactly-once"}).transactional_id_prefix


def writing(kafka, prefix: str, job: Job, timeout: float = 120) -> list[str]:
    """Wait until the write under ``prefix`` has a task's transaction open holding a partition
    (its records are in the log); the transactional ids open then.  A decision's transaction
    (recording a decision or its tombstone, on the decisions topic) is not one: the write's rows
    are committed or being committed by then."""
    with TransactionAdmin({"bootstrap.servers": kafka.bootstrap_servers}) as admin:
        def holding():
            assert job.proc.poll() is None, f"the job ended early:\n{job.output()[-3000:]}"
            found = admin.open_transactions(prefix + "-r", time.monotonic() + 10)
            held = [t for t, _, _ in found if not is_decision_id(t)
                    and (d := admin.describe(t, time.monotonic() + 10)) and d.partitions]
            return held or None
        return wait_until(f"an open transaction under {prefix!r}", holding, timeout=timeout, interval=0.2)


def pause_workers(job: Job) -> list[int]:
    """SIGSTOP the Python processes of ``job``'s session but its driver's own (Spark's Python
    workers, which put themselves in process groups of their own: its write tasks then hold their
    open transactions); their pids, for :func:`resume`.  The keeper runs in a session of its own
    and beats on."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            pid, rest = stat.read_text().split(" (", 1)
            comm, fields = rest.rsplit(") ", 1)
        except OSError:
            continue  # gone meanwhile
        if int(fields.split()[3]) == job.proc.pid and int(pid) != job.proc.pid and comm.startswith("python"):
            os.kill(int(pid), signal.SIGSTOP)
            pids.append(int(pid))
    return pids


def resume(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass


def host_down(group: int, lease_dir: Path) -> None:
    """The host of a driver goes down: its process group (``group``, its session leader's pid)
    and every process started with its ``lease_dir`` -- Spark's Python workers (groups of their
    own) and the keepers (sessions of their own), one the driver started a moment ago whose
    ``keeper.json`` is not written yet included -- are SIGKILLed, none left to end a transaction
    first.  The group is stopped first; then looks and kills until a look finds nothing alive (a
    worker killed mid-spawn of a keeper leaves the keeper to the next look)."""
    os.killpg(group, signal.SIGSTOP)
    _kill_started_with(lease_dir)
    try:
        os.killpg(group, signal.SIGKILL)
    except ProcessLookupError:
        pass


def stop_leftovers(lease_dir: Path) -> list[int]:
    """At a test's end: every process its jobs started with ``lease_dir`` still alive -- a keeper
    still ending a write, a driver the test left -- SIGKILLed by its pid; their pids."""
    return _kill_started_with(lease_dir) if lease_dir.exists() else []


def _kill_started_with(lease_dir: Path) -> list[int]:
    """SIGKILL, by pid, every process whose environment names ``lease_dir`` (this test's own
    directory: no other process has it), looking again until a look finds none."""
    marker = f"SPARKKAFKA_LEASE_DIR={lease_dir}".encode()
    deadline = time.monotonic() + 30
    killed: list[int] = []
    while True:
        found = [pid for pid in _pids_alive() if pid != os.getpid() and marker in _environ(pid).split(b"\0")]
        assert time.monotonic() < deadline, f"processes of the job outlive SIGKILL: {found}"
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
        if not found:
            return killed
        time.sleep(0.05)


def _session(leader: int) -> list[int]:
    """The processes of the session ``leader`` leads (Spark's Python workers stay in it)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == leader:
            found.append(int(stat.parent.name))
    return found


def keeper_log(lease_dir: Path) -> str:
    """What the keepers under ``lease_dir`` logged."""
    return "".join(p.read_text(errors="replace") for p in sorted(lease_dir.glob("*/keeper.log")))


def _pids_alive() -> list[int]:
    """Every process but zombies (a killed child its parent has not reaped yet)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state = stat.read_text().rsplit(") ", 1)[1].split()[0]
        except (OSError, IndexError):
            continue  # gone meanwhile
        if state != "Z":
            pids.append(int(stat.parent.name))
    return pids


def _environ(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def keeper_pids(lease_dir: Path) -> list[int]:
    """The keepers beating for the jobs' drivers (their registries under ``lease_dir``)."""
    return [int(json.loads(p.read_text())["pid"]) for p in lease_dir.glob("*/keeper.json")]


def write_after(kafka, topic) -> None:
    with Producer({"bootstrap.servers": kafka.bootstrap_servers}) as p:
        for i in range(AFTER):
            p.send(topic, value=b"after-%d" % i)
        p.flush(30)


def committed(kafka, topic, expected: int, timeout: float):
    return [r.value.decode() for r in consume_all(kafka.bootstrap_servers, topic, expected_count=expected,
                                                  timeout=timeout, isolation_level="read_committed")]


def visible(kafka, topic) -> list[str]:
    """Rows a read_committed reader sees now (the dead write's open transaction holds the rest)."""
    return [r.value.decode() for r in consume_all(kafka.bootstrap_servers, topic, timeout=5,
                                                  isolation_level="read_committed")]


def stalled(kafka, topic) -> int:
    return len(visible(kafka, topic))


def run_command(kafka, *args: str) -> str:
    """The operator's command; leases are watched 4 s (the drivers here are dead or beat every 2 s)."""
    out = subprocess.run([sys.executable, "-m", "sparkkafka_sink.transactions", *args, "--lease-window", "4",
                          "--bootstrap-servers", kafka.bootstrap_servers], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


@contextmanager
def proxied(cluster) -> Iterator:
    """The cluster's first broker behind a FaultProxy (the proxy, while the block runs): a
    driver's commit can be stopped at a chosen request."""
    from faults.harness import proxy_existing_broker

    broker = proxy_existing_broker(cluster.nodes[0])
    try:
        yield broker.proxy
    finally:
        broker.stop()
