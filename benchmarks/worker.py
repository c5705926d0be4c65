"""Child process running ONE standalone/limit contender: ``python -m benchmarks.worker --spec JSON
--result FILE``.  A process of its own makes the peak RSS the contender's own.

Memory: after the data is prepared (and the client library imported) the kernel's peak-RSS
mark is reset (``/proc/self/clear_refs`` <- 5); ``base_rss_mb`` is the RSS then, ``peak_rss_mb``
the high-water mark (VmHWM) at the end, and ``net_rss_mb`` their difference: what the client
needed on top of the data.  Without clear_refs, ru_maxrss is used and net_rss_mb may be 0.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import sys
import time
import traceback

from benchmarks.common import BenchSpec, CpuMeter, MiB, Progress, make_pool, maxrss_mb, proc_rss_bytes
from benchmarks.contenders import CONTENDERS, Skip


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _vm_hwm_mb() -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024 / MiB
    except OSError:
        pass
    return None


def run_one(spec: BenchSpec) -> dict:
    c = CONTENDERS[spec.contender]
    mod = importlib.import_module(c.module)
    result: dict = {"contender": spec.contender, "group": c.group, "compression": spec.compression,
                    "topic": spec.topic, "records": spec.records, "status": "ok"}
    why = mod.available()
    if why:
        result.update(status="skipped", note=why)
        return result
    keys, values = make_pool(spec.pool_size, spec.key_size, spec.value_size, spec.seed)
    data = mod.prepare(spec, keys, values)
    gc.collect()
    reset = _reset_peak()
    base = proc_rss_bytes(os.getpid()) / MiB
    client = mod.setup(spec)
    progress = Progress(spec.label or spec.contender, spec.records, spec.progress_interval)
    cpu = CpuMeter(spec.broker_pid)
    t0 = time.perf_counter()
    out = mod.run(spec, client, data, progress)
    elapsed = time.perf_counter() - t0
    result.update(cpu.stop())
    if "pass_s" not in out:  # the replay prints its own per-pass lines
        progress.finish(out.get("acked") if out.get("acked") is not None else spec.records)
    peak = (_vm_hwm_mb() if reset else None) or maxrss_mb()
    mod.teardown(client)
    elapsed = out.pop("elapsed_s", elapsed)  # a contender may time passes itself (the replay)
    result.update(out)
    result.update(elapsed_s=elapsed, base_rss_mb=round(base, 1), peak_rss_mb=round(peak, 1),
                  net_rss_mb=round(max(0.0, peak - base), 1), peak_reset=reset)
    if result.get("errors"):
        result["status"] = "error"
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--spec", required=True, help="BenchSpec as JSON")
    ap.add_argument("--result", required=True, help="write the result JSON here")
    args = ap.parse_args(argv)
    spec = BenchSpec.from_json(args.spec)
    try:
        result = run_one(spec)
    except Skip as e:
        result = {"contender": spec.contender, "compression": spec.compression, "status": "skipped",
                  "note": str(e)}
    except BaseException as e:  # noqa: BLE001 - reported in the results, not raised
        traceback.print_exc()
        result = {"contender": spec.contender, "compression": spec.compression, "status": "error",
                  "note": f"{type(e).__name__}: {e}"}
    with open(args.result, "w") as f:
        json.dump(result, f)
    sys.stderr.flush()
    sys.stdout.flush()
    # a client whose close() failed may leave non-daemon threads: do not hang on them
    import os
    os._exit(0)


if __name__ == "__main__":
    main()
