"""Deployment fixtures: the project packed as a virtualenv for ``--archives`` (``packed_env``) and
a Spark standalone cluster whose worker's own Python does not have the package
(``standalone_cluster``).

``packed_env`` runs the commands of docs/deployment.md ("The tested recipe"): the project's
wheel, a fresh venv with the wheel installed, ``venv-pack`` of it.  It is cached under
``~/.cache/sparkkafka-sink/packed-env/<key>`` (``$SPARKKAFKA_CACHE_DIR``), the key being the
wheel's hash (built reproducibly: ``SOURCE_DATE_EPOCH``) and the interpreter the venv links to,
so only a change to the package builds it again; the two most recently used are kept.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sparkkafka_sink.testing.apache_kafka import cache_dir
from sparkkafka_sink.testing.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
PROBE_CODE = Path(__file__).with_name("executor_probe")
#: reproducible wheels: every zip entry gets this time (1980-01-01, the zip format's first day)
SOURCE_DATE_EPOCH = "315532800"
#: packed environments kept in the cache (each ~0.4 GB: the venv and its archive)
KEEP = 2


@dataclass(frozen=True)
class PackedEnv:
    venv: Path  # the venv itself: the driver's Python (linked as ./env where spark-submit runs)
    archive: Path  # venv-pack's env.tar.gz, for --archives env.tar.gz#env
    wheel_sha256: str


def _run(cmd: list[str], **kwargs) -> None:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kwargs)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({out.returncode}):\n{out.stdout[-3000:]}"
                           f"\n{out.stderr[-3000:]}")


def _build_wheel(work: Path) -> Path:
    """``pip wheel --no-deps`` of a copy of the project (the checkout stays free of build/)."""
    src, out = work / "src", work / "dist"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (REPO / name).exists():
            shutil.copy2(REPO / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for pkg in ("sparkkafka_sink", "pyspark_pyprod_kafka"):
        shutil.copytree(REPO / pkg, src / pkg, ignore=ignore)
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "--no-deps",
          "-w", str(out), str(src)], env=dict(os.environ, SOURCE_DATE_EPOCH=SOURCE_DATE_EPOCH))
    (wheel,) = out.glob("*.whl")
    return wheel


def _env_key(wheel_sha256: str) -> str:
    """The wheel and the interpreter the venv's python links to (venv-pack does not copy it)."""
    base = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    interpreter = hashlib.sha256(base.encode()).hexdigest()[:8]
    return f"{wheel_sha256[:16]}-py{sys.version_info[0]}{sys.version_info[1]}-{interpreter}"


