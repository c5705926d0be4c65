"""Apache Kafka itself, run from its Maven jars as plain Java processes on 127.0.0.1.

The reference broker of the test suite and the benchmarks.  ``resolve_kafka(version)`` asks
Maven (``dependency:copy-dependencies`` on the POM shipped beside this module) for
``org.apache.kafka:kafka_2.13`` and its dependencies, once, into a cache outside the repository
(``$SPARKKAFKA_CACHE_DIR`` or ``~/.cache/sparkkafka-sink``).  ``ApacheKafka(nodes=1)`` is one
combined KRaft controller+broker; ``ApacheKafka(nodes=3)`` three combined nodes forming a
3-voter quorum.  Lines before 3.3 (the first production KRaft) run in ZooKeeper mode instead:
brokers beside one standalone ZooKeeper from the same jars (``zookeeper.py``).  Lines before
3.9 log through log4j 1 (reload4j), the backend their own code calls and their releases
shipped; 3.9 and 4.x through log4j2.  Every node can be stopped cleanly, killed, paused and started again on the same
ports with its data (``cluster.nodes[i]``); the whole cluster and its files go at ``close()``.

CLI: ``python -m sparkkafka_sink.testing.apache_kafka [--nodes 3] [--version 3.9.2]`` runs a
cluster in the foreground and prints its bootstrap servers.
"""

from __future__ import annotations

import base64
import fcntl
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from sparkkafka_sink.testing.brokers import HOST, BrokerStartError, EmbeddedBroker, free_port, wait_for_kafka
from sparkkafka_sink.testing.local_process import Leftovers, file_tail, serve_in_foreground
from sparkkafka_sink.testing.zookeeper import LOG4J1_FILE, ZooKeeper

if TYPE_CHECKING:
    from sparkkafka_sink.testing.security.broker_security import BrokerSecurity

__all__ = ["ApacheKafka", "KafkaNode", "KAFKA_VERSION", "KAFKA_3_VERSION", "KAFKA_ZOOKEEPER_VERSION",
           "KAFKA_FIRST_KRAFT_VERSION", "resolve_kafka", "release",
           "java_and_maven_available", "cache_dir", "KafkaResolveError"]

log = logging.getLogger(__name__)

#: The newest 4.x that resolves from Maven Central with its dependencies (checked 2026-11-23).
KAFKA_VERSION = "4.4.0"
#: The newest 3.9.x served, for the 3.x compatibility pass (``pytest -m kafka3``).
KAFKA_3_VERSION = "3.9.2"
#: the oldest line tested, ZooKeeper mode (Amazon MSK and Confluent Platform clusters still run it)
KAFKA_ZOOKEEPER_VERSION = "2.8.2"
#: the first production-ready KRaft (KIP-833), for the old-broker tier
KAFKA_FIRST_KRAFT_VERSION = "3.3.2"
LOG4J_VERSION = "2.24.3"
#: log4j 1.2's maintained drop-in and its SLF4J 1.7 binding, for the lines before 3.9
RELOAD4J_VERSION = "1.2.25"
SLF4J_RELOAD4J_VERSION = "1.7.36"

_POM_TEMPLATE = Path(__file__).with_name("maven") / "kafka-broker.pom.xml"
_LOG4J1_POM_TEMPLATE = Path(__file__).with_name("maven") / "kafka-broker-log4j1.pom.xml"
#: -XX:-UsePerfData: a killed JVM leaves no /tmp/hsperfdata_<user>/<pid> file behind (the
#: failover tests kill nodes on purpose)
_JVM_OPTS = ("-Xmx512m", "-Xms256m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:-UsePerfData",
             "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true")


class KafkaResolveError(RuntimeError):
    """Maven could not resolve Apache Kafka's jars (the message carries Maven's output)."""


def java_and_maven_available() -> bool:
    return shutil.which("java") is not None and shutil.which("mvn") is not None


