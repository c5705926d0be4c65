"""The broker's own account of the Produce requests a run sent, read over JMX.

The records per batch come from the broker's log segments (``common.batch_census``); how many
requests carried them, how big they were and how long the broker took over them come from
Apache Kafka's request metrics (``kafka.network:type=RequestMetrics,request=Produce``, all
versions) and its topic metrics (``BrokerTopicMetrics``), the same for every client.  The
harness's broker runs without a JMX port, so ``enable_jmx`` opens one on the running JVM
(``jcmd <pid> ManagementAgent.start``, bound to 127.0.0.1, no authentication: a throw-away
local broker), and one long-lived ``java BrokerRequests.java`` (a single-file program: only the
JDK) answers a JSON snapshot per line asked.  A run's figures are the difference of the
snapshots taken just before and just after its clock.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

PROBE = Path(__file__).with_name("jmx") / "BrokerRequests.java"
_HOST = "127.0.0.1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((_HOST, 0))
        return s.getsockname()[1]


def enable_jmx(pid: int, timeout: float = 60.0) -> str:
    """Open a JMX connector on the running JVM ``pid``; returns its ``host:port``.

    Raises ``RuntimeError`` with jcmd's answer if it refused (no jcmd, another user's JVM...)."""
    jcmd = shutil.which("jcmd")
    if jcmd is None:
        raise RuntimeError("jcmd is not on PATH (a JDK's tool)")
    port = _free_port()
    out = subprocess.run([jcmd, str(pid), "ManagementAgent.start", f"jmxremote.port={port}",
                          f"jmxremote.rmi.port={port}", f"jmxremote.host={_HOST}",
                          "jmxremote.authenticate=false", "jmxremote.ssl=false", "jmxremote.registry.ssl=false",
                          "jmxremote.autodiscovery=false"],
                         capture_output=True, text=True, timeout=timeout)
    _remove_attach_socket(pid)
    if out.returncode != 0 or "exception" in (out.stdout + out.stderr).lower():
        raise RuntimeError(f"jcmd ManagementAgent.start failed: {(out.stdout + out.stderr).strip()[:400]}")
    return f"{_HOST}:{port}"


def _remove_attach_socket(pid: int) -> None:
    """jcmd's attach makes the JVM listen on ``/tmp/.java_pid<pid>`` (HotSpot's fixed place, not
    java.io.tmpdir), which outlives a killed JVM: removed once jcmd is done with it (a later
    attach would make it again), so nothing is left in the temp directory."""
    for directory in {"/tmp", tempfile.gettempdir()}:
        try:
            os.unlink(os.path.join(directory, f".java_pid{pid}"))
        except OSError:
            pass


class RequestProbe:
    """One ``java BrokerRequests.java`` connected to the broker's JMX: ``snapshot()`` is its
    counters now.  A context manager; ``close()`` stops the child (by its handle)."""

    def __init__(self, address: str, timeout: float = 60.0):
        java = shutil.which("java")
        if java is None:
            raise RuntimeError("java is not on PATH")
        self._proc = subprocess.Popen([java, "-Xmx64m", str(PROBE), address], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.snapshot()  # compiles and connects now, not inside a run

    def snapshot(self) -> dict:
        try:
            self._proc.stdin.write("\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            err = self._proc.stderr.read() if self._proc.poll() is not None else ""
            raise RuntimeError(f"the JMX probe stopped: {err.strip()[-400:]}")
        return json.loads(line)

    def try_snapshot(self) -> dict | None:
        """``snapshot()``, or None if the probe failed (a run is not lost to its metrics)."""
        try:
            return self.snapshot()
        except (RuntimeError, ValueError) as exc:
            import sys

            print(f"[bench] broker request metrics: {exc}", file=sys.stderr)
            return None

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.stdin.close()
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    def __enter__(self) -> RequestProbe:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def request_figures(before: dict, after: dict, elapsed_s: float, stored_batches: int | None = None) -> dict:
    """What a run's Produce requests were, from two snapshots: how many (and per second), their
    mean size, the broker's mean time on one (total and in its request handlers), and with the
    batches the broker stored, batches per request."""
    d = {k: after[k] - before[k] for k in after if k in before and not isinstance(after[k], dict)}
    n = d.get("produce_requests", 0)
    out = {"produce_requests": int(n), "requests_per_s": round(n / elapsed_s, 1) if elapsed_s > 0 else None,
           "messages_in": int(d.get("messages_in", 0)), "bytes_in": int(d.get("bytes_in", 0))}
    if d.get("request_bytes_count"):
        out["request_kib_mean"] = round(d["request_bytes_total"] / d["request_bytes_count"] / 1024, 1)
    for key in ("total_time_ms", "local_time_ms", "queue_time_ms"):
        if d.get(f"{key}_count"):
            out[f"{key}_mean"] = round(d[f"{key}_total"] / d[f"{key}_count"], 2)
    if n:
        out["records_per_request"] = round(out["messages_in"] / n, 1)
        if stored_batches:
            out["batches_per_request"] = round(stored_batches / n, 1)
    return out


class RequestMeter:
    """The Produce requests of one run, shaped like ``common.CpuMeter``: the first snapshot is
    taken at construction, ``stop()`` takes the second when the run's clock stops, and
    ``figures()`` turns them into the run's figures once its time and stored batches are known.
    Without a probe, or when one of its snapshots failed, ``figures()`` is None."""

    def __init__(self, probe: RequestProbe | None):
        self._probe = probe
        self._before = probe.try_snapshot() if probe else None
        self._after: dict | None = None

    def stop(self) -> None:
        if self._before is not None:
            self._after = self._probe.try_snapshot()

    def figures(self, elapsed_s: float | None, stored_batches: int | None = None) -> dict | None:
        if self._before is None or self._after is None or not elapsed_s:
            return None
        return request_figures(self._before, self._after, elapsed_s, stored_batches)


_probes: dict[str, RequestProbe | None] = {}


def probe_for(address: str) -> RequestProbe | None:
    """This process's probe of the broker at JMX ``address`` ("" or a failed start: None, said
    once on stderr); started on first use, stopped at exit."""
    if not address:
        return None
    if address not in _probes:
        import atexit
        import sys

        try:
            _probes[address] = RequestProbe(address)
            atexit.register(_probes[address].close)
        except (RuntimeError, OSError, ValueError) as exc:
            print(f"[bench] no broker request metrics: {exc}", file=sys.stderr)
            _probes[address] = None
    return _probes[address]
