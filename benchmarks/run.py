"""Benchmark harness: ``python -m benchmarks.run [--quick] [options]`` (see benchmarks/README.md).

Starts an embedded broker (or uses ``--bootstrap``), then for every compression runs each
standalone contender in a child process of its own (``benchmarks.worker``) on a fresh topic,
and all Spark contenders in one Spark process (``benchmarks.contenders.spark``).  Every run's
record count is checked on the broker.  Writes ``results.json``, ``results.md`` and
``results.png`` to ``--out``; progress goes to stderr, the summary table to stdout.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import (
    MB,
    MiB,
    BenchSpec,
    count_landed,
    create_topic,
    delete_topic,
    fmt_rate,
    log,
    new_topic,
    versions,
)
from benchmarks.contenders import CONTENDERS, REFERENCE, resolve

REPO = Path(__file__).resolve().parent.parent
QUICK = {"records": 50_000, "spark_rows": 100_000}
#: the "constant" of the memory target: ours may use buffer.memory plus this much
DEFAULT_RSS_SLACK_MB = 64


# ------------------------------------------------------------------------------------- CLI


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.run",
        description="Throughput/memory benchmark of sparkkafka_sink against other Python Kafka "
                    "producers and Spark write paths, on an embedded broker.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help=f"smoke-test sizes: --records {QUICK['records']}, --spark-rows {QUICK['spark_rows']} "
                         "(explicit --records/--spark-rows still win)")
    ap.add_argument("--records", type=int, default=argparse.SUPPRESS,
                    help="records per standalone run (default: 1000000; 50000 with --quick)")
    ap.add_argument("--spark-rows", type=int, default=argparse.SUPPRESS,
                    help="DataFrame rows per Spark run (default: 2000000; 100000 with --quick)")
    ap.add_argument("--compression", default="none,lz4", help="comma-separated codecs (none,gzip,snappy,lz4,zstd)")
    ap.add_argument("--contenders", default="all",
                    help="all | standalone | limit | spark | names, comma-separated: " + ", ".join(CONTENDERS))
    ap.add_argument("--broker", choices=("tansu", "noida"), default="tansu", help="embedded broker to start")
    ap.add_argument("--bootstrap", default=None,
                    help="use this running broker instead of starting one (--broker then names its kind, "
                         "which decides how counts are read)")
    ap.add_argument("--out", default="benchmarks/results", help="output directory (relative: to the repository)")
    ap.add_argument("--rounds", type=int, default=1, help="runs per standalone contender (best counts)")
    ap.add_argument("--spark-rounds", type=int, default=2, help="runs per Spark contender (best counts)")
    g = ap.add_argument_group("data")
    g.add_argument("--key-size", type=int, default=10)
    g.add_argument("--value-size", type=int, default=100)
    g.add_argument("--pool-size", type=int, default=100_000, help="distinct records, cycled")
    g.add_argument("--partitions", type=int, default=4, help="partitions of each fresh topic")
    g.add_argument("--seed", type=int, default=42)
    g = ap.add_argument_group("producer settings (the same for every client)")
    g.add_argument("--linger-ms", type=int, default=5)
    g.add_argument("--batch-size", type=int, default=262144)
    g.add_argument("--buffer-memory", type=int, default=32 * MiB)
    g.add_argument("--max-in-flight", type=int, default=5)
    g.add_argument("--no-idempotence", action="store_true", help="enable.idempotence=false everywhere")
    g.add_argument("--arrow-batch", type=int, default=10_000,
                   help="rows per send_batch() call; also spark.sql.execution.arrow.maxRecordsPerBatch")
    g.add_argument("--replay-inflight", type=int, default=5, help="pipelined requests of the replay limit")
    g.add_argument("--replay-repeats", type=int, default=3, help="replay passes at least (more until 2 s were spent; the fastest counts)")
    g = ap.add_argument_group("spark")
    g.add_argument("--spark-master", default="local[2]")
    g.add_argument("--spark-partitions", type=int, default=2, help="DataFrame partitions (= write tasks)")
    g.add_argument("--spark-driver-memory", default="2g")
    g.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark conf")
    g = ap.add_argument_group("harness")
    g.add_argument("--timeout", type=float, default=1800, help="seconds per standalone child")
    g.add_argument("--spark-timeout", type=float, default=7200, help="seconds for the whole Spark process")
    g.add_argument("--progress-interval", type=float, default=1.0, help="seconds between progress lines")
    g.add_argument("--rss-slack-mb", type=float, default=DEFAULT_RSS_SLACK_MB,
                   help="the memory target's constant: net RSS <= buffer.memory + this")
    g.add_argument("--keep-topics", action="store_true", help="do not delete each run's topic afterwards")
    g.add_argument("--no-chart", action="store_true", help="skip results.png")
    args = ap.parse_args(argv)
    if getattr(args, "records", None) is None:
        args.records = QUICK["records"] if args.quick else 1_000_000
    if getattr(args, "spark_rows", None) is None:
        args.spark_rows = QUICK["spark_rows"] if args.quick else 2_000_000
    args.compressions = [c.strip().lower() for c in args.compression.split(",") if c.strip()]
    try:
        args.names = resolve(args.contenders)
    except ValueError as e:
        ap.error(str(e))
    return args


def template_spec(args, bootstrap: str) -> BenchSpec:
    return BenchSpec(contender="", bootstrap=bootstrap, broker=args.broker, topic="", partitions=args.partitions,
                     records=args.records, key_size=args.key_size, value_size=args.value_size,
                     pool_size=args.pool_size, seed=args.seed, linger_ms=args.linger_ms,
                     batch_size=args.batch_size, buffer_memory=args.buffer_memory,
                     max_in_flight=args.max_in_flight, idempotence=not args.no_idempotence,
                     arrow_batch=args.arrow_batch, replay_inflight=args.replay_inflight,
                     replay_repeats=args.replay_repeats,
                     progress_interval=args.progress_interval)


# ----------------------------------------------------------------------------- child runs


def _child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _run_child(cmd: list[str], timeout: float) -> tuple[int | None, str | None]:
    """Run a child in its own session; on timeout/interrupt kill its process group (ours)."""
    proc = subprocess.Popen(cmd, cwd=str(REPO), env=_child_env(), start_new_session=True,
                            stdin=subprocess.DEVNULL)
    try:
        return proc.wait(timeout=timeout), None
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return None, f"timed out after {timeout:.0f}s (killed)"
    except BaseException:
        _kill_group(proc)
        raise


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    except ProcessLookupError:
        pass


def run_standalone(args, template: BenchSpec, name: str, comp: str, rnd: int) -> dict:
    label = f"{name} {comp}" + (f" r{rnd}/{args.rounds}" if args.rounds > 1 else "")
    topic = new_topic(f"{name}-{comp}")
    spec = dataclasses.replace(template, contender=name, compression=comp, topic=topic, label=label)
    create_topic(spec.bootstrap, topic, spec.partitions)
    with tempfile.NamedTemporaryFile(prefix="bench-", suffix=".json", delete=False) as f:
        result_path = f.name
    try:
        log(f"== {label}: {args.records:,} records -> {topic}")
        rc, why = _run_child([sys.executable, "-m", "benchmarks.worker", "--spec", spec.to_json(),
                              "--result", result_path], args.timeout)
        try:
            with open(result_path) as f:
                res = json.load(f)
        except (OSError, ValueError):
            res = {"contender": name, "compression": comp, "status": "error",
                   "note": why or f"child exited with {rc} and wrote no result"}
    finally:
        try:
            os.unlink(result_path)
        except OSError:
            pass
    res.setdefault("group", CONTENDERS[name].group)
    res.update(round=rnd, records=args.records, topic=topic)
    if res.get("status") not in ("skipped",):
        n, how = count_landed(spec.bootstrap, topic, spec.partitions, spec.broker)
        res.update(landed=n, verified_by=how)
    if not args.keep_topics:
        delete_topic(spec.bootstrap, topic)
    return res


def run_spark(args, template: BenchSpec, names: list[str]) -> tuple[list[dict], dict]:
    cfg = {
        "spec": dataclasses.asdict(template),
        "rows": args.spark_rows,
        "rounds": args.spark_rounds,
        "compressions": args.compressions,
        "contenders": names,
        "spark_master": args.spark_master,
        "spark_driver_memory": args.spark_driver_memory,
        "spark_partitions": args.spark_partitions,
        "spark_arrow_batch": args.arrow_batch,
        "spark_conf": args.spark_conf,
        "progress_interval": max(args.progress_interval, 2.0),
        "keep_topics": args.keep_topics,
    }
    with tempfile.NamedTemporaryFile(prefix="bench-spark-", suffix=".json", delete=False) as f:
        result_path = f.name
    try:
        log(f"== spark ({args.spark_master}): {len(names)} contender(s) x {len(args.compressions)} codec(s) "
            f"x {args.spark_rounds} round(s), {args.spark_rows:,} rows each")
        rc, why = _run_child([sys.executable, "-m", "benchmarks.contenders.spark", "--config", json.dumps(cfg),
                              "--result", result_path], args.spark_timeout)
        try:
            with open(result_path) as f:
                out = json.load(f)
        except (OSError, ValueError):
            out = {"runs": [], "meta": {"error": why or f"spark process exited with {rc} and wrote no result"}}
    finally:
        try:
            os.unlink(result_path)
        except OSError:
            pass
    if why:
        out["meta"]["error"] = why
    return out["runs"], out["meta"]


# ------------------------------------------------------------------------------ aggregation


def _finish_run(r: dict, args) -> dict:
    """Derive rates and the verdict of one run."""
    records = r.get("records") or 0
    if r.get("status") == "ok" and r.get("elapsed_s"):
        r["records_per_s"] = records / r["elapsed_s"]
        r["mb_per_s"] = records * (args.key_size + args.value_size) / r["elapsed_s"] / MB
    if r.get("status") == "ok":
        landed = r.get("landed")
        expected = r.get("expected_landed") or records
        r["verified"] = landed == expected
        if landed is None:
            r["status"] = "unverified"
            r["note"] = (r.get("note") + "; " if r.get("note") else "") + f"count not read: {r.get('verified_by')}"
        elif landed != expected:
            r["status"] = "count-mismatch"
            r["note"] = (r.get("note") + "; " if r.get("note") else "") + f"{landed:,} landed, {expected:,} sent"
    return r


def aggregate(runs: list[dict], args) -> list[dict]:
    """Best OK round per (contender, compression), plus every round's rate."""
    best: dict[tuple[str, str], dict] = {}
    rounds: dict[tuple[str, str], list] = {}
    for r in runs:
        key = (r["contender"], r["compression"])
        rounds.setdefault(key, []).append({k: r.get(k) for k in ("round", "status", "elapsed_s", "records_per_s",
                                                                 "landed", "note")})
        cur = best.get(key)
        ok = r.get("status") == "ok"
        if cur is None or (ok and (cur.get("status") != "ok" or r["records_per_s"] > cur["records_per_s"])):
            best[key] = r
    out = []
    for name in CONTENDERS:
        for comp in args.compressions:
            r = best.get((name, comp))
            if r is None:
                continue
            r = dict(r)
            r["rounds"] = rounds[(name, comp)]
            r.pop("round", None)
            out.append(r)
    # ratio to ours: each group's reference contender, same compression
    by = {(r["contender"], r["compression"]): r for r in out}

    def rate(name, comp):
        x = by.get((name, comp))
        return x.get("records_per_s") if x and x.get("status") == "ok" else None

    for r in out:
        group = r.get("group") or CONTENDERS[r["contender"]].group
        ref = REFERENCE[group]
        if group == "limit" and rate(ref, r["compression"]) is None:
            ref = "ours-send"
        ref_rate, mine = rate(ref, r["compression"]), r.get("records_per_s")
        r["reference"] = ref
        r["ratio_to_ours"] = mine / ref_rate if (mine and ref_rate and r.get("status") == "ok") else None
        if group == "limit" and mine and r.get("status") == "ok":
            r["ours_share"] = {o: (rate(o, r["compression"]) / mine if rate(o, r["compression"]) else None)
                               for o in ("ours-send", "ours-batch")}
    return out


