"""Exactly-once: the driver's lease, so that a write whose driver died leaves nothing open.

A write's task transactions stay open until its driver commits them.  If the driver dies first
(SIGKILL, its node lost), nobody will: every read_committed reader of those partitions stands
still until the coordinator times the transactions out.  Three things end them sooner:

* **the keeper** -- a small process of the driver's host (``python -m
  sparkkafka_sink.spark.driver.lease``), one per driver JVM and transactional id prefix, started
  by the first exactly-once write that plans under the prefix and detached from it: it keeps the
  driver's lease (``producer/leases.py``: an epoch bumped every second) and watches the driver's
  JVM.  When the JVM is gone, it closes the driver's unfinished writes (their closed markers:
  a late task attempt writes nothing) and ends their open transactions, within about a second
  (:func:`settle`: aborted, but committed where the driver had decided to commit); then it
  exits.  It exits too after :data:`IDLE_S` without an open transaction of the driver's nor a
  write planned under the prefix (the next one starts it again).
* **the next exactly-once write under the prefix** -- before its tasks begin, its driver ends the
  open transactions of every other driver whose lease stands still (the host died with the
  keeper), and never those of a live one (:func:`end_dead_writes`);
* **the operator's command** -- ``python -m sparkkafka_sink.transactions``, the same judgement.

The driver is named by a token (:func:`driver_token`: its host, its JVM's pid and start time),
which starts every run id of its writes, so the transactional ids say whose they are.  The
keeper finds the JVM as the nearest ``java`` process above the planning process (Spark's Python
workers are its children); where none is found (not Linux), it watches the planning process's
parent, Spark's worker daemon, which ends with the JVM.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import pickle
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from sparkkafka_sink.errors import KafkaError
from sparkkafka_sink.producer import dead_writes
from sparkkafka_sink.producer.leases import BEAT_S, OWNER_DIGITS, RUN_DIGITS, end_dead, lease_id, owned_prefix

log = logging.getLogger("sparkkafka_sink.spark")

#: the keeper exits after this long without an open transaction of its driver's, nor a write planned
IDLE_S = 120.0
#: the keeper gives up after the cluster did not answer for this long
UNREACHABLE_S = 300.0
#: how long a planning process waits for a new keeper's first beat
START_TIMEOUT_S = 30.0
_ABORT_TIMEOUT_S = 60.0


# -- who the driver is ------------------------------------------------------------------------------
def _stat(pid: int) -> tuple[str, int, int] | None:
    """(command name, parent pid, start time in clock ticks) of ``pid`` on Linux, else None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name, rest = text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2:].split()
    return name, int(rest[1]), int(rest[19])


def driver_process() -> tuple[int, int]:
    """(pid, start ticks) of the driver's JVM: the nearest ``java`` above this process; Spark's
    worker daemon (this process's parent) where no JVM is found (start 0 where unknown)."""
    pid = os.getpid()
    while pid > 1:
        stat = _stat(pid)
        if stat is None:
            break
        if stat[0] == "java":
            return pid, stat[2]
        pid = stat[1]
    parent = os.getppid()
    stat = _stat(parent)
    return parent, stat[2] if stat else 0


def driver_token(process: tuple[int, int] | None = None) -> str:
    """The driver's name in its run ids: its host, its JVM's pid and start time."""
    pid, start = process or driver_process()
    return hashlib.sha1(f"{socket.gethostname()}:{pid}:{start}".encode()).hexdigest()[:OWNER_DIGITS]


def new_run_id(token: str) -> str:
    """A write's run id: the driver's token, then its own."""
    return token + uuid.uuid4().hex[:RUN_DIGITS]


def _alive(process: tuple[int, int]) -> bool:
    pid, start = process
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = _stat(pid)
    return stat is None or start == 0 or stat[2] == start  # a reused pid is another process


