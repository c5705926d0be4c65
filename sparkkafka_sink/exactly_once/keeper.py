"""The keeper: a small process beside the driver that keeps its lease and ends its writes when
the driver dies.

One per driver (its JVM) and transactional id prefix, started by the first exactly-once write
that plans under the prefix (:func:`ensure_keeper`; again at every commit, should it have died)
and detached from Spark (``python -m sparkkafka_sink.exactly_once.keeper``, its settings as JSON
on stdin).  It lives as long as its driver has writes open under the prefix:

* a thread beats the driver's lease (``leases``) every ``BEAT_S`` -- and does nothing else, so a
  slow answer of any other request never stalls it;
* the main loop watches the JVM: once it is gone, the keeper stops beating and ends every write
  of the driver still open (``settle``: as decided, never against the decision), trying again
  until each is ended or its transactions' time has passed, and exits.  It also ends the writes
  the driver gave up on (a commit that could not finish: :meth:`Registry.abandon`), and exits
  :data:`IDLE_S` after the driver's last write ended -- deciding so under the registry's lock,
  which a write registers under too (:func:`ensure_keeper`), so no write is left to a keeper
  that is going.

Its files are in a :class:`Registry` (``$SPARKKAFKA_LEASE_DIR``, else the temp directory): the
keeper's own (pid, start time and lease, checked as a whole, not by the pid alone), the driver's
(its JVM), its log, and one per write the driver has open (a streaming query's run counts as
one), each with the time past which it cannot be open any more (``transaction.timeout.ms`` after
its last use).  A registry outlives its keeper, so its log can still be read after the driver
died; a keeper starting removes the registries whose driver and keeper are gone and in which
nothing changed for :data:`RETAIN_S` (:func:`sweep`).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from sparkkafka_sink.errors import KafkaError
from sparkkafka_sink.exactly_once.ids import lease_id, owned_prefix, parse
from sparkkafka_sink.exactly_once.leases import BEAT_S
from sparkkafka_sink.exactly_once.owner import Process, alive, stat

if TYPE_CHECKING:  # (imported where used: the keeper process starts light)
    from sparkkafka_sink.exactly_once.decision_log import DecisionLog
    from sparkkafka_sink.exactly_once.settle import Settled
    from sparkkafka_sink.producer.handover import TransactionAdmin

__all__ = ["IDLE_S", "RETAIN_S", "KeeperSpec", "Registry", "ensure_keeper", "keep", "main", "sweep"]

log = logging.getLogger("sparkkafka_sink.exactly_once.keeper")

#: the keeper exits this long after its driver's last write ended
IDLE_S = 60.0
#: how long a planning process waits for a new keeper's first beat
START_TIMEOUT_S = 30.0
#: the bound of each ending the keeper attempts, its longest pause between attempts, and how long
#: past a write's transactions' timeout it goes on trying (a write that was not registered)
_END_TIMEOUT_S = 60.0
_MAX_PAUSE_S = 30.0
_AFTER_TIMEOUT_S = 60.0
_LOOP_S = 0.5
#: a registry whose driver and keeper are gone is removed once nothing in it changed for this long
#: (a week: its log says what the keeper did when the driver died)
RETAIN_S = 7 * 86400.0


class KeeperError(KafkaError):
    """The keeper could not be started: the message says why and where its log is."""


@dataclass(frozen=True)
class KeeperSpec:
    """What a keeper needs: the cluster (the producer's settings, security included), the
    prefix, the driver it keeps, where decisions are kept."""

    config: dict[str, Any]
    prefix: str
    owner: str
    process: Process
    decision_topic: str

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> KeeperSpec:
        d = json.loads(text)
        return cls(d["config"], d["prefix"], d["owner"], (int(d["process"][0]), int(d["process"][1])),
                   d["decision_topic"])


def _root() -> Path:
    env = os.environ.get("SPARKKAFKA_LEASE_DIR")
    return Path(env) if env else Path(tempfile.gettempdir()) / f"sparkkafka-sink-leases-{os.getuid()}"


class Registry:
    """The files of one driver's keeper under one prefix: ``keeper.json``, ``driver.json``,
    ``keeper.log`` and ``writes/``."""

    def __init__(self, prefix: str, owner: str, root: Path | None = None):
        self.prefix, self.owner = prefix, owner
        self.dir = (root or _root()) / f"{owner}-{hashlib.sha1(prefix.encode()).hexdigest()[:12]}"
        self.writes = self.dir / "writes"
        self.writes.mkdir(parents=True, exist_ok=True)

    def own(self, driver: Process) -> None:
        """The driver (its JVM) whose registry this is: once it is gone, no write of it registers
        here again (a restarted driver is another owner), so ``sweep`` may remove it."""
        self._write(self.dir / "driver.json", {"pid": driver[0], "start": driver[1]})

    @property
    def log_file(self) -> Path:
        return self.dir / "keeper.log"

    # -- the keeper's identity -------------------------------------------------------------------
    def keeper(self) -> Process | None:
        """The live keeper of this driver and prefix: its pid, start time and lease all as it
        recorded them (a reused pid is not it)."""
        try:
            found = json.loads((self.dir / "keeper.json").read_text())
            process = (int(found["pid"]), int(found["start"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if found.get("lease") != lease_id(self.prefix, self.owner) or not alive(process) or process[1] == 0:
            return None
        return process

    def announce(self) -> None:
        """The keeper beats: its identity, written whole."""
        me = os.getpid()
        found = stat(me)
        self._write(self.dir / "keeper.json", {"pid": me, "start": found[2] if found else 0,
                                                "lease": lease_id(self.prefix, self.owner)})

    def retire(self) -> None:
        try:
            if json.loads((self.dir / "keeper.json").read_text()).get("pid") == os.getpid():
                (self.dir / "keeper.json").unlink()
        except (OSError, ValueError):
            pass

    # -- the driver's open writes ----------------------------------------------------------------
    def register(self, name: str, open_for_s: float) -> None:
        """A write (or a streaming run) the driver has open: the keeper stays while it may be."""
        self._write(self.writes / name, {"until": time.time() + open_for_s, "abandoned": False})

    def abandon(self, name: str) -> None:
        """The driver could not end this write: the keeper ends it (as decided)."""
        self._write(self.writes / name, {"until": time.time() + 86400.0, "abandoned": True})

    def unregister(self, name: str) -> None:
        (self.writes / name).unlink(missing_ok=True)

    def retire_if_idle(self) -> bool:
        """The keeper's decision to go, under the lock ``ensure_keeper`` registers under: True
        (and its identity removed) when no write is registered."""
        with self.lock():
            if self.entries():
                return False
            self.retire()
            return True

    def entries(self) -> dict[str, dict[str, Any]]:
        found = {}
        for path in self.writes.iterdir():
            if path.name.startswith("."):
                continue
            try:
                found[path.name] = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
        return found

    def lock(self) -> IO[str]:
        """An exclusive lock on the registry (two writes planning at once start one keeper)."""
        handle = open(self.dir / "keeper.lock", "w")
        fcntl.flock(handle, fcntl.LOCK_EX)
        return handle

    @staticmethod
    def _write(path: Path, content: dict[str, Any]) -> None:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(content))
        os.replace(tmp, path)


def _process_in(path: Path) -> Process | None:
    """The (pid, start) a registry's file records, None when it records none."""
    try:
        found = json.loads(path.read_text())
        return int(found["pid"]), int(found["start"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def sweep(root: Path, spare: Path, retain_s: float = RETAIN_S) -> list[Path]:
    """Remove the registries under ``root`` (but ``spare``) that no one will use again: their
    driver gone (or never recorded, as before ``driver.json``), no keeper of theirs alive, nothing
    in them changed for ``retain_s``, and their lock free.  Returns what it removed."""
    removed = []
    horizon = time.time() - retain_s
    for path in root.iterdir() if root.is_dir() else ():
        if path == spare or not path.is_dir() or not (path / "writes").is_dir():
            continue  # (not a registry)
        try:
            files = [path, *path.rglob("*")]
            if max(f.lstat().st_mtime for f in files) > horizon:
                continue
        except OSError:
            continue
        if any(p is not None and alive(p) for p in (_process_in(path / "driver.json"),
                                                      _process_in(path / "keeper.json"))):
            continue
        try:
            with open(path / "keeper.lock", "a") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)  # not while a keeper starts
                shutil.rmtree(path)
        except OSError:
            continue
        removed.append(path)
    return removed


def ensure_keeper(spec: KeeperSpec, registry: Registry, register: tuple[str, float] | None = None) -> int:
    """The pid of a keeper that beats for the driver under the prefix: the running one, or one
    started now (once its first beat landed).  ``register``: a write ``(name, open_for_s)`` to
    register first, under the same lock the keeper takes to decide it is idle -- so the keeper
    either sees the write and stays, or had retired before and a new one starts."""
    with registry.lock():
        if register is not None:
            registry.register(*register)
        running = registry.keeper()
        if running is not None:
            return running[0]
        registry.own(spec.process)
        for gone in sweep(registry.dir.parent, registry.dir):
            log.info("removed the keeper registry %s: its driver and keeper are gone", gone)
        with open(registry.log_file, "ab") as out:
            keeper = subprocess.Popen([sys.executable, "-m", "sparkkafka_sink.exactly_once.keeper"],
                                      stdin=subprocess.PIPE, stdout=out, stderr=out, start_new_session=True,
                                      close_fds=True)
        assert keeper.stdin is not None
        keeper.stdin.write(spec.to_json().encode())
        keeper.stdin.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            found = registry.keeper()
            if found is not None and found[0] == keeper.pid:
                return keeper.pid
            if keeper.poll() is not None:
                break
            time.sleep(0.05)
        if keeper.poll() is None:
            keeper.kill()
        tail = registry.log_file.read_text(errors="replace").strip().splitlines()[-5:]
        raise KeeperError(f"it did not beat under {lease_id(spec.prefix, spec.owner)!r} within {START_TIMEOUT_S:.0f} s "
                          f"(its log, {registry.log_file}: {' | '.join(tail) or 'empty'})")


# -- the keeper process -------------------------------------------------------------------------
class _Beat(threading.Thread):
    """Bumps the lease every ``BEAT_S``, with a client of its own; nothing else."""

    def __init__(self, spec: KeeperSpec, registry: Registry):
        super().__init__(name="lease-beat", daemon=True)
        self.spec, self.registry = spec, registry
        self.stop = threading.Event()
        self.first = threading.Event()
        self.last_beat = time.monotonic()

    def run(self) -> None:
        from sparkkafka_sink.producer.handover import TransactionAdmin

        lease = lease_id(self.spec.prefix, self.spec.owner)
        with TransactionAdmin(self.spec.config) as admin:
            while not self.stop.is_set():
                started = time.monotonic()
                try:
                    admin.fence(lease, started + 4 * BEAT_S)
                    self.last_beat = time.monotonic()
                    if not self.first.is_set():
                        self.registry.announce()
                        self.first.set()
                        log.info("keeping %s for the driver %s (JVM pid %d)", lease, self.spec.owner,
                                 self.spec.process[0])
                except KafkaError as e:  # a broker down: beat again (observers see no beat meanwhile)
                    log.warning("lease %s: %s", lease, e)
                self.stop.wait(max(0.0, BEAT_S - (time.monotonic() - started)))


def keep(spec: KeeperSpec, registry: Registry) -> int:
    """Beat while the driver has writes open under the prefix; end them when it is gone."""
    from sparkkafka_sink.exactly_once.decision_log import DecisionLog
    from sparkkafka_sink.producer.handover import TransactionAdmin

    beat = _Beat(spec, registry)
    beat.start()
    idle_since = time.monotonic()
    try:
        with TransactionAdmin(spec.config) as admin:
            decisions = DecisionLog(admin, spec.decision_topic)
            while True:
                now = time.monotonic()
                if not alive(spec.process):
                    beat.stop.set()  # the lease stands still: the next write or the command may end them too
                    _end_all(admin, decisions, spec, registry)
                    return 0
                entries = registry.entries()
                for name, entry in entries.items():
                    if entry.get("abandoned"):
                        _end_abandoned(admin, decisions, registry, name)
                    elif float(entry.get("until", 0)) < time.time():
                        registry.unregister(name)
                if registry.entries():
                    idle_since = now
                elif now - idle_since > IDLE_S:
                    if registry.retire_if_idle():
                        log.info("no open write of the driver %s for %.0f s: the keeper ends", spec.owner, IDLE_S)
                        return 0
                    idle_since = now
                time.sleep(_LOOP_S)
    finally:
        beat.stop.set()
        registry.retire()


def _end_abandoned(admin: TransactionAdmin, decisions: DecisionLog, registry: Registry, name: str) -> None:
    from sparkkafka_sink.exactly_once.settle import settle

    write = parse(name)
    if write is None:
        registry.unregister(name)
        return
    try:
        settled = settle(admin, decisions, write, time.monotonic() + _END_TIMEOUT_S)
    except KafkaError as e:
        log.warning("could not end the write %s its driver gave up on yet: %s", name, e)
        return
    registry.unregister(name)
    log.warning("ended the write %s its driver gave up on: %s", name, _said(settled))


def _end_all(admin: TransactionAdmin, decisions: DecisionLog, spec: KeeperSpec, registry: Registry, backoff_s: float = 1.0) -> None:
    """The driver is gone: end its writes as decided -- those holding a transaction, and those it
    had registered (closing them stops their late task attempts) -- trying again, with a growing
    pause, until each is ended or its transactions' time has passed (nothing is left to end then:
    their coordinators aborted whatever was open)."""
    from sparkkafka_sink.exactly_once.leases import HOLDING_STATES
    from sparkkafka_sink.exactly_once.settle import settle
    from sparkkafka_sink.producer.config import ProducerConfig

    started = time.time()
    # (the sink sets the tasks' transaction.timeout.ms: the write's spec carries it)
    horizon = started + ProducerConfig(spec.config).transaction_timeout_ms / 1000 + _AFTER_TIMEOUT_S
    pending: dict[Any, float] = {}
    while True:
        try:
            holding = admin.open_transactions(owned_prefix(spec.prefix, spec.owner),
                                              time.monotonic() + _END_TIMEOUT_S, HOLDING_STATES)
            break
        except KafkaError as e:
            if time.time() > horizon:
                log.error("the driver's JVM is gone, and its open writes could not be listed before their time "
                          "passed: %s", e)
                holding = []
                break
            log.warning("the driver's JVM is gone; listing its open writes failed (trying again): %s", e)
            time.sleep(backoff_s)
    for w in {w for t, _, _ in holding if (w := parse(t)) is not None}:
        pending[w] = horizon
    for name, entry in registry.entries().items():
        w = parse(name)
        if w is not None:
            pending[w] = max(pending.get(w, 0.0), float(entry.get("until", horizon)))
    if not pending:
        log.info("the driver's JVM is gone; it left no write open")
    pause = backoff_s
    while pending:
        for write in sorted(pending):
            try:
                log.warning("the driver's JVM is gone: %s",
                            _said(settle(admin, decisions, write, time.monotonic() + _END_TIMEOUT_S)))
            except KafkaError as e:
                if time.time() > pending[write]:
                    log.error("the driver's JVM is gone, and its write %s could not be ended before its transactions' "
                              "time passed (their coordinators aborted what was open): %s", write, e)
                else:
                    log.warning("the driver's JVM is gone; ending its write %s failed (trying again): %s", write, e)
                    continue
            registry.unregister(write.name)
            del pending[write]
        if pending:
            time.sleep(pause)
            pause = min(pause * 2, _MAX_PAUSE_S)


def _said(settled: Settled) -> str:
    how = "decided: committed as recorded" if settled.decided else "undecided: aborted"
    return (f"write {settled.write} {how} ({len(settled.committed)} committed, {len(settled.aborted)} aborted"
            + (f", {len(settled.lost)} lost to their coordinator's timeout" if settled.lost else "") + ")")


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    spec = KeeperSpec.from_json(sys.stdin.read())
    return keep(spec, Registry(spec.prefix, spec.owner))


if __name__ == "__main__":
    raise SystemExit(main())