def _build_env(entry: Path, wheel: Path, venv_pack: Path) -> None:
    """docs/deployment.md's commands, in ``entry``."""
    entry.mkdir(parents=True)
    env = entry / "env"
    _run([sys.executable, "-m", "venv", str(env)])
    _run([str(env / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", str(wheel)])
    _run([str(venv_pack), "-p", str(env), "-o", str(entry / "env.tar.gz"), "-q"])


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One builder at a time (two test processes, two checkouts) per cache directory."""
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _prune(root: Path) -> None:
    """Keep the KEEP environments used last (their ``complete`` marker is touched on use)."""
    done = sorted((d for d in root.iterdir() if (d / "complete").exists()),
                  key=lambda d: (d / "complete").stat().st_mtime, reverse=True)
    unfinished = [d for d in root.iterdir() if d.is_dir() and not (d / "complete").exists()]
    for stale in done[KEEP:] + unfinished:
        shutil.rmtree(stale, ignore_errors=True)


@pytest.fixture(scope="session")
def packed_env(tmp_path_factory) -> PackedEnv:
    venv_pack = Path(sys.executable).with_name("venv-pack")
    if not venv_pack.exists():
        pytest.skip("venv-pack is not installed here: pip install -e '.[test]' (the test extra has it)")
    started = time.monotonic()
    wheel = _build_wheel(tmp_path_factory.mktemp("wheel"))
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    root = cache_dir() / "packed-env"
    root.mkdir(parents=True, exist_ok=True)
    entry = root / _env_key(sha)
    with _locked(root / ".lock"):
        built = not (entry / "complete").exists()
        if built:
            shutil.rmtree(entry, ignore_errors=True)
            _build_env(entry, wheel, venv_pack)
            (entry / "complete").write_text(f"{wheel.name} {sha}\n")
        os.utime(entry / "complete")
        _prune(root)
    how = "built" if built else "cached"
    print(f"\n[packed env {how} in {time.monotonic() - started:.1f} s: {entry}]", file=sys.stderr)
    return PackedEnv(entry / "env", entry / "env.tar.gz", sha)


class StandaloneCluster:
    """A master and one one-core worker from pyspark's own ``spark-class``, on 127.0.0.1 (logs:
    ``<work>/master.log``, ``<work>/worker.log``; the executors' in ``<work>/work/<app>/<id>/``).

    The worker's environment is a machine without the package: ``python3``/``python`` on its
    PATH and ``PYSPARK_PYTHON`` are a bare venv.  Its ``PYTHONPATH`` holds
    ``executor_probe/sitecustomize.py``, so every Python its executors start records itself in
    ``probe_dir``.
    """

    def __init__(self, base: Path):
        import pyspark

        self.base = base
        self.work_dir = base / "work"
        self.probe_dir = base / "probe"
        self.probe_dir.mkdir()
        self.default_python = base / "bare-venv" / "bin" / "python"
        self.spark_home = Path(pyspark.__file__).resolve().parent
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("PYSPARK_") and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        self.env = dict(env, SPARK_HOME=str(self.spark_home), SPARK_LOCAL_IP="127.0.0.1",
                        SPARK_DAEMON_MEMORY="256m", SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
                        PYSPARK_PYTHON=str(self.default_python),
                        PATH=f"{self.default_python.parent}{os.pathsep}{env.get('PATH', '')}",
                        PYTHONPATH=str(PROBE_CODE), SPARKKAFKA_PYTHON_PROBE=str(self.probe_dir))
        self.procs: list[subprocess.Popen] = []
        self.url = ""

    def _start(self, name: str, *args: str) -> subprocess.Popen:
        with open(self.base / f"{name}.log", "w") as out:
            proc = subprocess.Popen([str(self.spark_home / "bin" / "spark-class"), *args], env=self.env, cwd=self.base,
                                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.procs.append(proc)
        return proc

    def _log(self, name: str, proc: subprocess.Popen) -> str:
        text = (self.base / f"{name}.log").read_text()
        if proc.poll() is not None:
            raise RuntimeError(f"the Spark {name} exited ({proc.returncode}):\n{text[-3000:]}")
        return text

    def start(self) -> None:
        _run([sys.executable, "-m", "venv", "--without-pip", str(self.default_python.parents[1])])
        master = self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                             "--port", "0", "--webui-port", "0")

        def master_up() -> bool:  # observed: the line naming its address
            found = re.search(r"Starting Spark master at (spark://\S+)", self._log("master", master))
            self.url = found.group(1) if found else ""
            return found is not None

        wait_until("the Spark master to start", master_up, timeout=120, interval=0.1)
        worker = self._start("worker", "org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
                             "--port", "0", "--webui-port", "0", "--cores", "1", "--memory", "1g",
                             "--work-dir", str(self.work_dir))
        wait_until("the Spark worker to register with the master",
                   lambda: "Successfully registered with master" in self._log("worker", worker),
                   timeout=120, interval=0.1)

    def stop(self) -> None:
        for p in reversed(self.procs):  # the worker first: it stops its executors
            if p.poll() is None:
                p.terminate()
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(30)


@pytest.fixture(scope="module")
def standalone_cluster(tmp_path_factory) -> Iterator[StandaloneCluster]:
    cluster = StandaloneCluster(tmp_path_factory.mktemp("standalone"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