def targets(results: list[dict], args, spark_floor_mb: float | None = None) -> list[dict]:
    """The issue's targets per codec; ``spark_floor_mb``: RSS of a fresh Spark worker."""
    by = {(r["contender"], r["compression"]): r for r in results}

    def get(name, comp, field="records_per_s"):
        r = by.get((name, comp))
        return r.get(field) if r and r.get("status") == "ok" else None

    def ratio(a, b):
        return a / b if a is not None and b else None

    out = []
    budget = args.buffer_memory / MiB + args.rss_slack_mb
    for comp in args.compressions:
        for name, value, goal in [
            ("spark-pyprod / spark-mapinarrow-confluent >= 1.5",
             ratio(get("spark-pyprod", comp), get("spark-mapinarrow-confluent", comp)), 1.5),
            ("spark-pyprod / spark-noop (floor) >= 0.75",
             ratio(get("spark-pyprod", comp), get("spark-noop", comp)), 0.75),
            ("ours-batch / confluent >= 1.0", ratio(get("ours-batch", comp), get("confluent", comp)), 1.0),
            ("ours-send / kafka-python >= 4.0", ratio(get("ours-send", comp), get("kafka-python", comp)), 4.0),
        ]:
            out.append({"target": name, "compression": comp, "value": value, "goal": goal,
                        "pass": None if value is None else value >= goal})
        for o in ("ours-send", "ours-batch"):
            net = get(o, comp, "net_rss_mb")
            out.append({"target": f"{o} net RSS <= buffer.memory + {args.rss_slack_mb:g} MiB ({budget:g} MiB)",
                        "compression": comp, "value": net, "goal": budget, "unit": "MiB",
                        "pass": None if net is None else net <= budget})
        sp, floor = get("spark-pyprod", comp, "peak_rss_mb"), spark_floor_mb
        extra = sp - floor if sp is not None and floor is not None else None
        out.append({"target": f"spark-pyprod worker RSS over a fresh worker's <= buffer.memory + "
                              f"{args.rss_slack_mb:g} MiB ({budget:g} MiB)",
                    "compression": comp, "value": extra, "goal": budget, "unit": "MiB",
                    "pass": None if extra is None else extra <= budget})
        # The floor pays neither a client nor the broker.  A sink costing nothing itself still
        # makes the broker work, on the same cores: its best time is the floor's CPU plus the
        # broker's CPU in our run, spread over every core (or the floor's wall time if longer).
        noop_s, noop_cpu = get("spark-noop", comp, "elapsed_s"), get("spark-noop", comp, "cpu_machine_s")
        broker_cpu, cpus = get("spark-pyprod", comp, "cpu_broker_s"), os.cpu_count() or 1
        ceiling_s = (max(noop_s, (noop_cpu + broker_cpu) / cpus)
                     if None not in (noop_s, noop_cpu, broker_cpu) else None)
        out.append({"target": "a zero-cost sink's best share of spark-noop: the floor's CPU + the broker's "
                              f"CPU in spark-pyprod's run over {cpus} cores (informative)", "compression": comp,
                    "value": ratio(noop_s, ceiling_s), "goal": None, "pass": None})
        out.append({"target": "spark-pyprod share of that zero-cost sink (informative)", "compression": comp,
                    "value": ratio(get("spark-pyprod", comp), ratio(args.spark_rows, ceiling_s)),
                    "goal": None, "pass": None})
        limit = get("replay-limit", comp)
        for o in ("ours-batch", "ours-send"):
            share = ratio(get(o, comp), limit)
            out.append({"target": f"{o} share of the replay limit (informative)", "compression": comp,
                        "value": share, "goal": None, "pass": None})
    return out


