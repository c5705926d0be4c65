"""A standalone ZooKeeper for an Apache Kafka cluster in ZooKeeper mode (the 2.x line).

No download of its own: ``kafka_2.13`` of those lines depends on ``org.apache.zookeeper:zookeeper``,
so the broker's resolved jars hold ``ZooKeeperServerMain`` (what Kafka's
``zookeeper-server-start.sh`` runs, standalone), and it logs through the broker's log4j 1
backend into ``zookeeper.log`` beside its data.  Bound to 127.0.0.1, stopped by its PID.
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

from sparkkafka_sink.testing.brokers import HOST, BrokerStartError, free_port
from sparkkafka_sink.testing.local_process import file_tail, spawn_logged, terminate

__all__ = ["ZooKeeper"]

#: the log4j 1 configuration ZooKeeper (and Kafka's tools run against it) log with
LOG4J1_FILE = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


def ruok(port: int, timeout: float = 1.0) -> bool:
    """ZooKeeper's "ruok" four-letter word answered "imok" (it serves)."""
    try:
        with socket.create_connection((HOST, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(b"ruok")
            return sock.recv(4) == b"imok"
    except OSError:
        return False


class ZooKeeper:
    """One standalone ZooKeeper server on 127.0.0.1 from the jars in ``lib``; files under ``directory``."""

    def __init__(self, java: str, lib: Path, directory: Path, jvm_opts: list[str]):
        self.java, self.lib, self.dir, self.jvm_opts = java, lib, directory, jvm_opts
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port(HOST)
        self.log = self.dir / "zookeeper.log"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def connect(self) -> str:
        """The brokers' ``zookeeper.connect``."""
        return f"{HOST}:{self.port}"

    def start(self, timeout: float) -> None:
        config = self.dir / "zookeeper.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in {
            "dataDir": self.dir / "data", "clientPort": self.port, "clientPortAddress": HOST,
            "maxClientCnxns": 0, "admin.enableServer": "false", "4lw.commands.whitelist": "ruok",
            "tickTime": 500}.items()))
        log4j = self.dir / "log4j.properties"
        log4j.write_text(LOG4J1_FILE.format(log=self.log))
        command = [self.java, *self.jvm_opts, f"-Dlog4j.configuration=file:{log4j}", "-cp", f"{self.lib}/*",
                   "org.apache.zookeeper.server.ZooKeeperServerMain", str(config)]
        self._proc = spawn_logged(command, self.dir / "stdout.log", self.dir)
        deadline = time.monotonic() + timeout
        while not ruok(self.port):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                state = f"exited with code {self._proc.returncode}" if self._proc.poll() is not None else "no answer"
                raise BrokerStartError(f"ZooKeeper on {self.connect} did not start ({state}):\n"
                                       f"{self.log_tail()}")
            time.sleep(0.1)

    def log_tail(self, lines: int = 20) -> str:
        return (f"{file_tail(self.log, lines, name='zookeeper.log')}\n--- stdout ---\n"
                f"{file_tail(self.dir / 'stdout.log', 10)}")

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def kill(self) -> None:
        if self._proc is not None:
            terminate(self._proc, None)
