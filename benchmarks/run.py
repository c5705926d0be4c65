"""Benchmark harness: ``python -m benchmarks.run [--quick] [--matrix] [options]`` (see benchmarks/README.md).

Starts a broker (Apache Kafka from its Maven jars when java and mvn are there, else tansu; or
uses ``--bootstrap``), then for every compression runs each standalone contender in a child
process of its own (``benchmarks.worker``) on a fresh topic, and all Spark contenders in one
Spark process (``benchmarks.contenders.spark``).  Every run's record count is checked on the
broker, and the broker's own CPU time is read from ``/proc/<pid>/stat`` around every run.
``--matrix`` (or several ``--value-size``/``--partitions``) repeats that over value sizes x
topic partitions and reports one table of them.  A contender writing over a secured listener
(``spark-pyprod-sasl-ssl``), or ``--security``, makes the harness start its Apache Kafka with a
SASL_SSL listener (``BrokerSecurity``, a throw-away ``TestPki``) beside PLAINTEXT, which still
creates, counts and deletes the topics.  ``spark-pyprod-eos`` writes with
``deliveryGuarantee=exactly-once`` (its count is read with read_committed).  Each variant of
``spark-pyprod`` that runs beside it (``COST_PAIRS``) gets a cost line in the summary: its rows/s
over ``spark-pyprod``'s in the same run, round by round (``costs`` in the JSON).  The Avro and
Protobuf contenders (``--avro-matrix``, ``--protobuf-matrix``) make the harness start a Schema
Registry (Apicurio) beside the broker; their runs' contents are checked against the data
(``benchmarks/avro.py``, ``benchmarks/protobuf.py``).  Writes ``results.json``,
``results.md`` and (not for a matrix) ``results.png`` to ``--out``; progress goes to stderr, the
summary to stdout.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.broker_requests import RequestMeter, enable_jmx, probe_for
from benchmarks.common import (
    BROKERS,
    CONFIGS,
    MB,
    BenchSpec,
    MiB,
    batch_census,
    count_landed,
    create_topic,
    delete_topic,
    fair_buffer_memory,
    fmt_rate,
    log,
    new_topic,
    versions,
)
from benchmarks.contenders import AVRO, CONTENDERS, COST_PAIRS, PROTOBUF, REFERENCE, resolve

REPO = Path(__file__).resolve().parent.parent
QUICK = {"records": 50_000, "spark_rows": 100_000}
#: the "constant" of the memory target: ours may use buffer.memory plus this much
DEFAULT_RSS_SLACK_MB = 64
#: --matrix defaults (each overridden by its explicit flag)
MATRIX = {"value_sizes": "100,1024", "partitions": "4,64,256", "compression": "none",
          "contenders": "spark-pyprod,spark-jvm-kafka,spark-mapinarrow-confluent,spark-noop"}
#: --avro-matrix defaults: the Avro contenders over the same kind of cells
AVRO_MATRIX = dict(MATRIX, partitions="4,64", contenders=",".join(AVRO))
#: --protobuf-matrix defaults: the Protobuf contenders, and ours writing Avro beside them (Avro's
#: cost over the same-sized pre-encoded bytes, in the same run)
PROTOBUF_MATRIX = dict(MATRIX, partitions="4,64", contenders=",".join([*PROTOBUF, "spark-pyprod-avro"]))
#: column titles of the matrix table
MATRIX_LABELS = {"spark-pyprod": "pyprod-kafka (ours)", "spark-jvm-kafka": "Spark kafka (JVM)",
                 "spark-mapinarrow-confluent": "mapInArrow+confluent", "spark-noop": "no-op floor",
                 "spark-pyprod-sasl-ssl": "pyprod-kafka SASL_SSL", "spark-pyprod-eos": "pyprod-kafka exactly-once",
                 "spark-pyprod-avro": "pyprod-kafka Avro (ours)", "spark-jvm-avro": "to_avro + Spark kafka (JVM)",
                 "spark-confluent-avro": "mapInArrow+AvroSerializer", "spark-pyprod-avro-bytes": "pyprod-kafka, "
                 "pre-encoded Avro", "spark-pyprod-protobuf": "pyprod-kafka Protobuf (ours)",
                 "spark-confluent-protobuf": "mapInArrow+ProtobufSerializer",
                 "spark-pyprod-protobuf-bytes": "pyprod-kafka, pre-encoded Protobuf"}
#: server.properties of the benchmark's Apache Kafka on top of the test fixture's: files of a
#: deleted topic go after 1 s, not 60 (a 1 KiB run writes ~2 GB; runs follow each other fast);
#: each partition's two index files 1 MiB at most, not 10: a 64 MiB segment needs 128-192 KiB of
#: them, and the broker preallocates them sparse and maps them -- at 256 partitions 512 such files,
#: whose large page-cache folios the kernel zeroes as the broker touches them (measured on Linux
#: 6.18: a 256-partition round's broker CPU 44-49 s cold and 9.6-12.7 s warm with 10 MiB
#: indexes, 19-22 s and 7.8-7.9 s with 1 MiB, either sink alike)
APACHE_BENCH_CONFIG = {"log.segment.delete.delay.ms": 1000, "log.index.size.max.bytes": 1 << 20}
#: the secured listener the harness adds (``--security`` or a contender with ``security``) and
#: how the secured contender logs in (``BrokerSecurity``'s user alice)
SECURED_LISTENER = "SASL_SSL"
SASL_MECHANISM = "SCRAM-SHA-512"
_SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
#: the goal of a cost pair's median round ratio, where the issue set one (issue 12: exactly-once
#: at >= 90 % of at-least-once)
COST_TARGETS = {"exactly-once": 0.90}


def default_broker() -> str:
    """Apache Kafka when java and mvn can run it, else tansu."""
    try:
        from sparkkafka_sink.testing.apache_kafka import java_and_maven_available

        return "apache" if java_and_maven_available() else "tansu"
    except Exception:  # noqa: BLE001 - no choice possible: tansu
        return "tansu"


def _int_list(text: str, what: str) -> list[int]:
    try:
        out = [int(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what}: comma-separated integers expected, got {text!r}") from None
    if not out or any(x <= 0 for x in out):
        raise argparse.ArgumentTypeError(f"{what}: positive integers expected, got {text!r}")
    return list(dict.fromkeys(out))


def auto_driver_memory(rows: int, key_size: int, value_size: int, values: int = 1, pooled: int = 0) -> str:
    """Room for the cached DataFrames (~2.5x their bytes with the broadcast pool and overhead) plus
    1 GiB; 2g (the old fixed default) for the default 110-byte records.  ``values``: value
    columns cached per row (a format's rows hold the struct and, when written, its bytes: 2);
    ``pooled``: rows of the registry formats' pools, broadcast on the driver one after another
    with their struct and bytes (4x their bytes while the broadcast is built)."""
    need = (rows * (key_size + values * value_size) * 2.5 + pooled * 2 * value_size * 4) / (1 << 30)
    return f"{max(2, math.ceil(need) + 1)}g"


# ------------------------------------------------------------------------------------- CLI


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.run",
        description="Throughput/memory benchmark of sparkkafka_sink against other Python Kafka "
                    "producers and Spark write paths, on a local broker (Apache Kafka, tansu or noida).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help=f"smoke-test sizes: --records {QUICK['records']}, --spark-rows {QUICK['spark_rows']} "
                         "(explicit --records/--spark-rows still win)")
    ap.add_argument("--matrix", action="store_true",
                    help=f"the Apache Kafka matrix: --value-size {MATRIX['value_sizes']} --partitions "
                         f"{MATRIX['partitions']} --compression {MATRIX['compression']} --contenders "
                         f"{MATRIX['contenders']} (explicit flags still win); one table of rows/s and broker "
                         "CPU s per million rows")
    ap.add_argument("--avro-matrix", action="store_true",
                    help=f"the Avro matrix: as --matrix with --partitions {AVRO_MATRIX['partitions']} --contenders "
                         f"{AVRO_MATRIX['contenders']} (a Schema Registry is started for them)")
    ap.add_argument("--protobuf-matrix", action="store_true",
                    help=f"the Protobuf matrix: as --matrix with --partitions {PROTOBUF_MATRIX['partitions']} "
                         f"--contenders {PROTOBUF_MATRIX['contenders']} (a Schema Registry is started for them)")
    ap.add_argument("--records", type=int, default=argparse.SUPPRESS,
                    help="records per standalone run (default: 1000000; 50000 with --quick)")
    ap.add_argument("--spark-rows", type=int, default=argparse.SUPPRESS,
                    help="DataFrame rows per Spark run (default: 2000000; 100000 with --quick)")
    ap.add_argument("--compression", default=argparse.SUPPRESS,
                    help="comma-separated codecs (none,gzip,snappy,lz4,zstd) (default: none,lz4; none with --matrix)")
    ap.add_argument("--contenders", default=argparse.SUPPRESS,
                    help="all | standalone | limit | spark | names, comma-separated (default: all; with --matrix "
                         f"{MATRIX['contenders']}): " + ", ".join(CONTENDERS) + "; "
                         + ", ".join(n for n, c in CONTENDERS.items() if not c.grouped)
                         + " are in no group: name them (with spark-pyprod, for their cost)")
    ap.add_argument("--broker", choices=BROKERS, default=default_broker(),
                    help="broker to start: apache (Apache Kafka from Maven jars, 1 node; the default when java "
                         "and mvn are on PATH), tansu or noida (embedded)")
    ap.add_argument("--bootstrap", default=None,
                    help="use this running broker instead of starting one (--broker then names its kind, "
                         "which decides how counts are read)")
    ap.add_argument("--security", action="store_true",
                    help=f"start Apache Kafka with a {SECURED_LISTENER} listener ({SASL_MECHANISM}, a throw-away "
                         "test CA) beside PLAINTEXT; implied when a selected contender writes over it "
                         "(spark-pyprod-sasl-ssl)")
    ap.add_argument("--out", default="benchmarks/results", help="output directory (relative: to the repository)")
    ap.add_argument("--rounds", type=int, default=1, help="runs per standalone contender (best counts)")
    ap.add_argument("--spark-rounds", type=int, default=2, help="runs per Spark contender (best counts)")
    g = ap.add_argument_group("data")
    g.add_argument("--key-size", type=int, default=10)
    g.add_argument("--value-size", "--value-sizes", dest="value_size", default=argparse.SUPPRESS, metavar="BYTES",
                   help="value bytes; several, comma-separated, make a matrix (default: 100; with --matrix "
                        f"{MATRIX['value_sizes']})")
    g.add_argument("--pool-size", type=int, default=100_000, help="distinct records, cycled")
    g.add_argument("--partitions", default=argparse.SUPPRESS, metavar="N",
                   help="partitions of each fresh topic; several, comma-separated, make a matrix (default: 4; "
                        f"with --matrix {MATRIX['partitions']})")
    g.add_argument("--seed", type=int, default=42)
    g = ap.add_argument_group("producer settings (the same for every client)")
    g.add_argument("--configs", default=None,
                   help="client configurations, comma-separated: tuned (the three settings below for every "
                        "client; buffer.memory raised to partitions x batch.size when that is more, as Java's "
                        "documentation asks) and/or defaults (each client's own linger, batch size and "
                        "buffer) (default: tuned; with --matrix defaults,tuned)")
    g.add_argument("--linger-ms", type=int, default=5, help="tuned: linger.ms of every client")
    g.add_argument("--batch-size", type=int, default=262144, help="tuned: batch.size of every client")
    g.add_argument("--buffer-memory", type=int, default=128 * MiB,
                   help="tuned: buffer.memory of every client (at least partitions x batch.size)")
    g.add_argument("--max-in-flight", type=int, default=5)
    g.add_argument("--no-idempotence", action="store_true", help="enable.idempotence=false everywhere")
    g.add_argument("--arrow-batch", type=int, default=10_000,
                   help="rows per send_batch() call; also spark.sql.execution.arrow.maxRecordsPerBatch")
    g.add_argument("--replay-inflight", type=int, default=5, help="pipelined requests of the replay limit")
    g.add_argument("--replay-repeats", type=int, default=3, help="replay passes at least (more until 2 s were spent; the fastest counts)")
    g = ap.add_argument_group("spark")
    g.add_argument("--spark-master", default="local[2]")
    g.add_argument("--spark-partitions", type=int, default=2, help="DataFrame partitions (= write tasks)")
    g.add_argument("--spark-driver-memory", default=argparse.SUPPRESS,
                   help="default: 2g, more when the cached DataFrame needs it (rows x record bytes x 2.5 + 1g)")
    g.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark conf")
    g.add_argument("--sink-option", action="append", default=[], metavar="KEY=VALUE",
                   help="an option of pyprod-kafka's beyond the shared producer settings (e.g. coalesceBytes=16777216), "
                        "for studies of the sink's own settings")
    g = ap.add_argument_group("harness")
    g.add_argument("--timeout", type=float, default=1800, help="seconds per standalone child")
    g.add_argument("--spark-timeout", type=float, default=7200, help="seconds for the whole Spark process")
    g.add_argument("--progress-interval", type=float, default=1.0, help="seconds between progress lines")
    g.add_argument("--rss-slack-mb", type=float, default=DEFAULT_RSS_SLACK_MB,
                   help="the memory target's constant: net RSS <= buffer.memory + this")
    g.add_argument("--alternate", action=argparse.BooleanOptionalAction, default=None,
                   help="Spark: run the contenders' rounds alternately (r1 of each, r2 of each, ...) instead of "
                        "each contender's back to back (default: alternate with --matrix)")
    g.add_argument("--keep-topics", action="store_true", help="do not delete each run's topic afterwards")
    g.add_argument("--profile-workers", default=None, metavar="DIR",
                   help="sample our Spark writes' Python workers with py-spy into DIR (benchmarks.profile --spark "
                        "reads them)")
    g.add_argument("--no-chart", action="store_true", help="skip results.png")
    args = ap.parse_args(argv)
    if getattr(args, "records", None) is None:
        args.records = QUICK["records"] if args.quick else 1_000_000
    if getattr(args, "spark_rows", None) is None:
        args.spark_rows = QUICK["spark_rows"] if args.quick else 2_000_000
    if args.avro_matrix and args.protobuf_matrix:
        ap.error("--avro-matrix and --protobuf-matrix are two runs: choose one")
    preset = AVRO_MATRIX if args.avro_matrix else PROTOBUF_MATRIX if args.protobuf_matrix else MATRIX
    m = args.matrix or args.avro_matrix or args.protobuf_matrix
    if getattr(args, "compression", None) is None:
        args.compression = preset["compression"] if m else "none,lz4"
    if getattr(args, "contenders", None) is None:
        args.contenders = preset["contenders"] if m else "all"
    try:
        args.value_sizes = _int_list(getattr(args, "value_size", preset["value_sizes"] if m else "100"), "--value-size")
        args.partitions_list = _int_list(getattr(args, "partitions", preset["partitions"] if m else "4"), "--partitions")
    except argparse.ArgumentTypeError as e:
        ap.error(str(e))
    args.sink_options = {}
    for pair in args.sink_option:
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            ap.error(f"--sink-option takes KEY=VALUE, not {pair!r}")
        args.sink_options[key.strip()] = value
    # the first cell's: what the template spec, the single-cell tables and the chart use
    args.value_size, args.partitions = args.value_sizes[0], args.partitions_list[0]
    if args.alternate is None:
        args.alternate = m
    args.configs = [c.strip() for c in (args.configs or ("defaults,tuned" if m else "tuned")).split(",") if c.strip()]
    if set(args.configs) - set(CONFIGS):
        ap.error(f"--configs takes {', '.join(CONFIGS)}, got {','.join(args.configs)}")
    args.cells = [(v, p, c) for c in args.configs for v in args.value_sizes for p in args.partitions_list]
    args.matrix = m or len(args.cells) > 1
    args.compressions = [c.strip().lower() for c in args.compression.split(",") if c.strip()]
    try:
        args.names = resolve(args.contenders)
    except ValueError as e:
        ap.error(str(e))
    if getattr(args, "spark_driver_memory", None) is None:
        rows = {CONTENDERS[n].rows for n in args.names if CONTENDERS[n].group == "spark"}
        # binary rows: 1 value; a format's: its struct, and its bytes where a -bytes contender runs
        formats = {r.removesuffix("-bytes") for r in rows if r != "binary"}
        values = ("binary" in rows or not rows) + len(formats) + sum(f"{f}-bytes" in rows for f in formats)
        pooled = len(formats) * min(args.pool_size, args.spark_rows)
        args.spark_driver_memory = auto_driver_memory(args.spark_rows, args.key_size, max(args.value_sizes), values,
                                                      pooled)
    if args.security and (args.bootstrap or args.broker != "apache"):
        ap.error("--security needs the harness's own Apache Kafka (--broker apache, no --bootstrap)")
    # a secured broker when asked for, or when a selected contender needs one and it can be had
    # (else those contenders are skipped with the reason)
    args.secured = args.security or (any(CONTENDERS[n].security for n in args.names)
                                     and not args.bootstrap and args.broker == "apache")
    return args


def template_spec(args, bootstrap: str) -> BenchSpec:
    return BenchSpec(contender="", bootstrap=bootstrap, broker=args.broker, topic="", partitions=args.partitions,
                     records=args.records, key_size=args.key_size, value_size=args.value_size,
                     pool_size=args.pool_size, seed=args.seed, linger_ms=args.linger_ms,
                     batch_size=args.batch_size, buffer_memory=args.buffer_memory,
                     max_in_flight=args.max_in_flight, idempotence=not args.no_idempotence,
                     arrow_batch=args.arrow_batch, replay_inflight=args.replay_inflight,
                     replay_repeats=args.replay_repeats,
                     progress_interval=args.progress_interval, sink_options=args.sink_options)


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


def cell_spec(template: BenchSpec, value_size: int, partitions: int, config: str) -> BenchSpec:
    """The template for one matrix cell: its record size, topic partitions and configuration
    (tuned: buffer.memory raised to partitions x batch.size where that is more)."""
    return dataclasses.replace(template, value_size=value_size, partitions=partitions, config=config,
                               buffer_memory=fair_buffer_memory(partitions, template.batch_size, template.buffer_memory))


def run_standalone(args, template: BenchSpec, name: str, comp: str, rnd: int,
                   cell: tuple[int, int, str] | None = None) -> dict:
    value_size, partitions, config = cell or (template.value_size, template.partitions, template.config)
    where = f" {config} v{value_size} p{partitions}" if args.matrix else ""
    label = f"{name} {comp}{where}" + (f" r{rnd}/{args.rounds}" if args.rounds > 1 else "")
    topic = new_topic(f"{name}-{comp}")
    spec = dataclasses.replace(cell_spec(template, value_size, partitions, config), contender=name,
                               compression=comp, topic=topic, label=label)
    ready_s = create_topic(spec.bootstrap, topic, spec.partitions)
    requests = RequestMeter(probe_for(spec.broker_jmx))
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
    requests.stop()
    res.setdefault("group", CONTENDERS[name].group)
    res.update(round=rnd, records=args.records, topic=topic, value_size=value_size, partitions=partitions,
               config=config, topic_ready_s=ready_s,
               buffer_memory=spec.buffer_memory if config == "tuned" else None)
    if res.get("status") not in ("skipped",):
        n, how = count_landed(spec.bootstrap, topic, spec.partitions, spec.broker)
        res.update(landed=n, verified_by=how)
    census = batch_census(spec.broker_log_dir, topic)
    if census:
        res["stored_batches"] = census
    clock_s = sum(res.get("pass_s") or []) or res.get("elapsed_s")  # the replay times each of its passes
    figures = requests.figures(clock_s, (census or {}).get("batches"))
    if figures:
        res["broker_requests"] = figures
    if not args.keep_topics:
        delete_topic(spec.bootstrap, topic, spec.broker_log_dir)
    return res


def run_spark(args, template: BenchSpec, names: list[str], spark_jars: list[str] | None = None,
              unavailable: dict | None = None, security: dict | None = None) -> tuple[list[dict], dict]:
    """``security``: the secured listener's bootstrap and ``kafka.*`` options, for the contenders
    writing over it (passed to the Spark process in its config)."""
    cfg = {
        "cells": [{"value_size": v, "partitions": p, "config": c} for v, p, c in args.cells],
        "spark_jars": spark_jars or [],
        "unavailable": unavailable or {},
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
        "alternate": args.alternate,
        "profile_dir": args.profile_workers,
    }
    if security:
        cfg["security"] = security
    with tempfile.NamedTemporaryFile(prefix="bench-spark-", suffix=".json", delete=False) as f:
        result_path = f.name
    try:
        log(f"== spark ({args.spark_master}, driver memory {args.spark_driver_memory}): {len(names)} contender(s) "
            f"x {len(args.compressions)} codec(s) x {args.spark_rounds} round(s)"
            + (f" x {len(args.cells)} cells" if len(args.cells) > 1 else "") + f", {args.spark_rows:,} rows each")
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
    r.setdefault("value_size", args.value_size)
    r.setdefault("partitions", args.partitions)
    if r.get("status") == "ok" and r.get("elapsed_s"):
        r["records_per_s"] = records / r["elapsed_s"]
        r["mb_per_s"] = records * (args.key_size + r["value_size"]) / r["elapsed_s"] / MB
    if r.get("cpu_broker_s") is not None and records:
        # per million records the run wrote (the replay writes records x passes under one meter)
        r["broker_cpu_s_per_m"] = round(r["cpu_broker_s"] / (r.get("expected_landed") or records) * 1e6, 3)
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


def _cell(r: dict) -> tuple:
    return r.get("value_size"), r.get("partitions"), r.get("config", "tuned")


def _by_cell(results: list[dict]) -> dict:
    """Results keyed by ``(contender, codec, value size, partitions, config)``."""
    return {(r["contender"], r["compression"], *_cell(r)): r for r in results}


def aggregate(runs: list[dict], args) -> list[dict]:
    """Best OK round per (contender, compression, value size, partitions), plus every round's
    rate.  Ordered by cell, then contender, then compression."""
    best: dict[tuple, dict] = {}
    rounds: dict[tuple, list] = {}
    for r in runs:
        key = (r["contender"], r["compression"], *_cell(r))
        rounds.setdefault(key, []).append({k: r.get(k) for k in ("round", "status", "elapsed_s", "records_per_s",
                                                                 "cpu_broker_s", "landed", "note")})
        cur = best.get(key)
        ok = r.get("status") == "ok"
        if cur is None or (ok and (cur.get("status") != "ok" or r["records_per_s"] > cur["records_per_s"])):
            best[key] = r
    out = []
    for cell in args.cells:
        for name in CONTENDERS:
            for comp in args.compressions:
                r = best.get((name, comp, *cell))
                if r is None:
                    continue
                r = dict(r)
                r["rounds"] = rounds[(name, comp, *cell)]
                r.pop("round", None)
                out.append(r)
    # ratio to ours: each group's reference contender, same compression and cell
    by = _by_cell(out)

    def rate(name, comp, cell):
        x = by.get((name, comp, *cell))
        return x.get("records_per_s") if x and x.get("status") == "ok" else None

    for r in out:
        group = r.get("group") or CONTENDERS[r["contender"]].group
        ref, cell = CONTENDERS[r["contender"]].reference or REFERENCE[group], _cell(r)
        if group == "limit" and rate(ref, r["compression"], cell) is None:
            ref = "ours-send"
        ref_rate, mine = rate(ref, r["compression"], cell), r.get("records_per_s")
        r["reference"] = ref
        r["ratio_to_ours"] = mine / ref_rate if (mine and ref_rate and r.get("status") == "ok") else None
        if group == "limit" and mine and r.get("status") == "ok":
            r["ours_share"] = {o: (rate(o, r["compression"], cell) / mine if rate(o, r["compression"], cell) else None)
                               for o in ("ours-send", "ours-batch")}
    return out


def free_sink_s(floor_s: float, floor_cpu_s: float, broker_cpu_s: float, cpus: int) -> float:
    """The fastest a sink that cost nothing itself could write what the no-op floor's run read
    (in ``floor_s``, spending ``floor_cpu_s``): it still pays the floor's CPU and the broker's
    (``broker_cpu_s``, as a real sink made it work) on the same ``cpus``, so
    ``max(floor time, (floor CPU + broker CPU) / cpus)``."""
    return max(floor_s, (floor_cpu_s + broker_cpu_s) / cpus)


def sink_call_bytes(sink_options: dict) -> int:
    """The bytes of one ``pyprod-kafka`` call (``coalesceBytes``, the run's or the sink's default)."""
    from sparkkafka_sink.spark.option_catalog import SinkSettings

    value = {k.lower(): v for k, v in sink_options.items()}.get("coalescebytes")
    return SinkSettings.coalesce_bytes.key.parse(value)


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
        # the sink also holds one call of rows and their encoded copy (coalesceBytes each)
        call_mb = sink_call_bytes(getattr(args, "sink_options", {})) / MiB
        sink_budget = budget + 2 * call_mb
        sp, floor = get("spark-pyprod", comp, "peak_rss_mb"), spark_floor_mb
        extra = sp - floor if sp is not None and floor is not None else None
        out.append({"target": f"spark-pyprod worker RSS over a fresh worker's <= buffer.memory + 2 x coalesceBytes "
                              f"+ {args.rss_slack_mb:g} MiB ({sink_budget:g} MiB)",
                    "compression": comp, "value": extra, "goal": sink_budget, "unit": "MiB",
                    "pass": None if extra is None else extra <= sink_budget})
        # what a sink that cost nothing could reach, with the broker working as in our run
        noop_s, noop_cpu = get("spark-noop", comp, "elapsed_s"), get("spark-noop", comp, "cpu_machine_s")
        broker_cpu, cpus = get("spark-pyprod", comp, "cpu_broker_s"), os.cpu_count() or 1
        ceiling_s = (free_sink_s(noop_s, noop_cpu, broker_cpu, cpus)
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


def _pair_detail(pair: str, r: dict) -> str | None:
    """What the variant of a cost pair changed, as its result records it."""
    if pair == "tls":
        return r.get("listener")
    if pair == "exactly-once":
        return f"deliveryGuarantee={r.get('delivery') or 'exactly-once'}"
    if pair in ("avro", "protobuf"):
        return f"valueFormat={pair} against the same bytes pre-encoded"
    if pair == "avro-beside-protobuf":
        return "valueFormat=avro against Protobuf's pre-encoded values of the same size"
    return None


def costs(results: list[dict]) -> list[dict]:
    """The cost of each variant of ``COST_PAIRS`` per (codec, cell) where it ran: its best round's
    rows/s over its baseline's (``spark-pyprod``), both measured in this run on the same broker,
    with the CPU seconds (machine and broker) of those rounds and every round's rows/s.  A pair's
    rounds alternate (``benchmarks.contenders.spark.schedule``), so each round also gives a ratio
    of two neighbouring runs: ``round_ratios`` and their median, steadier than one ratio of
    bests.  ``target``/``met``: the median's goal, where there is one (``COST_TARGETS``)."""
    by = _by_cell(results)

    def ok(r):
        return r is not None and r.get("status") == "ok" and r.get("records_per_s")

    def rounds(r):
        return [x.get("records_per_s") for x in (r or {}).get("rounds", []) if x.get("status") == "ok"]

    def by_round(r):
        return {x.get("round"): x.get("records_per_s") for x in (r or {}).get("rounds", [])
                if x.get("status") == "ok" and x.get("records_per_s")}

    # a contender in several pairs (spark-pyprod-avro: over Avro's or Protobuf's pre-encoded
    # bytes) reports only those whose baseline ran
    members = [p.contender for p in COST_PAIRS.values()]
    shared = {n for n in members if members.count(n) > 1}
    out = []
    for key, pair in COST_PAIRS.items():
        for r in results:
            if r["contender"] != pair.contender:
                continue
            base = by.get((pair.baseline, r["compression"], *_cell(r)))
            if base is None and pair.contender in shared:
                continue  # another pair of this contender's measures it (its baseline ran)
            entry = {"pair": key, "label": pair.label, "contender": pair.contender, "baseline": pair.baseline,
                     "detail": _pair_detail(key, r), "compression": r["compression"],
                     "value_size": r.get("value_size"), "partitions": r.get("partitions"),
                     "contender_rows_per_s": r.get("records_per_s") if ok(r) else None,
                     "baseline_rows_per_s": base.get("records_per_s") if ok(base) else None,
                     "contender_rounds_rows_per_s": rounds(r), "baseline_rounds_rows_per_s": rounds(base)}
            for field in ("cpu_machine_s", "cpu_broker_s"):
                entry[f"contender_{field}"] = r.get(field) if ok(r) else None
                entry[f"baseline_{field}"] = base.get(field) if ok(base) else None
            a, b = entry["contender_rows_per_s"], entry["baseline_rows_per_s"]
            entry["ratio"] = a / b if a and b else None
            cr, br = by_round(r), by_round(base)
            entry["round_ratios"] = [cr[k] / br[k] for k in sorted(k for k in cr if k in br and k is not None)]
            entry["median_round_ratio"] = statistics.median(entry["round_ratios"]) if entry["round_ratios"] else None
            if key in COST_TARGETS:
                entry["target"] = COST_TARGETS[key]
                m = entry["median_round_ratio"]
                entry["met"] = None if m is None else m >= entry["target"]
            if entry["ratio"] is None:
                entry["why_none"] = "; ".join(f"{n}: {(x or {}).get('status', 'not run')}"
                                              for n, x in ((pair.contender, r), (pair.baseline, base)) if not ok(x))
            out.append(entry)
    return out


def _legacy_tls_cost(c: dict) -> dict:
    """An entry of an older results.json's ``tls_cost`` in the shape of ``costs``."""
    out = {"pair": "tls", "label": "TLS+SASL", "contender": c.get("secured"), "baseline": c.get("plaintext"),
           "detail": c.get("listener")}
    for k, v in c.items():
        if k.startswith("secured_"):
            out["contender_" + k[len("secured_"):]] = v
        elif k.startswith("plaintext_"):
            out["baseline_" + k[len("plaintext_"):]] = v
        elif k not in ("secured", "plaintext", "listener"):
            out[k] = v
    return out


def doc_costs(doc: dict) -> list[dict]:
    """``costs`` of a results.json, or its ``tls_cost`` (written before there were other pairs)."""
    return doc.get("costs") or [_legacy_tls_cost(c) for c in doc.get("tls_cost") or []]


def _cost_lines(doc: dict, cells: bool = False) -> list[str]:
    """One line per pair and codec (and cell): "cost of <label>: variant / baseline = x"."""
    lines = []
    for c in doc_costs(doc):
        where = f"{_size_label(c['value_size'])} values, {c['partitions']} partitions, " if cells else ""
        what = c.get("detail") or (SECURED_LISTENER if c.get("pair") == "tls" else c.get("pair"))
        head = (f"**Cost of {c['label']}** ({where}{c['compression']}; {what}, "
                f"same broker, same run): `{c['contender']}` / `{c['baseline']}` = ")
        if c["ratio"] is None:
            lines.append(head + f"– (not measured: {c.get('why_none')})")
            continue
        cpu = ""
        if c.get("contender_cpu_machine_s") is not None and c.get("baseline_cpu_machine_s") is not None:
            cpu = (f"; CPU s of the whole machine {c['contender_cpu_machine_s']:.1f} vs "
                   f"{c['baseline_cpu_machine_s']:.1f}")
            if c.get("contender_cpu_broker_s") is not None and c.get("baseline_cpu_broker_s") is not None:
                cpu += f", of which the broker {c['contender_cpu_broker_s']:.1f} vs {c['baseline_cpu_broker_s']:.1f}"
        per_round = ""
        if len(c.get("round_ratios") or []) > 1:
            per_round = (f"; round by round {', '.join(f'{x:.2f}' for x in c['round_ratios'])}, "
                         f"median {c['median_round_ratio']:.2f}")
        goal = ""
        if c.get("target") is not None and c.get("median_round_ratio") is not None:
            goal = (f" Target: median ≥ {c['target']:.2f}, "
                    + ("met." if c.get("met") else "**not met**."))
        lines.append(head + f"**{c['ratio']:.2f}** ({c['contender_rows_per_s']:,.0f} vs "
                     f"{c['baseline_rows_per_s']:,.0f} rows/s, best rounds{cpu}{per_round})." + goal)
    return lines + [""] if lines else []


# --------------------------------------------------------------------------------- outputs


def _fmt(v, spec=".2f", none="–"):
    return none if v is None else format(v, spec)


def _broker_desc(meta: dict) -> str:
    b = f"**{meta['broker']}**"
    if meta.get("broker_version"):
        b += f" {meta['broker_version']}"
    if meta["broker"] == "apache":
        b += " (1 node, KRaft)"
    sec = meta.get("security")
    if sec:
        b += f" with a {sec['listener']} listener ({sec['mechanism']} as {sec['user']}, test CA)"
    return b


def _setup_lines(meta: dict) -> list[str]:
    """Which Spark modules' jars the JVM contenders ran with, and the registry contenders' checks."""
    lines = []
    for key, what in (("spark_kafka", "Spark's Kafka sink (`spark-jvm-kafka`, `spark-jvm-avro`)"),
                      ("spark_avro", "Spark's Avro functions (`spark-jvm-avro`)")):
        sk = meta.get(key) or {}
        if sk.get("resolved"):
            from sparkkafka_sink.testing.spark_jars import describe

            lines += [f"{what}: {describe(sk)}.", ""]
        elif sk.get("error"):
            lines += [f"{what} not available: {sk['error'][:300]}", ""]
    return lines + _registry_lines(meta)


#: the formats written through the Schema Registry: their name in the results
REGISTRY_FORMATS = {"avro": "Avro", "protobuf": "Protobuf"}


def identity_checks(meta: dict) -> list[dict]:
    """Every format's checks that its contenders wrote the pool's bytes (``meta.spark``)."""
    spark = meta.get("spark") or {}
    return [c for fmt in REGISTRY_FORMATS for c in spark.get(f"{fmt}_identity", [])]


def _registry_lines(meta: dict) -> list[str]:
    """The Schema Registry and the check that every contender of a format wrote the same bytes
    (Protobuf: the same message bytes, after the header)."""
    reg = meta.get("schema_registry") or {}
    if not reg:
        return []
    if reg.get("error"):
        return [f"Schema Registry not available: {reg['error'][:300]}", ""]
    spark = meta.get("spark") or {}
    formats = [f for f in REGISTRY_FORMATS if spark.get(f"{f}_identity")] or ["avro"]
    line = (f"{', '.join(REGISTRY_FORMATS[f] for f in formats)}: {reg['kind']} {reg['version']} (Confluent's API) "
            "as the Schema Registry.")
    for fmt in formats:
        checks = spark.get(f"{fmt}_identity", [])
        what = "message bytes (after the 6-byte header)" if any(c.get("body_only") for c in checks) else "bytes"
        if checks and all(c.get("identical") for c in checks):
            names = ", ".join(f"`{n}`" for n in dict.fromkeys(n for c in checks for n in c["contenders"]))
            sizes = ", ".join(_size_label(v) for v in dict.fromkeys(c["value_size"] for c in checks))
            line += (f" {REGISTRY_FORMATS[fmt]}: the {what} the sink's encoder makes of the first "
                     f"{checks[0]['rows']:,} rows, written by each of {names} ({sizes} values; {len(checks)} "
                     f"check{'s' if len(checks) > 1 else ''}, schema id "
                     f"{', '.join(str(i) for i in dict.fromkeys(c['pool_schema_id'] for c in checks))}).")
            other = {n: ids for c in checks for n, x in c["contenders"].items()
                     if (ids := [i for i in x.get("schema_ids", []) if i != c["pool_schema_id"]])}
            if other:
                line += (" Ids of schemas registered by the contenders themselves: "
                         + ", ".join(f"`{n}` {', '.join(map(str, ids))}" for n, ids in other.items()) + ".")
        for c in checks:
            if not c.get("identical"):
                line += (f" {REGISTRY_FORMATS[fmt]} {_size_label(c['value_size'])} values: **the contenders' {what} "
                         f"differ** ({json.dumps(c['contenders'])[:400]}).")
    return [line, ""]


def _run_table(results: list[dict], cells: bool = False) -> list[str]:
    """One row per (best) run; ``cells``: with value size and partitions columns (the matrix)."""
    head = "| contender | " + ("config | value B | partitions | " if cells else "") + (
        "codec | records/s | MB/s | peak RSS MB | net RSS MB | CPU s (broker) | broker CPU s / M rows "
        "| ratio to ours | landed ok | note |")
    lines = [head, "|---|" + ("---|---:|---:|" if cells else "") + "---|---:|---:|---:|---:|---:|---:|---:|:---:|---|"]
    for r in results:
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
        if r.get("peak_rss_mb") is None and r.get("jvm_peak_mb") is not None and r.get("status") == "ok":
            note = (note + "; " if note else "") + f"JVM only (JVM peak {r['jvm_peak_mb']:.0f} MB)"
        cpu = _fmt(r.get("cpu_machine_s"), ".1f")
        if r.get("cpu_broker_s") is not None:
            cpu += f" ({r['cpu_broker_s']:.1f})"
        where = [r.get("config", "tuned"), str(r.get("value_size")), str(r.get("partitions"))] if cells else []
        cols = [r["contender"], *where, r["compression"],
                _fmt(r.get("records_per_s"), ",.0f"), _fmt(r.get("mb_per_s"), ".1f"),
                _fmt(r.get("peak_rss_mb"), ".0f"), _fmt(r.get("net_rss_mb"), ".0f"), cpu,
                _fmt(r.get("broker_cpu_s_per_m"), ".2f"), ratio_s,
                {True: "yes", False: "NO"}.get(r.get("verified"), "–"), note.replace("|", "/")[:200]]
        lines.append("| " + " | ".join(cols) + " |")
    return lines


def _configs_desc(meta: dict) -> str:
    """What the configurations of a run were, for the tables' first line."""
    parts = []
    for config in meta.get("configs", ["tuned"]):
        if config == "tuned":
            parts.append(f"tuned: linger.ms={meta['linger_ms']}, batch.size={meta['batch_size']}, buffer.memory="
                         f"max({meta['buffer_memory']}, partitions x batch.size) for every client")
        else:
            from sparkkafka_sink.producer.config import BULK_BATCH_SIZE, KEYS
            from sparkkafka_sink.spark.options import SINK_LINGER_MS

            parts.append(f"defaults: each client's own linger.ms, batch size and buffer (ours: send_batch's batches "
                         f"{BULK_BATCH_SIZE}, the sink's linger.ms {SINK_LINGER_MS}, buffer.memory "
                         f"{KEYS['buffer.memory'].default}; "
                         "Java: 16384, 0 ms, 33554432; librdkafka: 1 MB batches, 5 ms, 1 GB queue)")
    if meta.get("sink_options"):
        parts.append("pyprod-kafka also with " + ", ".join(f"{k}={v}" for k, v in meta["sink_options"].items()))
    return "; ".join(parts)


def _cell_of(cell) -> tuple:
    """``(value size, partitions, config)`` of a cell as results.json keeps it (older files: two)."""
    v, p, *c = cell
    return v, p, (c[0] if c else "tuned")


def _size_label(v: int) -> str:
    return f"{v // 1024} KiB" if v >= 1024 and v % 1024 == 0 else f"{v} B"


def median_round_ratio(ours: dict | None, other: dict | None) -> float | None:
    """The median over rounds of ours ÷ other, each round against the same round of the other
    (run next to it when the rounds alternate): steadier than the ratio of two best rounds,
    which a warm or cold broker moment can tip."""
    def rates(r):
        return {x.get("round"): x["records_per_s"] for x in (r or {}).get("rounds", [])
                if x.get("status") == "ok" and x.get("records_per_s") and x.get("round") is not None}
    a, b = rates(ours), rates(other)
    ratios = [a[k] / b[k] for k in a if k in b]
    return statistics.median(ratios) if ratios else None


def matrix_table(doc: dict) -> list[str]:
    """The matrix: per (value size, partitions, codec) the rows/s of every contender, ours over
    each of the others, and the broker's CPU seconds per million rows of each."""
    meta, results = doc["meta"], doc["results"]
    names = [n for n in CONTENDERS if any(r["contender"] == n for r in results)]
    ours = next((n for n in ("spark-pyprod", "spark-pyprod-protobuf", "spark-pyprod-avro", "ours-batch", "ours-send")
                 if n in names), None)
    others = [n for n in names if n != ours] if ours else []
    label = lambda n: MATRIX_LABELS.get(n, n)  # noqa: E731
    by = _by_cell(results)

    def rate_cell(r):
        if r is None:
            return "–"
        if r.get("status") == "ok":
            return _fmt(r.get("records_per_s"), ",.0f")
        return f"**{r.get('status')}**"

    def rate(r):
        return r.get("records_per_s") if r and r.get("status") == "ok" else None

    head = (["config", "value", "partitions", "codec"] + [f"{label(n)} rows/s" for n in names]
            + [f"ours ÷ {label(n)}" for n in others] + [f"broker CPU s/M: {label(n)}" for n in names]
            + [f"records/batch (median): {label(n)}" for n in names])
    lines = ["| " + " | ".join(head) + " |",
             "|---|" + "---:|" * 2 + "---|" + "---:|" * (len(head) - 4)]
    for v, p, c in [_cell_of(cell) for cell in meta["cells"]]:
        for comp in meta["compressions"]:
            row = [c, _size_label(v), str(p), comp]
            rs = {n: by.get((n, comp, v, p, c)) for n in names}
            row += [rate_cell(rs[n]) for n in names]
            for n in others:
                a, b = rate(rs[ours]), rate(rs[n])
                median = median_round_ratio(rs[ours], rs[n])
                row.append((f"{a / b:.2f}×" if a and b else "–")
                           + (f" ({median:.2f}×)" if median is not None else ""))
            for n in names:
                row.append(_fmt((rs[n] or {}).get("broker_cpu_s_per_m"), ".2f"))
            for n in names:
                census = (rs[n] or {}).get("stored_batches") or {}
                row.append(_fmt((census.get("records_per_batch") or {}).get("p50"), ",.0f"))
            lines.append("| " + " | ".join(row) + " |")
    return lines


def _per_contender_table(doc: dict, title: str, cell_text) -> list[str]:
    """A table of one text per cell (rows) and contender (columns), for the contenders with any;
    ``cell_text(result)`` is None where a run has nothing to say."""
    meta, results = doc["meta"], doc["results"]
    names = [n for n in CONTENDERS if any(r["contender"] == n and cell_text(r) for r in results)]
    if not names:
        return []
    by = _by_cell(results)
    lines = [title, "", "| " + " | ".join(["config", "value", "partitions", "codec"]
                                          + [MATRIX_LABELS.get(n, n) for n in names]) + " |",
             "|---|---:|---:|---|" + "---|" * len(names)]
    for v, p, c in [_cell_of(cell) for cell in meta["cells"]]:
        for comp in meta["compressions"]:
            row = [c, _size_label(v), str(p), comp]
            row += [cell_text(by.get((n, comp, v, p, c)) or {}) or "–" for n in names]
            lines.append("| " + " | ".join(row) + " |")
    return lines


def cpu_split_table(doc: dict) -> list[str]:
    """Per cell and contender, where the machine's CPU went in the best round: Spark's JVM, its
    Python workers (the sink's write tasks run there) and the broker."""
    def text(r):
        split = r.get("cpu_split_s")
        if not split or r.get("status") != "ok":
            return None
        return " / ".join(_fmt(x, ".1f") for x in (split.get("spark_jvm"), split.get("python_workers"),
                                                   r.get("cpu_broker_s")))
    return _per_contender_table(doc, "CPU seconds of the best round: Spark's JVM / its Python workers / the "
                                     "broker (on 2 cores a run's wall time is at least their sum over 2)", text)


#: where each contender's sink work runs, for ``sink_cpu_per_gb_table``: the Python sinks' in the
#: Python workers (librdkafka inside them, for mapInArrow+confluent), the JVM sink's in Spark's JVM
SINK_CPU_OF = {"spark-pyprod": "python_workers", "spark-jvm-kafka": "spark_jvm",
               "spark-mapinarrow-confluent": "python_workers"}


def sink_cpu_s_per_gb(r: dict, key_size: int) -> float | None:
    """The CPU seconds per GB of keys and values of the process a contender's sink runs in
    (``SINK_CPU_OF``), in its best round; None without the split or a verified run."""
    where = SINK_CPU_OF.get(r.get("contender", ""))
    split = r.get("cpu_split_s") or {}
    gb = (r.get("records") or 0) * (key_size + (r.get("value_size") or 0)) / 1e9
    if where is None or r.get("status") != "ok" or not split.get(where) or not gb:  # (0: not measured)
        return None
    return split[where] / gb


def sink_cpu_per_gb_table(doc: dict) -> list[str]:
    """Per cell, the CPU per GB of the process each sink runs in: ours' Python workers, the JVM
    sink's JVM (Spark's own work in it included, as in ours' JVM), librdkafka's Python workers --
    the figure that carries over to a cluster of many cores -- and ours over the JVM sink's."""
    meta, results = doc["meta"], doc["results"]
    by = _by_cell([r for r in results if r.get("status") == "ok"])
    names = [n for n in SINK_CPU_OF if any(r["contender"] == n and r.get("cpu_split_s") for r in results)]
    if "spark-pyprod" not in names:
        return []
    where = {"spark_jvm": "Spark's JVM", "python_workers": "the Python workers"}
    lines = ["CPU seconds per GB of keys and values, best round, of the process each sink runs in: "
             + ", ".join(f"{MATRIX_LABELS.get(n, n)} ({where[SINK_CPU_OF[n]]})" for n in names)
             + "; ours ÷ the JVM sink's", "",
             "| " + " | ".join(["config", "value", "partitions", "codec"] + [MATRIX_LABELS.get(n, n) for n in names]
                               + ["ours ÷ JVM"]) + " |",
             "|---|---:|---:|---|" + "---:|" * (len(names) + 1)]
    for v, p, c in [_cell_of(cell) for cell in meta["cells"]]:
        for comp in meta["compressions"]:
            got = {n: sink_cpu_s_per_gb(by.get((n, comp, v, p, c)) or {}, meta["key_size"]) for n in names}
            if got.get("spark-pyprod") is None:
                continue
            ours, jvm = got["spark-pyprod"], got.get("spark-jvm-kafka")
            lines.append("| " + " | ".join([c, _size_label(v), str(p), comp]
                                           + [_fmt(got[n], ".2f") for n in names]
                                           + [_fmt(ours / jvm if ours is not None and jvm else None, ".2f")]) + " |")
    return lines


def requests_table(doc: dict) -> list[str]:
    """Per cell and contender, the Produce requests the broker counted (JMX, ``broker_requests``):
    requests per second of the run, batches and records per request, mean request size and the
    broker's mean time on one.  Empty when no run has them."""
    def text(r):
        q = r.get("broker_requests")
        if not q:
            return None
        return " · ".join(_fmt(q.get(k), f) for k, f in (
            ("requests_per_s", ",.0f"), ("batches_per_request", ".1f"), ("records_per_request", ",.0f"),
            ("request_kib_mean", ",.0f"), ("total_time_ms_mean", ".1f")))
    return _per_contender_table(doc, "Produce requests as the broker counted them (JMX), best round: requests/s · "
                                     "batches/request · records/request · KiB/request · the broker's mean ms per "
                                     "request", text)


def headroom_table(doc: dict, target: float = 1.5) -> list[str]:
    """Per cell, how far the machine lets ours go past the JVM sink: the no-op floor (Spark
    handing the rows to Python workers that drop them) plus the broker's CPU as ours made it
    work, spread over the machine's CPUs, is the fastest a sink that cost nothing could run;
    the JVM sink's time over that is the ceiling of ours ÷ JVM.  Beside it, the CPU seconds ours
    spent beyond the floor and the broker, and what it may spend to reach ``target`` × the JVM
    sink (negative: not even a free sink would).  Empty without the no-op, ours and the JVM sink."""
    meta, results = doc["meta"], doc["results"]
    cpus = meta.get("cpus") or 1
    by = _by_cell([r for r in results if r.get("status") == "ok"])
    lines = []
    for v, p, c in [_cell_of(cell) for cell in meta["cells"]]:
        for comp in meta["compressions"]:
            ours, jvm, floor = (by.get((n, comp, v, p, c)) for n in ("spark-pyprod", "spark-jvm-kafka", "spark-noop"))
            if not (ours and jvm and floor) or any(r.get("cpu_machine_s") is None for r in (ours, floor)):
                continue
            broker = ours.get("cpu_broker_s") or 0.0
            free_s = free_sink_s(floor["elapsed_s"], floor["cpu_machine_s"], broker, cpus)
            spent = ours["cpu_machine_s"] - floor["cpu_machine_s"] - broker
            budget = cpus * jvm["elapsed_s"] / target - floor["cpu_machine_s"] - broker
            lines.append(f"| {c} | {_size_label(v)} | {p} | {comp} | {jvm['elapsed_s'] / ours['elapsed_s']:.2f}× | "
                         f"{jvm['elapsed_s'] / free_s:.2f}× | {spent:.1f} | {budget:.1f} |")
    if not lines:
        return []
    return [f"How far ours could go on this machine (best rounds): a sink that cost nothing runs no faster than the "
            f"no-op floor's CPU plus the broker's (as ours made it work) over {cpus} CPUs; ours' own CPU beyond both, "
            f"and what {target:g}× the JVM sink would allow it", "",
            f"| config | value | partitions | codec | ours ÷ JVM | a free sink ÷ JVM | ours' CPU s beyond floor "
            f"and broker | CPU s {target:g}× allows |",
            "|---|---:|---:|---|---:|---:|---:|---:|"] + lines


def markdown(doc: dict) -> str:
    meta = doc["meta"]
    if meta.get("matrix"):
        return markdown_matrix(doc)
    lines = [f"Broker {_broker_desc(meta)}, {meta['records']:,} records standalone / {meta['spark_rows']:,} rows "
             f"Spark ({meta['spark_master']}, {meta['spark_partitions']} partitions), "
             f"{meta['key_size']}+{meta['value_size']}-byte records, acks=all, {_configs_desc(meta)}, "
             f"{meta['partitions']} topic partitions; "
             f"load average {meta.get('loadavg_start')} -> {meta.get('loadavg_end')} on {meta.get('cpus')} CPUs"
             f"{' (--quick)' if meta.get('quick') else ''}.",
             ""]
    sp = meta.get("spark") or {}
    if sp:
        lines += [f"Spark: session {sp.get('session_s')} s, DataFrame cached in {sp.get('cache_s')} s, "
                  f"a fresh Python worker's RSS {sp.get('worker_floor_mb')} MB (the floor for the Spark "
                  f"peak RSS column){'; error: ' + sp['error'] if sp.get('error') else ''}.", ""]
    lines += _setup_lines(meta)
    lines += _run_table(doc["results"])
    if doc_costs(doc):
        lines += [""] + _cost_lines(doc)[:-1]
    lines += targets_table(doc["targets"], smoke=bool(meta.get("quick")))
    return "\n".join(lines) + "\n"


def targets_table(targets: list[dict], smoke: bool = False) -> list[str]:
    """The targets as a table; a smoke run's (``--quick``) has too few rows to measure anything,
    and its column says so, so that a "no" there does not read as a failure."""
    column = "met in this smoke run (too few rows to measure: run without --quick)" if smoke else "met"
    lines = ["", f"| target | codec | measured | goal | {column} |", "|---|---|---:|---:|:---:|"]
    for t in targets:
        unit = t.get("unit", "")
        val = _fmt(t["value"], ".1f" if unit else ".2f")
        goal = "–" if t["goal"] is None else f"{t['goal']:g}"
        met = {True: "yes", False: "no" if smoke else "**no**", None: "–"}[t["pass"]]
        lines.append(f"| {t['target']} | {t['compression']} | {val}{' ' + unit if unit and t['value'] is not None else ''}"
                     f" | {goal} | {met} |")
    return lines


def markdown_matrix(doc: dict) -> str:
    meta = doc["meta"]
    sizes = ", ".join(_size_label(v) for v in meta["value_sizes"])
    lines = [f"Matrix on broker {_broker_desc(meta)}: {meta['spark_rows']:,} rows per Spark run "
             f"({meta['spark_master']}, {meta['spark_partitions']} DataFrame partitions, driver memory "
             f"{meta.get('spark_driver_memory')})"
             + (f", {meta['records']:,} records per standalone run" if any(
                 CONTENDERS[n].group != "spark" for n in meta["contenders"]) else "")
             + f"; {meta['key_size']}-byte keys, values of {sizes}; topics of "
             f"{', '.join(str(p) for p in meta['partitions_list'])} partitions; acks=all, idempotence "
             f"{'on' if meta['idempotence'] else 'off'}, max.in.flight={meta['max_in_flight']} for every client; "
             f"{_configs_desc(meta)}; best of {meta['spark_rounds']} "
             f"round(s); load average {meta.get('loadavg_start')} -> {meta.get('loadavg_end')} on "
             f"{meta.get('cpus')} CPUs; {meta.get('duration_s')} s in all"
             f"{' (--quick)' if meta.get('quick') else ''}.", ""]
    lines += _setup_lines(meta)
    sp = meta.get("spark") or {}
    if sp.get("error"):
        lines += [f"Spark process error: {sp['error'][:500]}", ""]
    lines += matrix_table(doc)
    for table in (requests_table(doc), cpu_split_table(doc), sink_cpu_per_gb_table(doc), headroom_table(doc)):
        if table:
            lines += [""] + table
    if doc_costs(doc):
        lines += [""] + _cost_lines(doc, cells=True)[:-1]
    lines += ["", "rows/s: DataFrame rows (records) written per second of the Spark action, best round; "
                  "ours ÷ X: rows/s of pyprod-kafka over X's, best round over best round (in brackets: the median "
                  "of the rounds' ratios, round k of ours over round k of X); broker CPU s/M: the broker process's CPU "
                  "seconds (utime+stime from /proc/<pid>/stat, before/after the run) per million rows; "
                  "records/batch: the median of the batches the broker stored, read from its log segments.",
              "", "### Per run", ""]
    lines += _run_table(doc["results"], cells=True)
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
    for ax, (title, groups) in zip(axes[:, 0], panels, strict=True):
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


@dataclasses.dataclass
class BrokerHandle:
    """The broker this run started: where it listens, the PID whose CPU time is measured, and
    how it is stopped (by that PID; Apache Kafka's files go with it)."""

    kind: str
    bootstrap: str
    pid: int
    stop: object
    version: str | None = None
    config: dict | None = None
    #: with a secured listener: its name, bootstrap, SASL mechanism and user, and the
    #: ``kafka.*`` options of a sink writing over it (``secured_settings``)
    security: dict | None = None


def secured_settings(cluster) -> dict:
    """How a Spark sink writes over ``cluster``'s SASL_SSL listener: its bootstrap and the
    ``kafka.``-prefixed options (truststore = the test CA's PEM, SCRAM-SHA-512 as alice)."""
    user, password = cluster.security.credentials(SASL_MECHANISM)
    return {
        "listener": SECURED_LISTENER,
        "bootstrap": cluster.bootstrap(SECURED_LISTENER),
        "mechanism": SASL_MECHANISM,
        "user": user,
        "options": {
            "kafka.security.protocol": "SASL_SSL",
            "kafka.ssl.truststore.location": str(cluster.security.pki.ca_cert_path),
            "kafka.sasl.mechanism": SASL_MECHANISM,
            "kafka.sasl.jaas.config": f'{_SCRAM_LOGIN_MODULE} required username="{user}" password="{password}";',
        },
    }


def _broker_jmx(broker: BrokerHandle, meta: dict) -> str:
    """A JMX connector on the harness's Apache Kafka for its request metrics (``broker_requests``),
    or "" (the reason in ``meta.broker_jmx``)."""
    if broker.kind != "apache":
        meta["broker_jmx"] = f"none: {broker.kind} has no JMX"
        return ""
    try:
        address = enable_jmx(broker.pid)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        meta["broker_jmx"] = f"none: {exc}"
        log(f"== no broker request metrics: {exc}")
        return ""
    meta["broker_jmx"] = address
    return address


#: Spark modules a contender may need (``Contender.jars``): results.json's meta key, the resolver
#: (``sparkkafka_sink.testing.spark_jars``) and the module's name
SPARK_MODULES = {"kafka": ("spark_kafka", "resolve_spark_kafka", "spark-sql-kafka"),
                 "avro": ("spark_avro", "resolve_spark_avro", "spark-avro")}


def resolve_jars(names: list[str], meta: dict, unavailable: dict) -> list[str]:
    """The jars (``spark.jars``) of the Spark modules ``names`` need, resolved with Maven; a module
    that does not resolve makes its contenders unavailable (skipped with the reason), the rest runs."""
    from sparkkafka_sink.testing import spark_jars

    jars: list[str] = []
    for module, (key, resolver, label) in SPARK_MODULES.items():
        needing = [n for n in names if module in CONTENDERS[n].jars]
        if not needing:
            continue
        try:
            info = getattr(spark_jars, resolver)()
        except Exception as e:  # noqa: BLE001 - those contenders are skipped, the rest runs
            why = f"{label} jars not resolved: {type(e).__name__}: {e}"[:1500]
            meta[key] = {"error": why}
            for n in needing:
                unavailable.setdefault(n, why)
            log(f"== {why[:600]}")
            continue
        meta[key] = info
        jars += [j for j in info["jars"] if j not in jars]
        log(f"== {', '.join(needing)}: {spark_jars.describe(info)}; spark.jars: "
            + ", ".join(os.path.basename(j) for j in info["jars"]))
    return jars


def start_schema_registry(names: list[str], meta: dict, unavailable: dict):
    """A Schema Registry for the registry contenders ``names`` (Apicurio, Confluent's API, in-memory,
    stopped by its PID at the end), or None: they are then skipped with the reason."""
    from sparkkafka_sink.testing.schema_registry import SchemaRegistry, registry_unavailable_reason

    why = registry_unavailable_reason()
    if why is None:
        try:
            registry = SchemaRegistry().start()
        except Exception as e:  # noqa: BLE001 - those contenders are skipped, the rest runs
            why = f"the Schema Registry did not start: {type(e).__name__}: {e}"[:1500]
        else:
            meta["schema_registry"] = {"kind": "Apicurio Registry", "version": registry.version, "url": registry.url,
                                       "pid": registry.pid, "startup_s": round(registry.startup_seconds or 0, 1)}
            log(f"== Apicurio Registry {registry.version} at {registry.url} (pid {registry.pid}) for "
                + ", ".join(names))
            return registry
    meta["schema_registry"] = {"error": why}
    for n in names:
        unavailable.setdefault(n, why)
    log(f"== {', '.join(names)}: skipped, {why[:600]}")
    return None


def start_bench_broker(kind: str, secured: bool = False) -> BrokerHandle:
    """``secured``: Apache Kafka with a SASL_SSL listener too (its PKI in a temporary directory,
    removed when the broker is stopped)."""
    if kind == "apache":
        from sparkkafka_sink.testing.apache_kafka import ApacheKafka

        if not secured:
            cluster = ApacheKafka(nodes=1, broker_config=APACHE_BENCH_CONFIG).start()
            node = cluster.nodes[0]
            return BrokerHandle(kind, cluster.bootstrap_servers, node.pid, cluster.close, cluster.version,
                                dict(node.properties()))
        from sparkkafka_sink.redaction import redact
        from sparkkafka_sink.testing.security import BrokerSecurity, TestPki

        pki_dir = tempfile.mkdtemp(prefix="bench-pki-")
        try:
            security = BrokerSecurity(TestPki(pki_dir, jks=False), listeners=(SECURED_LISTENER,))
            cluster = ApacheKafka(nodes=1, broker_config=APACHE_BENCH_CONFIG, security=security).start()
        except BaseException:
            shutil.rmtree(pki_dir, ignore_errors=True)
            raise

        def stop() -> None:
            try:
                cluster.close()
            finally:
                shutil.rmtree(pki_dir, ignore_errors=True)

        node = cluster.nodes[0]
        # the listener's JAAS config holds the PLAIN users' passwords: not into results.json
        return BrokerHandle(kind, cluster.bootstrap_servers, node.pid, stop, cluster.version,
                            redact(node.properties()), secured_settings(cluster))
    from sparkkafka_sink.testing.brokers import start_broker

    broker = start_broker(kind)
    return BrokerHandle(kind, broker.bootstrap_servers, broker.pid, broker.stop)


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
        "quick": args.quick, "matrix": args.matrix, "broker": args.broker, "records": args.records,
        "spark_rows": args.spark_rows, "compressions": args.compressions, "contenders": args.names,
        "partitions": args.partitions, "value_size": args.value_size,
        "partitions_list": args.partitions_list, "value_sizes": args.value_sizes,
        "cells": [list(c) for c in args.cells], "configs": args.configs,
        "key_size": args.key_size, "pool_size": args.pool_size,
        "linger_ms": args.linger_ms, "batch_size": args.batch_size, "buffer_memory": args.buffer_memory,
        "sink_options": args.sink_options,
        "max_in_flight": args.max_in_flight, "idempotence": not args.no_idempotence,
        "arrow_batch": args.arrow_batch, "replay_inflight": args.replay_inflight,
        "replay_repeats": args.replay_repeats, "rounds": args.rounds,
        "spark_rounds": args.spark_rounds, "spark_master": args.spark_master,
        "spark_partitions": args.spark_partitions, "spark_driver_memory": args.spark_driver_memory,
        "cpus": os.cpu_count(),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()], "versions": versions(),
    }
    try:
        meta["git_commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=str(REPO),
                                            capture_output=True, text=True, timeout=10).stdout.strip() or None
    except Exception:  # noqa: BLE001 - git is optional
        meta["git_commit"] = None

    broker: BrokerHandle | None = None
    registry = None
    runs: list[dict] = []
    t_start = time.perf_counter()
    try:
        unavailable: dict[str, str] = {}
        spark_jars = resolve_jars(spark_names, meta, unavailable)  # before the broker: the first resolve downloads
        registry_names = [n for n in spark_names if CONTENDERS[n].registry]
        if registry_names:
            registry = start_schema_registry(registry_names, meta, unavailable)
        secured_names = [n for n in args.names if CONTENDERS[n].security]
        if secured_names and not args.secured:
            why = (f"needs the harness's own Apache Kafka (--broker apache, no --bootstrap), which it starts "
                   f"with a {SECURED_LISTENER} listener")
            for n in secured_names:
                unavailable[n] = why
            log(f"== {', '.join(secured_names)}: skipped, {why}")
        if args.bootstrap:
            bootstrap = args.bootstrap
            log(f"== using broker at {bootstrap} ({args.broker})")
        else:
            broker = start_bench_broker(args.broker, secured=args.secured)
            bootstrap = broker.bootstrap
            meta["broker_version"] = broker.version
            meta["broker_config"] = broker.config
            log(f"== started {args.broker}{' ' + broker.version if broker.version else ''} at {bootstrap} "
                f"(pid {broker.pid})")
            if broker.security:
                from sparkkafka_sink.redaction import redact

                sec = broker.security
                meta["security"] = dict(sec, options=redact(sec["options"]))
                log(f"== {sec['listener']} listener at {sec['bootstrap']} ({sec['mechanism']} as {sec['user']}, "
                    f"CA {sec['options']['kafka.ssl.truststore.location']}); topics are created, counted and "
                    f"deleted over PLAINTEXT")
        meta["bootstrap"] = bootstrap
        template = template_spec(args, bootstrap)
        if registry is not None:
            template = dataclasses.replace(template, schema_registry=registry.url)
        if broker is not None:
            template = dataclasses.replace(template, broker_pid=broker.pid,
                                           broker_log_dir=(broker.config or {}).get("log.dirs", ""),
                                           broker_jmx=_broker_jmx(broker, meta))
        for rnd in range(1, args.rounds + 1):
            for cell in args.cells:
                for comp in args.compressions:
                    for name in standalone:
                        r = _finish_run(run_standalone(args, template, name, comp, rnd, cell), args)
                        runs.append(r)
                        if r.get("status") == "ok":
                            log(f"   {name} {comp}: {fmt_rate(r['records_per_s'])} rec/s, {r['mb_per_s']:.1f} MB/s, "
                                f"peak RSS {r.get('peak_rss_mb')} MB (net {r.get('net_rss_mb')}), "
                                f"landed {r.get('landed'):,} ({r.get('verified_by')}), "
                                f"broker {r.get('broker_cpu_s_per_m', '?')} CPU s/M")
                        else:
                            log(f"   {name} {comp}: {r.get('status')}: {r.get('note')}")
        if spark_names:
            template = dataclasses.replace(template, records=args.spark_rows)
            spark_runs, spark_meta = run_spark(args, template, spark_names, spark_jars, unavailable,
                                               broker.security if broker is not None else None)
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
        if registry is not None:
            registry.stop()
            log(f"== stopped the Schema Registry (pid {meta['schema_registry']['pid']})")
    meta["finished"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    meta["duration_s"] = round(time.perf_counter() - t_start, 1)
    meta["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    results = aggregate(runs, args)
    floor = (meta.get("spark") or {}).get("worker_floor_mb")
    # the targets are the single-configuration run's; a matrix reports its ratios in its table
    doc = {"meta": meta, "results": results,
           "targets": [] if args.matrix else targets(results, args, floor), "runs": runs}
    measured = costs(results)
    if measured:  # only when a pair's variant ran (or was skipped): other runs' JSON unchanged
        doc["costs"] = measured
    (out_dir / "results.json").write_text(json.dumps(doc, indent=2, default=str))
    (out_dir / "results.md").write_text(markdown(doc))
    charted = not args.no_chart and not args.matrix
    if charted:
        why = chart(doc, out_dir / "results.png")
        if why:
            log(f"== {why}")
    print_summary(doc)
    log(f"== wrote {out_dir / 'results.json'}, results.md" + (", results.png" if charted else "")
        + f" in {meta['duration_s']:.0f}s")
    bad = [r for r in results if r.get("status") not in ("ok", "skipped")]
    differ = [c for c in identity_checks(meta) if not c.get("identical")]
    return 1 if bad or differ or meta.get("interrupted") else 0

if __name__ == "__main__":
    sys.exit(main())