# -- the keeper's files ---------------------------------------------------------------------------
def lease_dir() -> Path:
    """Where keepers leave their pid and log files (``$SPARKKAFKA_LEASE_DIR``, else the temp
    directory)."""
    env = os.environ.get("SPARKKAFKA_LEASE_DIR")
    path = Path(env) if env else Path(tempfile.gettempdir()) / f"sparkkafka-sink-leases-{os.getuid()}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _files(prefix: str, token: str) -> tuple[Path, Path, Path]:
    """(pid file, lock file, log file) of the keeper of ``prefix`` on the driver ``token``."""
    stem = f"{token}-{hashlib.sha1(prefix.encode()).hexdigest()[:12]}"
    d = lease_dir()
    return d / f"{stem}.pid", d / f"{stem}.lock", d / f"{stem}.log"


def keeper_pid(prefix: str, token: str) -> int | None:
    """The pid of the live keeper of ``prefix`` on the driver ``token``, if one beats."""
    pid_file = _files(prefix, token)[0]
    try:
        pid = int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if _alive((pid, 0)) else None


# -- the planning process ---------------------------------------------------------------------------
def ensure_lease(config: Any, prefix: str, token: str, process: tuple[int, int],
                 commit_log_dir: str | None = None) -> None:
    """A keeper beats for ``prefix`` on this driver before any task of the write begins: the
    running one, or one started now (waiting for its first beat).  ``commit_log_dir``: a
    streaming query's record of its micro-batches' commits (``transactions.MicroBatchLog``)."""
    pid_file, lock_file, log_file = _files(prefix, token)
    with open(lock_file, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two writes planning at once start one keeper
        if keeper_pid(prefix, token) is not None:
            pid_file.touch()  # a write plans: the keeper stays (its idle clock starts again)
            return
        pid_file.unlink(missing_ok=True)
        with open(log_file, "ab") as out:
            keeper = subprocess.Popen([sys.executable, "-m", "sparkkafka_sink.spark.driver.lease"],
                                      stdin=subprocess.PIPE, stdout=out, stderr=out, start_new_session=True,
                                      close_fds=True)
        assert keeper.stdin is not None
        keeper.stdin.write(pickle.dumps((config, prefix, token, process, str(pid_file), commit_log_dir)))
        keeper.stdin.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if keeper_pid(prefix, token) == keeper.pid:
                return
            if keeper.poll() is not None:
                break
            time.sleep(0.05)
        if keeper.poll() is None:
            keeper.kill()
        tail = log_file.read_text(errors="replace").strip().splitlines()[-5:]
        raise KafkaError(f"the driver's lease keeper did not start beating under {lease_id(prefix, token)!r} "
                         f"(its log, {log_file}: {' | '.join(tail) or 'empty'})")


def end_dead_writes(admin: Any, prefix: str, token: str, deadline: float,
                    commit_log_dir: str | None = None) -> list[str]:
    """Before a write's tasks begin: end the open transactions under ``prefix`` of every other
    driver that is gone (:func:`settle`); the ids ended."""
    ended = end_dead(admin, f"{prefix}-r", deadline, spare=(token,),
                     end=lambda ids: settle(admin, ids, commit_log_dir, deadline))
    return [t.transactional_id for t in ended]


def settle(admin: Any, transactional_ids: list[str], commit_log_dir: str | None, deadline: float) -> list[str]:
    """End a gone driver's open transactions as it would have (``dead_writes.settle``): what it
    had decided to commit committed -- a batch write's after its commit marker, and what a
    micro-batch's intent in ``commit_log_dir`` records (the query's restart would commit it) --
    the others aborted.  Returns the ids committed."""
    return dead_writes.settle(admin, transactional_ids, deadline, _recorded(transactional_ids, commit_log_dir))


def _recorded(transactional_ids: list[str], commit_log_dir: str | None) -> dict[str, Any]:
    """The transactions among these that a micro-batch's intent records: ``{id: prepared}``."""
    if not commit_log_dir:
        return {}
    from sparkkafka_sink.spark.driver.transactions import MicroBatchLog

    log_ = MicroBatchLog(commit_log_dir)
    batches = {w[1] for w in map(dead_writes.write_of, transactional_ids) if w and w[1] is not None}
    recorded = {p.transactional_id: p for b in sorted(batches) for p in (log_.intent(b) or [])}
    return {t: recorded[t] for t in transactional_ids if t in recorded}


# -- the keeper -----------------------------------------------------------------------------------
def keep(config: Any, prefix: str, token: str, process: tuple[int, int], pid_file: str,
         commit_log_dir: str | None = None) -> int:
    """Beat under the driver's lease until its JVM is gone (then end its writes), idle, or the
    cluster unreachable for :data:`UNREACHABLE_S` (the coordinator then times out what is left)."""
    from sparkkafka_sink.producer.handover import TransactionAdmin

    lease, mine = lease_id(prefix, token), owned_prefix(prefix, token)
    now = time.monotonic()
    busy_at, checked_at, answered_at, gone_at, announced = now, 0.0, now, 0.0, False
    with TransactionAdmin(config) as admin:
        while True:
            started = time.monotonic()
            try:
                if not _alive(process):
                    gone_at = gone_at or started
                    if started - gone_at > _ABORT_TIMEOUT_S:  # the cluster went with it
                        log.warning("the driver's JVM is gone and the cluster does not answer: the keeper ends")
                        return 1
                    _end_all(admin, mine, commit_log_dir)
                    return 0
                admin.fence(lease, started + 10)
                answered_at = time.monotonic()
                if not announced:
                    Path(pid_file).write_text(f"{os.getpid()}\n")
                    announced = True
                    log.info("keeping %s for the driver %s (JVM pid %d)", lease, token, process[0])
                if started - checked_at > 10:
                    checked_at = started
                    if admin.open_transactions(mine, started + 10, ("Ongoing",)):
                        busy_at = started
                    elif started - max(busy_at, _planned_at(pid_file)) > IDLE_S:
                        log.info("no write of the driver %s for %.0f s: the keeper ends", token, IDLE_S)
                        return 0
            except KafkaError as e:  # a broker down: beat again (observers see no beat meanwhile)
                log.warning("lease %s: %s", lease, e)
                if time.monotonic() - answered_at > UNREACHABLE_S:
                    log.warning("the cluster did not answer for %.0f s: the keeper ends", UNREACHABLE_S)
                    return 1
            time.sleep(max(0.0, BEAT_S - (time.monotonic() - started)))


def _planned_at(pid_file: str) -> float:
    """When a write last planned under the lease (``ensure_lease`` touches the pid file), on the
    monotonic clock."""
    try:
        return time.monotonic() - (time.time() - os.stat(pid_file).st_mtime)
    except OSError:
        return 0.0


def _end_all(admin: Any, mine: str, commit_log_dir: str | None) -> None:
    """The driver is gone: settle its open transactions, fence its idle producers."""
    deadline = time.monotonic() + _ABORT_TIMEOUT_S
    found = admin.open_transactions(mine, deadline, ("Ongoing", "Empty"))
    ongoing = [txn_id for txn_id, _, state in found if state == "Ongoing"]
    committed = settle(admin, ongoing, commit_log_dir, deadline)
    for txn_id, _, state in found:
        if state == "Empty":  # initialised, not in a transaction: it can never begin one
            admin.fence(txn_id, deadline)
    log.warning("the driver's JVM is gone: of its %d open transactions %d committed (decided before the crash), "
                "the others aborted: %s", len(ongoing), len(committed), ", ".join(ongoing) or "none")


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    config, prefix, token, process, pid_file, commit_log_dir = pickle.loads(sys.stdin.buffer.read())
    try:
        return keep(config, prefix, token, process, pid_file, commit_log_dir)
    finally:
        try:
            if Path(pid_file).read_text().split()[0] == str(os.getpid()):
                Path(pid_file).unlink()
        except (OSError, IndexError):
            pass


if __name__ == "__main__":
    raise SystemExit(main())