# --------------------------------------------------------------------------------- outputs


def _fmt(v, spec=".2f", none="–"):
    return none if v is None else format(v, spec)


def markdown(doc: dict) -> str:
    meta = doc["meta"]
    lines = [f"Broker **{meta['broker']}**, {meta['records']:,} records standalone / {meta['spark_rows']:,} rows "
             f"Spark ({meta['spark_master']}, {meta['spark_partitions']} partitions), "
             f"{meta['key_size']}+{meta['value_size']}-byte records, acks=all, linger.ms={meta['linger_ms']}, "
             f"batch.size={meta['batch_size']}, {meta['partitions']} topic partitions; "
             f"load average {meta.get('loadavg_start')} -> {meta.get('loadavg_end')} on {meta.get('cpus')} CPUs"
             f"{' (--quick)' if meta.get('quick') else ''}.",
             ""]
    sp = meta.get("spark") or {}
    if sp:
        lines += [f"Spark: session {sp.get('session_s')} s, DataFrame cached in {sp.get('cache_s')} s, "
                  f"a fresh Python worker's RSS {sp.get('worker_floor_mb')} MB (the floor for the Spark "
                  f"peak RSS column){'; error: ' + sp['error'] if sp.get('error') else ''}.", ""]
    lines += ["| contender | codec | records/s | MB/s | peak RSS MB | net RSS MB | CPU s (broker) | ratio to ours "
              "| landed ok | note |",
              "|---|---|---:|---:|---:|---:|---:|---:|:---:|---|"]
    for r in doc["results"]:
        ratio = r.get("ratio_to_ours")
        ratio_s = "–" if ratio is None else f"{ratio:.2f}× {r.get('reference')}"
        shares = {k: v for k, v in (r.get("ours_share") or {}).items() if v}
        if shares:
            ratio_s += " (ours: " + ", ".join(f"{k} {v:.0%}" for k, v in shares.items()) + ")"
        note = r.get("note") or ""
        if r.get("status") not in ("ok",):
            note = f"**{r.get('status')}** {note}"
        if r.get("flush_s") is not None and r.get("status") == "ok":
            note = (note + " " if note else "") + f"flush {r['flush_s']:.2f}s"
        if r.get("tasks_s") is not None and r.get("status") == "ok":
            note = (note + " " if note else "") + (
                f"{r['elapsed_s']:.1f}s = {r['before_tasks_s']:.1f} before tasks + {r['tasks_s']:.1f} tasks + "
                f"{r['after_tasks_s']:.1f} after")
        cpu = _fmt(r.get("cpu_machine_s"), ".1f")
        if r.get("cpu_broker_s") is not None:
            cpu += f" ({r['cpu_broker_s']:.1f})"
        lines.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            r["contender"], r["compression"],
            _fmt(r.get("records_per_s"), ",.0f"), _fmt(r.get("mb_per_s"), ".1f"),
            _fmt(r.get("peak_rss_mb"), ".0f"), _fmt(r.get("net_rss_mb"), ".0f"), cpu, ratio_s,
            {True: "yes", False: "NO"}.get(r.get("verified"), "–"), note.replace("|", "/")[:200]))
    lines += ["", "| target | codec | measured | goal | met |", "|---|---|---:|---:|:---:|"]
    for t in doc["targets"]:
        unit = t.get("unit", "")
        val = _fmt(t["value"], ".1f" if unit else ".2f")
        goal = "–" if t["goal"] is None else (f"{t['goal']:g}" if unit else f"{t['goal']:g}")
        met = {True: "yes", False: "**no**", None: "–"}[t["pass"]]
        lines.append(f"| {t['target']} | {t['compression']} | {val}{' ' + unit if unit and t['value'] is not None else ''}"
                     f" | {goal} | {met} |")
    return "\n".join(lines) + "\n"