def cache_dir() -> Path:
    """Where resolved jars live, outside any repository (reused across runs and clones)."""
    env = os.environ.get("SPARKKAFKA_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "sparkkafka-sink"


def run_maven(args: list[str], timeout: float, error: type[Exception] = KafkaResolveError,
              cwd: Path | None = None) -> None:
    """``mvn -q -B <args>``; ``error`` carrying Maven's last lines when it fails."""
    cmd = ["mvn", "-q", "-B", *args]
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout, cwd=str(cwd) if cwd is not None else None)
    except FileNotFoundError as e:
        raise error("Maven (mvn) is not on PATH: it is needed to fetch the test servers' artifacts") from e
    except subprocess.TimeoutExpired as e:
        raise error(f"`{' '.join(cmd)}` did not finish within {timeout:.0f} s") from e
    if proc.returncode != 0:
        out = (proc.stdout + proc.stderr).strip().splitlines()
        raise error(f"`{' '.join(cmd)}` failed with exit code {proc.returncode}:\n" + "\n".join(out[-40:]))


def resolve_once(name: str, fill: Callable[[Path], None], result: str = "lib") -> Path:
    """``cache_dir()/name/result``, made once by ``fill(directory)`` and reused after.

    A lock file serialises concurrent runs; ``fill`` writes into a partial directory renamed
    when it returns, and a marker file is written last, so an interrupted resolve counts as
    missing and is redone rather than used.
    """
    base = cache_dir() / name
    done = base / result
    marker = base / "resolved"
    if marker.exists():
        return done
    base.mkdir(parents=True, exist_ok=True)
    with open(base / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():
            return done
        started = time.monotonic()
        tmp = base / f"{result}.partial"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        fill(tmp)
        shutil.rmtree(done, ignore_errors=True)
        tmp.rename(done)
        marker.write_text(time.strftime("%Y-%m-%dT%H:%M:%S\n"))
        log.info("resolved %s into %s in %.1f s", name, done, time.monotonic() - started)
    return done


def resolve_maven_artifacts(name: str, pom_text: str, timeout: float = 900.0) -> Path:
    """Resolve the dependencies of ``pom_text`` once into ``cache_dir()/name/lib`` and return it."""
    def fill(lib: Path) -> None:
        pom = lib.parent / "pom.xml"
        pom.write_text(pom_text)
        run_maven(["-f", str(pom), "dependency:copy-dependencies", f"-DoutputDirectory={lib}"], timeout)

    return resolve_once(name, fill)


def release(version: str) -> tuple[int, int]:
    """``(major, minor)`` of an Apache Kafka version ("2.8.2" -> (2, 8))."""
    try:
        major, minor = version.split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        raise ValueError(f"not an Apache Kafka version: {version!r} (expected e.g. 3.9.2)") from None


def logs_through_log4j1(version: str) -> bool:
    """Lines before 3.9 run with reload4j: their code calls log4j 1's API and their releases
    shipped it.  3.9 (which shipped reload4j too) has run here on the log4j2 bridge since it
    was added, and 4.0 moved to log4j2 (KIP-653)."""
    return release(version) < (3, 9)


def resolve_kafka(version: str = KAFKA_VERSION, timeout: float = 900.0) -> Path:
    """The directory of Apache Kafka ``version``'s jars (broker, Java client, logging backend;
    ZooKeeper for the lines that need it comes with the broker)."""
    if logs_through_log4j1(version):
        pom = (_LOG4J1_POM_TEMPLATE.read_text().replace("@KAFKA_VERSION@", version)
               .replace("@RELOAD4J_VERSION@", RELOAD4J_VERSION)
               .replace("@SLF4J_RELOAD4J_VERSION@", SLF4J_RELOAD4J_VERSION))
    else:
        pom = (_POM_TEMPLATE.read_text().replace("@KAFKA_VERSION@", version)
               .replace("@LOG4J_VERSION@", LOG4J_VERSION))
    return resolve_maven_artifacts(f"kafka-{version}", pom, timeout)


def kafka_uuid() -> str:
    """A Kafka ``Uuid`` in its text form (URL-safe base64 of 16 bytes, no padding).  Like Kafka's
    ``Uuid.randomUuid``, never one starting with "-": the storage tool would read it as an option."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


_LOG4J2 = """\
status = error
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""

#: the lines before 3.9: ZooKeeper's file appender, with the broker's own loggers
_LOG4J1 = LOG4J1_FILE + """\
log4j.logger.kafka=INFO
log4j.logger.state.change.logger=WARN
log4j.logger.kafka.request.logger=WARN
"""

#: Kafka's ACL authorizer of ZooKeeper mode (KRaft's StandardAuthorizer keeps ACLs in its metadata)
_ZOOKEEPER_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"


class KafkaNode(EmbeddedBroker):
    """One combined controller+broker JVM of an :class:`ApacheKafka` cluster.

    ``stop()`` is a clean shutdown (SIGTERM: controlled shutdown moves its leaderships away)
    that keeps the data; ``kill()`` is SIGKILL; ``pause()``/``resume()`` SIGSTOP/SIGCONT;
    ``start()`` brings it back on the same ports with the same data.
    """

    kind = "apache"
    term_grace = 60.0
    port: int  # chosen by the cluster before the node exists

    def __init__(self, cluster: ApacheKafka, node_id: int, port: int, controller_port: int,
                 extra_ports: dict[str, int] | None = None):
        self.cluster = cluster
        self.node_id = node_id
        self.controller_port = controller_port
        #: ``{listener name: port}`` of the extra (secured) listeners, kept across restarts
        self.extra_ports: dict[str, int] = dict(extra_ports or {})
        self.dir = cluster.base_dir / f"node-{node_id}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.dir / "data"
        self.server_log = self.dir / "server.log"
        super().__init__(port, startup_timeout=cluster.startup_timeout,
                         log_path=str(self.dir / "stdout.log"), keep_log=True)

    @property
    def properties_file(self) -> Path:
        return self.dir / "server.properties"

    def properties(self) -> dict[str, str]:
        c = self.cluster
        n = len(c.nodes)
        replicas = str(min(n, 3))
        if c.zookeeper_mode:
            assert c.zookeeper is not None, "ZooKeeper starts before the nodes' configuration is written"
            props = {"broker.id": str(self.node_id), "zookeeper.connect": c.zookeeper.connect,
                     "listeners": f"PLAINTEXT://{HOST}:{self.port}",
                     "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT"}
        else:
            props = {
                "process.roles": "broker,controller",
                "node.id": str(self.node_id),
                "controller.quorum.voters": ",".join(
                    f"{node.node_id}@{HOST}:{node.controller_port}" for node in c.nodes),
                "listeners": f"PLAINTEXT://{HOST}:{self.port},CONTROLLER://{HOST}:{self.controller_port}",
                "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            }
        props.update({
            "advertised.listeners": f"PLAINTEXT://{HOST}:{self.port}",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": "1",
            "default.replication.factor": replicas,
            "offsets.topic.replication.factor": replicas,
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": "2" if n >= 3 else "1",
            "transaction.state.log.num.partitions": "4",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "true",
            # fewer threads than the defaults (3 network, 8 I/O): three JVMs share two cores
            "num.network.threads": "2",
            "num.io.threads": "4",
            "num.replica.fetchers": "1",
            "log.segment.bytes": str(64 * 1024 * 1024),
        })
        if c.security is not None:
            protocols = c.security.protocols
            props["listeners"] += "".join(f",{name}://{HOST}:{self.extra_ports[name]}"
                                          for name in protocols)
            props["advertised.listeners"] += "".join(
                f",{name}://{c.security.advertised_host(name)}:{self.extra_ports[name]}" for name in protocols)
            props["listener.security.protocol.map"] += "".join(
                f",{name}:{proto}" for name, proto in protocols.items())
            props.update(c.security.broker_properties())
            if c.zookeeper_mode and "authorizer.class.name" in props:
                props["authorizer.class.name"] = _ZOOKEEPER_AUTHORIZER
        props.update({k: str(v) for k, v in c.broker_config.items()})
        return props

    def write_config(self) -> None:
        text = "".join(f"{k}={v}\n" for k, v in self.properties().items())
        self.properties_file.write_text(text)
        if self.cluster.log4j1:
            (self.dir / "log4j.properties").write_text(_LOG4J1.format(log=self.server_log))
        else:
            (self.dir / "log4j2.properties").write_text(_LOG4J2.format(log=self.server_log))

    def format_command(self, cluster_id: str) -> list[str]:
        extra = self.cluster.security.format_args() if self.cluster.security is not None else []
        for name, level in self.cluster.features.items():
            extra += ["--feature", f"{name}={level}"]
        return [self.cluster.java, *self._log_opts(), "-cp", self.cluster.classpath,
                "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(self.properties_file),
                *extra]

    def _log_opts(self) -> list[str]:
        if self.cluster.log4j1:
            return [f"-Dlog4j.configuration=file:{self.dir / 'log4j.properties'}", f"-Dkafka.logs.dir={self.dir}"]
        cfg = self.dir / "log4j2.properties"
        return [f"-Dlog4j2.configurationFile={cfg}", f"-Dlog4j.configurationFile={cfg}",
                f"-Dkafka.logs.dir={self.dir}"]

    def _command(self) -> list[str]:
        # the JVM's temporary files (lz4's and snappy's native libraries it unpacks) in the node's
        # own directory, removed with the cluster: none left in the system's temp directory
        tmp = self.dir / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        return [self.cluster.java, *_JVM_OPTS, *self.cluster.jvm_options, f"-Djava.io.tmpdir={tmp}", *self._log_opts(), "-cp",
                self.cluster.classpath, "kafka.Kafka", str(self.properties_file)]

    def _cwd(self) -> str:
        return str(self.dir)

    def stop(self, timeout: float | None = None) -> None:
        """Clean shutdown (SIGTERM, SIGKILL after ``timeout``); data and ports are kept."""
        self._terminate(timeout=self.term_grace if timeout is None else timeout)

    def restart(self, timeout: float | None = None) -> KafkaNode:
        self.stop(timeout)
        return self.start()

    def spawn(self) -> None:
        """Start the JVM without waiting (a quorum member cannot serve until a majority runs)."""
        self._spawn()

    def log_tail(self, lines: int = 40) -> str:
        stdout = super().log_tail(10)
        return f"{file_tail(self.server_log, lines, name='server.log')}\n--- stdout ---\n{stdout}"

    def _after_stop(self, keep_data: bool) -> None:
        pass  # the cluster owns the files (ApacheKafka.close())

    def _drop_log(self) -> None:
        pass


_clusters: Leftovers[ApacheKafka] = Leftovers(lambda cluster: cluster.close())


class ApacheKafka:
    """An Apache Kafka cluster of ``nodes`` JVMs: combined KRaft controller+brokers, or (``zookeeper``;
    by default for the lines before 3.3) brokers beside one standalone ZooKeeper.

    ``broker_config`` adds or overrides ``server.properties`` keys for every node (e.g.
    ``{"producer.id.expiration.ms": 2000}``).  Topics default to replication factor
    ``min(nodes, 3)``.  Use as a context manager, or ``start()`` / ``close()``.

    ``security`` (a :class:`sparkkafka_sink.testing.security.BrokerSecurity`) adds secured
    listeners beside PLAINTEXT (which stays the inter-broker listener and the one
    ``wait_for_brokers`` uses): one more port per listener per node, its server properties, and
    its storage format arguments (SCRAM users); ``bootstrap(listener_name)`` addresses them.
    ``features`` formats the storage with those feature levels (``{"transaction.version": 1}``:
    a Kafka 4 cluster with transactions v1 only).  ``classpath``: jars or class directories the
    brokers load beside Kafka's (a test's SASL callback handler or security provider);
    ``jvm_options``: more options of their JVMs (a Kerberos test's krb5.conf).

    ZooKeeper mode: SCRAM users are written to ZooKeeper (``kafka.admin.ConfigCommand
    --zookeeper``) before the brokers start, and ``security.authorizer`` is Kafka's
    ``AclAuthorizer``.  KRaft before 3.5 cannot hold SCRAM users (KIP-900 arrived in 3.5): a
    ``security`` with SCRAM users is refused there.
    """

    kind = "apache"

    def __init__(self, nodes: int = 1, *, version: str = KAFKA_VERSION,
                 broker_config: dict[str, object] | None = None, startup_timeout: float = 120.0,
                 base_dir: str | None = None, keep_files: bool | None = None,
                 security: BrokerSecurity | None = None, features: dict[str, int] | None = None,
                 zookeeper: bool | None = None, classpath: Sequence[str | Path] = (),
                 jvm_options: Sequence[str] = ()):
        if nodes < 1:
            raise ValueError(f"nodes must be at least 1, got {nodes}")
        line = release(version)
        #: ZooKeeper mode: before 3.3 KRaft was early access (no transactions, no SCRAM)
        self.zookeeper_mode = line < (3, 3) if zookeeper is None else zookeeper
        if self.zookeeper_mode and line >= (4, 0):
            raise ValueError(f"Apache Kafka {version} runs in KRaft mode only (ZooKeeper mode ended with 3.9)")
        if not self.zookeeper_mode and line < (2, 8):
            raise ValueError(f"Apache Kafka {version} has no KRaft mode (it arrived, early access, in 2.8)")
        if not self.zookeeper_mode and line < (3, 5) and security is not None and security.format_args():
            raise ValueError(f"Apache Kafka {version} in KRaft mode cannot hold SCRAM users (KRaft stores "
                             "them from 3.5 on, KIP-900): give its BrokerSecurity scram_users={}, or run it "
                             "in ZooKeeper mode")
        self.version = version
        #: logs through log4j 1 (reload4j) rather than log4j2
        self.log4j1 = logs_through_log4j1(version)
        self.zookeeper: ZooKeeper | None = None
        self.broker_config = dict(broker_config or {})
        #: jars or class directories the brokers load beside Kafka's own (a test's callback handler)
        self.extra_classpath = [str(c) for c in classpath]
        #: more options of the brokers' JVMs (``-Djava.security.krb5.conf=...``)
        self.jvm_options = list(jvm_options)
        self.security = security
        #: feature levels the storage is formatted with (``{"transaction.version": 1}``)
        self.features = dict(features or {})
        self.startup_timeout = startup_timeout
        self._own_dir = base_dir is None
        self.base_dir = Path(base_dir or tempfile.mkdtemp(prefix=f"apache-kafka-{version}-"))
        if keep_files is None:
            keep_files = bool(os.environ.get("SPARKKAFKA_KEEP_BROKER_LOGS"))
        self.keep_files = keep_files
        self.java = shutil.which("java") or "java"
        self.lib: Path | None = None
        self.cluster_id = kafka_uuid()
        self.startup_seconds: float | None = None
        self.nodes: list[KafkaNode] = []
        self._requested_nodes = nodes
        self._closed = False

    # -- identity -----------------------------------------------------------------------------
    @property
    def classpath(self) -> str:
        """The brokers' ``-cp``: Kafka's jars, then ``classpath``."""
        return os.pathsep.join([f"{self.lib}/*", *self.extra_classpath])

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(n.bootstrap_servers for n in self.nodes)

    @property
    def listener_names(self) -> list[str]:
        """"PLAINTEXT" and the names of the extra listeners of ``security``."""
        return ["PLAINTEXT", *(self.security.protocols if self.security is not None else ())]

    def bootstrap(self, listener: str = "PLAINTEXT", host: str = HOST) -> str:
        """``"host:port,..."`` of every node's ``listener`` ("PLAINTEXT" or an extra listener
        of ``security``); ``host`` may be "localhost" (brokers still advertise 127.0.0.1)."""
        if not self.nodes:
            raise RuntimeError("the cluster has not been started")
        if listener == "PLAINTEXT":
            return ",".join(f"{host}:{n.port}" for n in self.nodes)
        if listener not in self.nodes[0].extra_ports:
            raise KeyError(f"no listener {listener!r}; listeners: {self.listener_names}")
        return ",".join(f"{host}:{n.extra_ports[listener]}" for n in self.nodes)

    def node(self, node_id: int) -> KafkaNode:
        for n in self.nodes:
            if n.node_id == node_id:
                return n
        raise KeyError(f"no node {node_id} in {self!r}")

    def __repr__(self) -> str:
        states = ", ".join(f"{n.node_id}:{'paused' if n.paused else 'up' if n.running else 'down'}"
                           for n in self.nodes)
        return f"<ApacheKafka {self.version} [{states}] {self.base_dir}>"

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> ApacheKafka:
        """Resolve the jars (first run only), format KRaft storage and start every node."""
        started = time.monotonic()
        self.lib = resolve_kafka(self.version)
        _clusters.add(self)
        try:
            if not self.nodes:
                free: set[int] = set()
                while len(free) < 2 * self._requested_nodes:
                    free.add(free_port(HOST))
                ports = sorted(free)
                self.nodes = [KafkaNode(self, i + 1, ports[2 * i], ports[2 * i + 1])
                              for i in range(self._requested_nodes)]
                if self.security is not None:
                    taken = set(ports)
                    for n in self.nodes:
                        for name in self.security.protocols:
                            port = free_port(HOST)
                            while port in taken:
                                port = free_port(HOST)
                            taken.add(port)
                            n.extra_ports[name] = port
                if self.zookeeper_mode:
                    self._start_zookeeper()
                for n in self.nodes:
                    n.write_config()
                if self.zookeeper_mode:
                    self._add_scram_users_to_zookeeper()
                else:
                    self._format()
            for n in self.nodes:
                if not n.running:
                    n.spawn()
            for n in self.nodes:
                wait_for_kafka(HOST, n.port, self.startup_timeout, n._proc, n.log_tail)
                n._started_once = True
            self.wait_for_brokers(len(self.nodes), timeout=self.startup_timeout)
            if self.security is not None:
                self._wait_for_extra_listeners(self.startup_timeout)
        except BaseException:
            self.close()
            raise
        self.startup_seconds = time.monotonic() - started
        log.info("Apache Kafka %s: %d node(s) on %s up in %.1f s", self.version, len(self.nodes),
                 self.bootstrap_servers, self.startup_seconds)
        return self

    def _wait_for_extra_listeners(self, timeout: float) -> None:
        """Wait until every node accepts TCP connections on its extra listeners."""
        deadline = time.monotonic() + timeout
        for n in self.nodes:
            for name, port in n.extra_ports.items():
                while True:
                    try:
                        socket.create_connection((HOST, port), timeout=1).close()
                        break
                    except OSError as e:
                        if time.monotonic() > deadline:
                            raise BrokerStartError(f"node {n.node_id} does not accept connections on "
                                                   f"listener {name} ({HOST}:{port}): {e}\n"
                                                   f"{n.log_tail(20)}") from e
                        time.sleep(0.1)

    def _start_zookeeper(self) -> None:
        assert self.lib is not None
        self.zookeeper = ZooKeeper(self.java, self.lib, self.base_dir / "zookeeper", list(_JVM_OPTS))
        self.zookeeper.start(self.startup_timeout)

    def _add_scram_users_to_zookeeper(self) -> None:
        """ZooKeeper mode's ``--add-scram``: each user's credentials written by Kafka's
        ConfigCommand, before any broker starts (the brokers read them at start-up)."""
        if self.security is None or not self.security.format_args():
            return
        assert self.zookeeper is not None
        connect = self.zookeeper.connect
        users: dict[str, list[str]] = {}
        for mech, passwords in self.security.scram_users.items():
            for user, password in passwords.items():
                iterations = self.security.scram_iterations.get((mech, user))
                it = f"iterations={iterations}," if iterations else ""
                users.setdefault(user, []).append(f"{mech}=[{it}password={password}]")
        log4j = self.zookeeper.dir / "log4j.properties"  # the tool logs into zookeeper.log too

        def run(user: str) -> None:
            command = [self.java, f"-Dlog4j.configuration=file:{log4j}", "-cp", f"{self.lib}/*",
                       "kafka.admin.ConfigCommand", "--zookeeper", connect, "--alter",
                       "--entity-type", "users", "--entity-name", user, "--add-config", ",".join(users[user])]
            proc = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  cwd=str(self.base_dir), timeout=120)
            if proc.returncode != 0:
                raise BrokerStartError(f"adding SCRAM user {user!r} to ZooKeeper failed (exit {proc.returncode}):\n"
                                       + (proc.stdout + proc.stderr)[-4000:])

        with ThreadPoolExecutor(max_workers=len(users)) as pool:
            for f in [pool.submit(run, user) for user in users]:
                f.result()

    def _format(self) -> None:
        def run(node: KafkaNode) -> None:
            proc = subprocess.run(node.format_command(self.cluster_id), stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, cwd=str(node.dir), timeout=180)
            if proc.returncode != 0:
                raise BrokerStartError(
                    f"formatting KRaft storage of node {node.node_id} failed (exit {proc.returncode}):\n"
                    + (proc.stdout + proc.stderr)[-4000:])

        with ThreadPoolExecutor(max_workers=len(self.nodes)) as pool:
            for f in [pool.submit(run, n) for n in self.nodes]:
                f.result()

    def wait_for_brokers(self, count: int, timeout: float = 60.0) -> None:
        """Wait until Metadata lists ``count`` live brokers (registered and unfenced)."""
        from sparkkafka_sink.testing.brokers import _confluent

        _, admin = _confluent()
        running = [n for n in self.nodes if n.running and not n.paused]
        client = admin.AdminClient({"bootstrap.servers": ",".join(n.bootstrap_servers for n in running)})
        deadline = time.monotonic() + timeout
        seen: int | str = -1  # brokers listed, or why none could be
        while True:
            try:
                seen = len(client.list_topics(timeout=5).brokers)
                if seen >= count:
                    return
            except Exception as e:  # noqa: BLE001 - keep polling until the deadline
                seen = f"error {e}"
            if time.monotonic() > deadline:
                tails = "\n".join(f"--- node {n.node_id} ---\n{n.log_tail(20)}" for n in self.nodes)
                raise BrokerStartError(f"{count} brokers not live within {timeout:.0f} s "
                                       f"(metadata shows {seen})\n{tails}")
            time.sleep(0.1)

    def ensure_all_up(self, timeout: float = 120.0) -> None:
        """Undo what a test did to a shared cluster: resume paused nodes, start stopped ones,
        and wait until every broker is live again."""
        changed = False
        for node in self.nodes:
            if node.paused:
                node.resume()
                changed = True
        for node in self.nodes:
            if not node.running:
                log.warning("starting %s again: it was left down", node.name)
                node.spawn()
                changed = True
        if changed:
            for node in self.nodes:
                wait_for_kafka(HOST, node.port, timeout, node._proc, node.log_tail)
            self.wait_for_brokers(len(self.nodes), timeout=timeout)

    def close(self) -> None:
        """Kill every node (data is thrown away anyway) and remove the cluster's files."""
        for n in self.nodes:
            try:
                n._terminate(kill_only=True)
            except Exception:  # noqa: BLE001 - cleanup is best effort
                pass
            n._forget()
        if self.zookeeper is not None:
            self.zookeeper.kill()
        _clusters.discard(self)
        if self._own_dir and not self.keep_files:
            shutil.rmtree(self.base_dir, ignore_errors=True)
        self._closed = True

    def __enter__(self) -> ApacheKafka:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def main(argv: Iterable[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m sparkkafka_sink.testing.apache_kafka",
                                description="Run Apache Kafka (KRaft; ZooKeeper mode before 3.3; from Maven jars) "
                                            "in the foreground.")
    p.add_argument("--nodes", type=int, default=1)
    p.add_argument("--version", default=KAFKA_VERSION)
    p.add_argument("--resolve-only", action="store_true", help="download the jars and exit")
    args = p.parse_args(list(argv) if argv is not None else None)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.resolve_only:
        print(resolve_kafka(args.version))
        return 0
    cluster = ApacheKafka(args.nodes, version=args.version).start()

    def exited() -> str | None:
        down = [n.log_tail() for n in cluster.nodes if not n.running]
        return "# a node exited:\n" + "\n".join(down) if down else None

    return serve_in_foreground(
        cluster.bootstrap_servers, f"# Apache Kafka {cluster.version}, files in {cluster.base_dir}; Ctrl-C stops it",
        exited, cluster.close)


if __name__ == "__main__":
    sys.exit(main())
