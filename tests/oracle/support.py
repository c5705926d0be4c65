"""The canonical text form of records shared with the Java programs (``java/Canon.java``), test
record generators, running the compiled Java programs, and the skip mark of the oracle tests.

A record is one line of tab-separated tokens; bytes are ``x`` + lowercase hex (``x`` alone is
empty), null is ``-``, header keys are given as their UTF-8 bytes.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from broker_kinds import APACHE_SOURCE

JAVA_SOURCES = Path(__file__).with_name("java")
#: (the quick compiler alone comes with every JVM of the run: tests/run_environment.py)
JVM_OPTS = ("-Xmx384m", "-XX:+UseSerialGC", "-Djava.awt.headless=true")

Headers = list[tuple[str, bytes | None]]


def javac(lib: Path, out: Path, sources: list[str]) -> subprocess.CompletedProcess:
    """``sources`` compiled against ``lib``'s jars into ``out`` (javac's JVM with the serial GC:
    with the run's quick compiler, half the time of the defaults on two busy cores)."""
    return subprocess.run(["javac", "-J-XX:+UseSerialGC", "-nowarn", "-encoding", "UTF-8", "-d", str(out),
                           "-cp", f"{lib}/*", *sources],
                          capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)

#: every oracle test module carries this mark: Kafka's jars come from Maven, javac compiles
needs_java_oracle = pytest.mark.skipif(
    APACHE_SOURCE != "maven" or shutil.which("javac") is None,
    reason="the Java oracle needs java, javac and mvn on PATH (Apache Kafka from Maven jars)")


def tok(data: bytes | None) -> str:
    return "-" if data is None else "x" + bytes(data).hex()


@dataclass(frozen=True)
class Rec:
    """A record as a test sends it; ``partition`` None leaves the choice to the producer."""

    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers = field(default_factory=list)
    partition: int | None = None

    def content(self) -> str:
        """Key, value and headers as Java's ``Canon.content`` writes them."""
        parts = [tok(self.key), tok(self.value)]
        for k, v in self.headers:
            parts += [tok(k.encode("utf-8")), tok(v)]
        return "\t".join(parts)

    def spec_line(self) -> str:
        """This record as a ``ProduceFromSpec.java`` input line."""
        p = "-" if self.partition is None else str(self.partition)
        return f"{p}\t{self.timestamp}\t{self.content()}"


def sample_records(seed: int, n: int, partitions: int = 3, now_ms: int = 1_700_000_000_000,
                   large: bool = True) -> list[Rec]:
    """Records covering what the format allows: null and empty keys and values, null header
    values, repeated, empty and non-ASCII header keys, timestamps before the first one (negative
    deltas) and far apart, keys with every tail length of murmur2, large random and large
    repetitive values (several snappy and lz4 blocks; ``large=False`` leaves them out), explicit
    partitions and producer-chosen ones."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        key: bytes | None = rng.randbytes(rng.randrange(0, 24))
        if i % 7 == 0:
            key = None
        value: bytes | None = rng.randbytes(rng.randrange(0, 300))
        if i % 11 == 0:
            value = None  # a tombstone
        elif i % 17 == 0:
            value = b""
        elif i % 97 == 5 and large:
            value = rng.randbytes(150_000)
        elif i % 97 == 50 and large:
            value = (b"kafka-" * 40_000) + bytes([i % 256])
        if i % 3 == 0:
            headers: Headers = []
        elif i % 3 == 1:
            headers = [("trace", rng.randbytes(8)), ("trace", None), ("trace", b"")]
        else:
            headers = [("clé-ключ-鍵", "ünïcödé".encode()), ("null-value", None), ("", bytes([i % 256]))]
        timestamp = now_ms - rng.randrange(0, 86_400_000)
        if i % 29 == 3:
            timestamp = rng.randrange(0, 1_000_000_000_000)  # long before the batch's first record
        partition = None if (key is not None or i % 2) else rng.randrange(partitions)
        out.append(Rec(timestamp, key, value, headers, partition))
    return out


def record_line(topic: str, partition: int, offset: int, timestamp: int, content: str) -> str:
    """What ``ConsumeDigest.java`` writes for one record."""
    return "\t".join((topic, str(partition), str(offset), "CreateTime", str(timestamp), content))


def first_differences(got: Sequence[str], want: Sequence[str], limit: int = 5) -> str:
    """A short account of how two lists of lines differ: the first differing token of each of
    the first ``limit`` differing lines (for assertion messages)."""
    out = [f"{len(got)} lines, expected {len(want)}"]
    for i in range(max(len(got), len(want))):
        g = got[i].split("\t") if i < len(got) else []
        w = want[i].split("\t") if i < len(want) else []
        if g != w:
            j = next(j for j in range(max(len(g), len(w))) if g[j:j + 1] != w[j:j + 1])
            out.append(f"line {i} {' '.join(w[:3] or g[:3])}: token {j} is "
                       f"{' '.join(g[j:j + 2])[:200] or '<none>'}, expected {' '.join(w[j:j + 2])[:200] or '<none>'}")
            if len(out) > limit:
                break
    return "\n".join(out)


class JavaPrograms:
    """The compiled ``java/*.java`` programs, run against the Kafka jars in ``lib``."""

    def __init__(self, lib: Path, classes: Path, work: Path):
        self.lib = lib
        self.classes = classes
        self.work = work
        self.classpath = f"{classes}{os.pathsep}{lib}/*"

    @classmethod
    def compile(cls, lib: Path, work: Path) -> JavaPrograms:
        classes = work / "classes"
        classes.mkdir(parents=True, exist_ok=True)
        sources = sorted(str(p) for p in JAVA_SOURCES.glob("*.java"))
        proc = javac(lib, classes, sources)
        if proc.returncode != 0:
            raise RuntimeError(f"javac failed (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}")
        return cls(lib, classes, work)

    def run(self, main: str, *args: object, timeout: float = 120.0) -> None:
        """Run ``main`` to completion; its results are in the files its arguments name."""
        cmd = ["java", *JVM_OPTS, "-cp", self.classpath, main, *map(str, args)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, cwd=str(self.work))
        if proc.returncode != 0:
            raise AssertionError(f"{main} failed (exit {proc.returncode}):\n"
                                 f"{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}")


def hex_round_trip(lib: Path, source: Path, work: Path) -> Callable[[Sequence[object], Sequence[bytes | None]],
                                                                     list[bytes | None]]:
    """A format's own Java reader as an oracle: ``source`` (one class) compiled against ``lib``'s
    jars into ``work``; the callable runs it as ``main(*args, in, out)`` over values (a line of
    hex each, "-" for none) and answers each output line's first column as bytes."""
    proc = javac(lib, work, [str(source)])
    assert proc.returncode == 0, proc.stdout + proc.stderr

    def run(args: Sequence[object], values: Sequence[bytes | None]) -> list[bytes | None]:
        (work / "in.txt").write_text("".join(("-" if v is None else v.hex()) + "\n" for v in values))
        proc = subprocess.run(["java", *JVM_OPTS, "-cp", f"{work}:{lib}/*", source.stem, *map(str, args),
                               str(work / "in.txt"), str(work / "out.txt")],
                              capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
        lines = (work / "out.txt").read_text().splitlines()
        return [None if line == "-" else bytes.fromhex(line.split("\t")[0]) for line in lines]
    return run