def chart(doc: dict, path: Path) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        return f"matplotlib not installed ({e}): no chart"
    results = doc["results"]
    comps = doc["meta"]["compressions"]
    panels = [("Standalone producers and the broker limit", ("standalone", "limit")), ("Spark (local)", ("spark",))]
    panels = [(t, g) for t, g in panels if any((r.get("group") in g) for r in results)]
    if not panels:
        return "no results to chart"
    fig, axes = plt.subplots(len(panels), 1, figsize=(12, 4.8 * len(panels)), squeeze=False)
    colors = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3"]
    for ax, (title, groups) in zip(axes[:, 0], panels):
        names = [n for n in CONTENDERS if any(r["contender"] == n and r.get("group") in groups for r in results)]
        width = 0.8 / max(1, len(comps))
        ymax = max([r.get("records_per_s") or 0 for r in results if r["contender"] in names] + [1])
        for j, comp in enumerate(comps):
            for i, name in enumerate(names):
                r = next((x for x in results if x["contender"] == name and x["compression"] == comp), None)
                if r is None:
                    continue
                x = i - 0.4 + width * (j + 0.5)
                v = r.get("records_per_s") if r.get("status") == "ok" else 0
                ax.bar(x, v or 0, width * 0.92, color=colors[j % len(colors)],
                       hatch="//" if CONTENDERS[name].ours else None, edgecolor="white")
                if r.get("status") != "ok":
                    text = r.get("status", "?")
                elif r.get("group") == "limit" and r.get("ours_share"):
                    best_share = max((s for s in r["ours_share"].values() if s), default=None)
                    text = "limit" + (f"\nours: {best_share:.0%}" if best_share else "")
                elif r.get("ratio_to_ours") is not None:
                    text = f"{r['ratio_to_ours']:.2f}×"
                else:
                    text = fmt_rate(v)
                ax.text(x, (v or 0) + ymax * 0.01, text, ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=12, ha="right", fontsize=9)
        ax.set_ylabel("records/s")
        ax.set_ylim(0, ymax * 1.22)
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda y, _: fmt_rate(y)))
        ref = {"standalone": "ours-send", "spark": "spark-pyprod"}[groups[0]]
        ax.set_title(f"{title} — labels: ratio to {ref} (hatched: ours)", fontsize=11)
        from matplotlib.patches import Patch

        ax.legend([Patch(color=colors[j % len(colors)]) for j in range(len(comps))],
                  [f"compression {c}" for c in comps], fontsize=8, loc="upper left")
        ax.grid(axis="y", alpha=0.3)
    m = doc["meta"]
    fig.suptitle(f"sparkkafka_sink benchmark — {m['broker']}, {m['records']:,} records / {m['spark_rows']:,} Spark rows, "
                 f"{m['key_size']}+{m['value_size']} B, acks=all{' (quick)' if m.get('quick') else ''}", fontsize=12)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def print_summary(doc: dict) -> None:
    print(markdown(doc))


