"""A real Schema Registry for tests: Apicurio Registry, run from its Maven Central distribution
as a plain Java process on 127.0.0.1, speaking Confluent's REST API under ``/apis/ccompat/v7``.

Confluent's own registry is not on Maven Central; Apicurio's runnable distribution is
(``io.apicurio:apicurio-registry-app:<version>:tar.gz:all``, 142 MB).  ``resolve_registry()``
fetches it with Maven once and unpacks it into a cache outside the repository
(``$SPARKKAFKA_CACHE_DIR`` or ``~/.cache/sparkkafka-sink``, as Apache Kafka's jars).
``SchemaRegistry()`` starts one (in-memory storage: every start is empty) on a free port, its
log and temporary files in its own directory, and stops it by its PID; with ``tls`` it serves
HTTPS too, from PEM files.  How Apicurio differs
from Confluent's registry: its default compatibility level is NONE (Confluent: BACKWARD), a
JSON schema must look like one (``{"type": "object"}`` alone is refused as of unknown type;
with ``$schema`` or ``properties`` it is taken), a lookup's answer leaves ``schemaType`` out,
and authentication needs an OpenID Connect server (its HTTP basic authentication is an OAuth
client-credentials exchange with Keycloak), so this one runs without.

CLI: ``python -m sparkkafka_sink.testing.schema_registry`` runs one in the foreground and
prints its URL; ``--resolve-only`` fetches the distribution and exits.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path

from sparkkafka_sink.testing.apache_kafka import java_and_maven_available, resolve_once, run_maven
from sparkkafka_sink.testing.brokers import HOST, free_port
from sparkkafka_sink.testing.local_process import Leftovers, file_tail, serve_in_foreground, spawn_logged, terminate

__all__ = ["SchemaRegistry", "APICURIO_VERSION", "resolve_registry", "registry_unavailable_reason",
           "skip_unless_available", "RegistryResolveError", "RegistryStartError"]

log = logging.getLogger(__name__)

#: the newest 2.x on Maven Central (checked 2026-11-27); 3.x needs Java 21
APICURIO_VERSION = "2.6.13.Final"
#: Confluent's API as Apicurio serves it
API_PATH = "/apis/ccompat/v7"
_JVM_OPTS = ("-Xmx512m", "-XX:-UsePerfData", "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true")


class RegistryResolveError(RuntimeError):
    """Maven could not fetch Apicurio Registry, or the archive is not what we expect."""


class RegistryStartError(RuntimeError):
    """The registry did not answer in time or exited (the message carries its log tail)."""


def registry_unavailable_reason() -> str | None:
    """Why no registry can be started here (None: it can)."""
    if not java_and_maven_available():
        missing = " and ".join(tool for tool in ("java", "mvn") if shutil.which(tool) is None)
        return (f"the Apicurio Schema Registry needs java (17+) and mvn on PATH ({missing} missing): it "
                "runs from its Maven Central distribution")
    return None


def skip_unless_available() -> None:
    """In a pytest test or fixture: skip it, saying why, when no registry can be started."""
    reason = registry_unavailable_reason()
    if reason is not None:
        import pytest

        pytest.skip(reason)


def resolve_registry(version: str = APICURIO_VERSION, timeout: float = 900.0) -> Path:
    """The runner jar of Apicurio Registry ``version``, fetched and unpacked once."""
    artifact = f"io.apicurio:apicurio-registry-app:{version}:tar.gz:all"

    def fill(dist: Path) -> None:
        download = dist.parent / "download"
        shutil.rmtree(download, ignore_errors=True)
        download.mkdir()
        # copy, then tar: the plugin's unpack goal leaves a stray ${project.basedir} folder behind
        run_maven(["org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy", f"-Dartifact={artifact}",
                   f"-DoutputDirectory={download}"], timeout, RegistryResolveError, cwd=download)
        archives = list(download.glob("*.tar.gz"))
        if len(archives) != 1:
            raise RegistryResolveError(f"Maven fetched {[a.name for a in download.iterdir()]} for {artifact}, "
                                       "not one .tar.gz")
        proc = subprocess.run(["tar", "xzf", str(archives[0]), "-C", str(dist)], stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise RegistryResolveError(f"tar xzf {archives[0]} failed: {proc.stderr.strip()[-2000:]}")
        shutil.rmtree(download, ignore_errors=True)  # Maven's local repository keeps a copy
        _runner_jar(dist, version)

    return _runner_jar(resolve_once(f"apicurio-registry-{version}", fill, result="dist"), version)


def _runner_jar(dist: Path, version: str) -> Path:
    jar = dist / f"apicurio-registry-app-{version}-runner.jar"
    if not jar.is_file():
        found = sorted(p.name for p in dist.glob("*.jar"))
        raise RegistryResolveError(f"no {jar.name} in {dist} (jars there: {found})")
    return jar


_running: Leftovers[SchemaRegistry] = Leftovers(lambda registry: registry.stop())


class SchemaRegistry:
    """Apicurio Registry on ``127.0.0.1:<port>``; ``url`` is its Confluent-compatible API.

    ``base_dir`` holds its log (``registry.log``) and temporary files (default: a new temporary
    directory, removed at ``stop()`` unless ``keep_files`` or ``$SPARKKAFKA_KEEP_BROKER_LOGS``).
    ``port`` None: a free one.  ``tls=(certificate_chain_pem, key_pem)`` serves HTTPS too, on a
    port of its own (``https_url``; e.g. ``pki.broker.chain_path, pki.broker.key_path`` of the
    throw-away PKI, SAN 127.0.0.1).  Use as a context manager, or ``start()`` / ``stop()``.
    """

    def __init__(self, *, version: str = APICURIO_VERSION, port: int | None = None,
                 base_dir: os.PathLike | None = None, keep_files: bool | None = None,
                 tls: tuple[os.PathLike, os.PathLike] | None = None, startup_timeout: float = 120.0,
                 java_options: Iterable[str] = ()):
        self.version = version
        self.port = port
        self._fixed_port = port is not None
        self._own_dir = base_dir is None
        self.base_dir = Path(base_dir) if base_dir is not None else Path(tempfile.mkdtemp(prefix="apicurio-registry-"))
        if keep_files is None:
            keep_files = bool(os.environ.get("SPARKKAFKA_KEEP_BROKER_LOGS"))
        self.keep_files = keep_files
        self.tls = (Path(tls[0]), Path(tls[1])) if tls is not None else None
        self.tls_port: int | None = None
        self.startup_timeout = startup_timeout
        self.java_options = tuple(java_options)
        self.log_path = self.base_dir / "registry.log"
        self.startup_seconds: float | None = None
        self._proc: subprocess.Popen | None = None

    # -- identity -------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT/apis/ccompat/v7``: give it as the client's ``url``."""
        if self.port is None:
            raise RuntimeError("the registry has not been started")
        return f"http://{HOST}:{self.port}{API_PATH}"

    @property
    def https_url(self) -> str:
        """``https://127.0.0.1:TLS_PORT/apis/ccompat/v7`` (started with ``tls``)."""
        if self.tls is None or self.tls_port is None:
            raise RuntimeError("the registry serves HTTPS only when started with tls=(certificate, key)")
        return f"https://{HOST}:{self.tls_port}{API_PATH}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<SchemaRegistry Apicurio {self.version} port={self.port} pid={self.pid} {state}>"

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> SchemaRegistry:
        """Fetch the distribution (first run only), start the JVM and wait until it answers."""
        if self.running:
            return self
        started = time.monotonic()
        jar = resolve_registry(self.version)
        attempts = 1 if self._fixed_port else 3                    # a lost race for a free port
        for attempt in range(attempts):
            if not self._fixed_port:
                self.port = free_port(HOST)
            if self.tls is not None:
                self.tls_port = free_port(HOST)
                while self.tls_port == self.port:
                    self.tls_port = free_port(HOST)
            self._spawn(jar)
            try:
                self._wait_ready(time.monotonic() + self.startup_timeout)
                break
            except RegistryStartError:
                address_taken = "Address already in use" in self.log_tail(200)
                self._kill()
                if attempt == attempts - 1 or not address_taken:
                    if self._own_dir and not self.keep_files:
                        self._forget_files()
                    raise
        self.startup_seconds = time.monotonic() - started
        log.info("Apicurio Registry %s on %s up in %.1f s", self.version, self.url, self.startup_seconds)
        return self

    def _command(self, jar: Path) -> list[str]:
        tmp = self.base_dir / "tmp"
        tls = []
        if self.tls is not None:                           # Quarkus reads PEM files as they are
            tls = [f"-Dquarkus.http.ssl-port={self.tls_port}",
                   f"-Dquarkus.http.ssl.certificate.files={self.tls[0]}",
                   f"-Dquarkus.http.ssl.certificate.key-files={self.tls[1]}"]
        return [shutil.which("java") or "java", *_JVM_OPTS, f"-Djava.io.tmpdir={tmp}",
                f"-Dquarkus.http.host={HOST}", f"-Dquarkus.http.port={self.port}", *tls,
                *self.java_options, "-jar", str(jar)]

    def _spawn(self, jar: Path) -> None:
        (self.base_dir / "tmp").mkdir(parents=True, exist_ok=True)
        self._proc = spawn_logged(self._command(jar), self.log_path, self.base_dir)
        _running.add(self)

    def _wait_ready(self, deadline: float) -> None:
        """Poll ``GET /subjects`` until it answers 200; fail fast when the JVM exits."""
        probe = f"{self.url}/subjects"
        last: object = None
        while True:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise RegistryStartError(f"Apicurio Registry exited with code {self._proc.returncode} before "
                                         f"answering on {probe}\n--- {self.log_path} ---\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(probe, timeout=1.0) as response:
                    if response.status == 200:
                        return
                    last = f"HTTP {response.status}"
            except (urllib.error.URLError, OSError) as e:
                last = e
            if time.monotonic() >= deadline:
                raise RegistryStartError(f"Apicurio Registry did not answer {probe} within "
                                         f"{self.startup_timeout:.0f} s (last: {last})\n--- {self.log_path} ---\n"
                                         f"{self.log_tail()}")
            time.sleep(0.1)

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM its PID (SIGKILL after ``timeout``) and remove its files (unless kept)."""
        self._kill(timeout)
        if self._own_dir and not self.keep_files:
            self._forget_files()

    def _kill(self, timeout: float = 0.0) -> None:
        proc, self._proc = self._proc, None
        _running.discard(self)
        if proc is not None:
            terminate(proc, timeout if timeout > 0 else None)

    def _forget_files(self) -> None:
        shutil.rmtree(self.base_dir, ignore_errors=True)

    def log_tail(self, lines: int = 40) -> str:
        return file_tail(self.log_path, lines)

    def __enter__(self) -> SchemaRegistry:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: Iterable[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m sparkkafka_sink.testing.schema_registry",
                                description="Run Apicurio Registry (Confluent's API) in the foreground.")
    p.add_argument("--version", default=APICURIO_VERSION)
    p.add_argument("--port", type=int, default=None)
    p.add_argument("--resolve-only", action="store_true", help="download and unpack it, then exit")
    args = p.parse_args(list(argv) if argv is not None else None)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.resolve_only:
        print(resolve_registry(args.version))
        return 0
    registry = SchemaRegistry(version=args.version, port=args.port).start()
    return serve_in_foreground(
        registry.url,
        f"# Apicurio Registry {registry.version} (pid {registry.pid}), log {registry.log_path}; Ctrl-C stops it",
        lambda: None if registry.running else f"# the registry exited:\n{registry.log_tail()}", registry.stop)


if __name__ == "__main__":
    sys.exit(main())