# ------------------------------------------------------------------------------------- main


def main(argv=None) -> int:
    args = parse_args(argv)
    out_dir = Path(args.out) if Path(args.out).is_absolute() else REPO / args.out
    out_dir.mkdir(parents=True, exist_ok=True)
    standalone = [n for n in args.names if CONTENDERS[n].group in ("standalone", "limit")]
    spark_names = [n for n in args.names if CONTENDERS[n].group == "spark"]

    def on_term(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    meta = {
        "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([os.path.basename(sys.executable), "-m", "benchmarks.run"] + (argv or sys.argv[1:])),
        "quick": args.quick, "broker": args.broker, "records": args.records, "spark_rows": args.spark_rows,
        "compressions": args.compressions, "contenders": args.names, "partitions": args.partitions,
        "key_size": args.key_size, "value_size": args.value_size, "pool_size": args.pool_size,
        "linger_ms": args.linger_ms, "batch_size": args.batch_size, "buffer_memory": args.buffer_memory,
        "max_in_flight": args.max_in_flight, "idempotence": not args.no_idempotence,
        "arrow_batch": args.arrow_batch, "replay_inflight": args.replay_inflight,
        "replay_repeats": args.replay_repeats, "rounds": args.rounds,
        "spark_rounds": args.spark_rounds, "spark_master": args.spark_master,
        "spark_partitions": args.spark_partitions, "cpus": os.cpu_count(),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()], "versions": versions(),
    }
    try:
        meta["git_commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=str(REPO),
                                            capture_output=True, text=True, timeout=10).stdout.strip() or None
    except Exception:
        meta["git_commit"] = None

    broker = None
    runs: list[dict] = []
    t_start = time.perf_counter()
    try:
        if args.bootstrap:
            bootstrap = args.bootstrap
            log(f"== using broker at {bootstrap} ({args.broker})")
        else:
            from sparkkafka_sink.testing.brokers import start_broker

            broker = start_broker(args.broker)
            bootstrap = broker.bootstrap_servers
            log(f"== started {args.broker} at {bootstrap} (pid {broker.pid})")
        meta["bootstrap"] = bootstrap
        template = template_spec(args, bootstrap)
        if broker is not None:
            template = dataclasses.replace(template, broker_pid=broker.pid)
        for rnd in range(1, args.rounds + 1):
            for comp in args.compressions:
                for name in standalone:
                    r = _finish_run(run_standalone(args, template, name, comp, rnd), args)
                    runs.append(r)
                    if r.get("status") == "ok":
                        log(f"   {name} {comp}: {fmt_rate(r['records_per_s'])} rec/s, {r['mb_per_s']:.1f} MB/s, "
                            f"peak RSS {r.get('peak_rss_mb')} MB (net {r.get('net_rss_mb')}), "
                            f"landed {r.get('landed'):,} ({r.get('verified_by')})")
                    else:
                        log(f"   {name} {comp}: {r.get('status')}: {r.get('note')}")
        if spark_names:
            template = dataclasses.replace(template, records=args.spark_rows)
            spark_runs, spark_meta = run_spark(args, template, spark_names)
            meta["spark"] = spark_meta
            if spark_meta.get("error"):
                log(f"== spark process error: {spark_meta['error']}")
            for r in spark_runs:
                runs.append(_finish_run(r, args))
    except KeyboardInterrupt:
        log("== interrupted: writing what was measured")
        meta["interrupted"] = True
    finally:
        if broker is not None:
            broker.stop()
            log(f"== stopped {args.broker} (pid {broker.pid})")
    meta["finished"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    meta["duration_s"] = round(time.perf_counter() - t_start, 1)
    meta["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    results = aggregate(runs, args)
    floor = (meta.get("spark") or {}).get("worker_floor_mb")
    doc = {"meta": meta, "results": results, "targets": targets(results, args, floor), "runs": runs}
    (out_dir / "results.json").write_text(json.dumps(doc, indent=2, default=str))
    (out_dir / "results.md").write_text(markdown(doc))
    if not args.no_chart:
        why = chart(doc, out_dir / "results.png")
        if why:
            log(f"== {why}")
    print_summary(doc)
    log(f"== wrote {out_dir / 'results.json'}, results.md" + ("" if args.no_chart else ", results.png")
        + f" in {meta['duration_s']:.0f}s")
    bad = [r for r in results if r.get("status") not in ("ok", "skipped")]
    return 1 if bad or meta.get("interrupted") else 0


if __name__ == "__main__":
    sys.exit(main())
