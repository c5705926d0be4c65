"""The benchmark harness's own logic (``benchmarks/``): contender groups, the cost pairs
(TLS+SASL, exactly-once) and their alternating schedule, the cost lines, and the landed-record
check -- including, on Apache Kafka, that a topic written in transactions is counted by its
committed records (commit markers take offsets) and that missing rows still fail the check."""

from __future__ import annotations

import argparse
import os
import sys
import uuid

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from benchmarks import run
from benchmarks.common import BenchSpec
from benchmarks.contenders import CONTENDERS, COST_PAIRS, GROUPS, resolve
from benchmarks.contenders import spark as spark_contenders

EOS, TLS, PLAIN = "spark-pyprod-eos", "spark-pyprod-sasl-ssl", "spark-pyprod"


# ------------------------------------------------------------------------ contenders, schedule


def test_opt_in_contenders_are_in_no_group_but_resolve_by_name():
    for group in ("all", "spark"):
        assert EOS not in GROUPS[group] and TLS not in GROUPS[group]
        assert PLAIN in GROUPS[group]
    assert resolve(f"{EOS},{PLAIN}") == [PLAIN, EOS]
    assert resolve("pyprod-kafka-eos") == [EOS]
    assert CONTENDERS[EOS].transactional and not CONTENDERS[PLAIN].transactional


def test_cost_pairs_share_the_baseline():
    """spark-pyprod's variants share it; Avro's and Protobuf's costs are over the same bytes
    pre-encoded (Avro's also over Protobuf's pre-encoded values of the same size)."""
    assert {k: (p.contender, p.baseline) for k, p in COST_PAIRS.items()} == {
        "tls": (TLS, PLAIN), "exactly-once": (EOS, PLAIN),
        "avro": ("spark-pyprod-avro", "spark-pyprod-avro-bytes"),
        "protobuf": ("spark-pyprod-protobuf", "spark-pyprod-protobuf-bytes"),
        "avro-beside-protobuf": ("spark-pyprod-avro", "spark-pyprod-protobuf-bytes")}


def test_schedule_alternates_each_pair_and_keeps_others_back_to_back():
    names = resolve(f"{PLAIN},{EOS},spark-noop")
    pairs = spark_contenders.active_pairs(names)
    assert [p.contender for p in pairs] == [EOS]
    assert spark_contenders.schedule(names, 3, pairs) == [
        (PLAIN, 1), (EOS, 1), (PLAIN, 2), (EOS, 2), (PLAIN, 3), (EOS, 3),
        ("spark-noop", 1), ("spark-noop", 2), ("spark-noop", 3)]
    # both variants with the one baseline: baseline r1, each variant r1, baseline r2, ...
    names = resolve(f"{TLS},{EOS},{PLAIN}")
    pairs = spark_contenders.active_pairs(names)
    assert spark_contenders.schedule(names, 2, pairs) == [
        (PLAIN, 1), (TLS, 1), (EOS, 1), (PLAIN, 2), (TLS, 2), (EOS, 2)]
    # a skipped variant makes no pair: the baseline's rounds run back to back
    assert spark_contenders.active_pairs(names, skipped={TLS, EOS}) == []
    assert spark_contenders.schedule(names, 2, []) == [
        (PLAIN, 1), (PLAIN, 2), (TLS, 1), (TLS, 2), (EOS, 1), (EOS, 2)]


def _spec(**kw) -> BenchSpec:
    return BenchSpec(contender=PLAIN, bootstrap="127.0.0.1:9", broker="apache", topic="t", **kw)


def test_eos_options_are_the_plain_ones_plus_exactly_once():
    spec = _spec(compression="lz4")
    plain = spark_contenders._pyprod_options(PLAIN, spec)
    eos = spark_contenders._pyprod_options(EOS, spec)
    assert eos == dict(plain, deliveryGuarantee="exactly-once")


def test_sink_options_reach_pyprod_kafka_only_and_are_stated():
    args = run.parse_args(["--contenders", "spark-pyprod,spark-jvm-kafka", "--sink-option", "coalesceBytes=16777216"])
    spec = run.template_spec(args, "127.0.0.1:9")
    assert spark_contenders._pyprod_options(PLAIN, spec)["coalesceBytes"] == "16777216"
    assert "coalesceBytes" not in spark_contenders._sink_options(spec)  # what Spark's JVM sink gets
    assert run._configs_desc({"configs": ["tuned"], "linger_ms": 5, "batch_size": 1, "buffer_memory": 2,
                              "sink_options": args.sink_options}).endswith("pyprod-kafka also with coalesceBytes=16777216")
    with pytest.raises(SystemExit):
        run.parse_args(["--sink-option", "coalesceBytes"])


def test_eos_is_skipped_where_it_cannot_be_checked():
    import dataclasses

    def cfg(**kw):
        return {"spec": dataclasses.asdict(_spec(**kw))}

    assert "idempotence" in spark_contenders._available(EOS, cfg(idempotence=False))
    tansu = dataclasses.asdict(_spec())
    tansu["broker"] = "tansu"
    assert "read_committed" in spark_contenders._available(EOS, {"spec": tansu})


# ---------------------------------------------------------------------------- costs, markdown


def _args(compressions=("none",)):
    return argparse.Namespace(key_size=10, value_size=100, partitions=4, cells=[(100, 4, "tuned")],
                              compressions=list(compressions))


def _run(name, rnd, rate, cpu=5.0, status="ok", **extra):
    return {"contender": name, "group": "spark", "compression": "none", "records": 2_000_000,
            "value_size": 100, "partitions": 4, "status": status, "round": rnd,
            "elapsed_s": 2_000_000 / rate, "cpu_machine_s": cpu, "cpu_broker_s": 1.0,
            "landed": 2_000_000, **extra}


def _finished(runs):
    return run.aggregate([run._finish_run(r, _args()) for r in runs], _args())


def test_costs_of_both_pairs_with_round_ratios_and_the_eos_target():
    runs = [_run(PLAIN, 1, 600_000), _run(TLS, 1, 540_000, listener="SASL_SSL (SCRAM-SHA-512)"),
            _run(EOS, 1, 480_000, delivery="exactly-once"),
            _run(PLAIN, 2, 500_000), _run(TLS, 2, 500_000, listener="SASL_SSL (SCRAM-SHA-512)"),
            _run(EOS, 2, 475_000, delivery="exactly-once")]
    results = _finished(runs)
    by_pair = {c["pair"]: c for c in run.costs(results)}
    tls, eos = by_pair["tls"], by_pair["exactly-once"]
    assert (tls["contender"], tls["baseline"], tls["label"]) == (TLS, PLAIN, "TLS+SASL")
    assert tls["ratio"] == pytest.approx(540_000 / 600_000)
    assert tls["round_ratios"] == pytest.approx([0.9, 1.0])
    assert "target" not in tls
    assert eos["ratio"] == pytest.approx(480_000 / 600_000)
    assert eos["round_ratios"] == pytest.approx([0.8, 0.95])
    assert eos["median_round_ratio"] == pytest.approx(0.875)
    assert eos["target"] == 0.90 and eos["met"] is False
    assert eos["detail"] == "deliveryGuarantee=exactly-once"

    doc = {"meta": {"matrix": False}, "results": results, "costs": run.costs(results)}
    lines = "\n".join(run._cost_lines(doc))
    assert "**Cost of TLS+SASL** (none; SASL_SSL (SCRAM-SHA-512)" in lines
    assert f"**Cost of exactly-once** (none; deliveryGuarantee=exactly-once, same broker, same run): `{EOS}`" in lines
    assert "median 0.88). Target: median ≥ 0.90, **not met**." in lines


def test_cost_of_a_failed_variant_says_why():
    results = _finished([_run(PLAIN, 1, 600_000), _run(EOS, 1, 1, status="error", note="boom")])
    (eos,) = run.costs(results)
    assert eos["ratio"] is None and eos["why_none"] == f"{EOS}: error"
    assert "not measured" in run._cost_lines({"costs": [eos]})[0]


def test_an_older_results_json_with_tls_cost_still_renders():
    legacy = {"secured": TLS, "plaintext": PLAIN, "listener": "SASL_SSL (SCRAM-SHA-512)",
              "compression": "none", "value_size": 100, "partitions": 4,
              "secured_rows_per_s": 617_240.0, "plaintext_rows_per_s": 663_563.0,
              "secured_cpu_machine_s": 6.3, "plaintext_cpu_machine_s": 5.9,
              "secured_cpu_broker_s": 1.0, "plaintext_cpu_broker_s": 1.1,
              "ratio": 617_240 / 663_563, "round_ratios": [1.17, 0.93], "median_round_ratio": 1.05}
    (line,) = run._cost_lines({"tls_cost": [legacy]})[:-1]
    assert line.startswith(f"**Cost of TLS+SASL** (none; SASL_SSL (SCRAM-SHA-512), same broker, same run): "
                           f"`{TLS}` / `{PLAIN}` = **0.93** (617,240 vs 663,563 rows/s")
    assert "median 1.05" in line


def test_a_smoke_runs_targets_say_they_measure_nothing():
    target = {"target": "Spark ≥ 1.5× mapInArrow", "compression": "none", "value": 1.2, "goal": 1.5, "pass": False}
    full, smoke = run.targets_table([target]), run.targets_table([target], smoke=True)
    assert full[1].endswith("| met |") and full[-1].endswith("| **no** |")
    assert "smoke run (too few rows to measure: run without --quick)" in smoke[1]
    assert smoke[-1].endswith("| no |")  # not in bold: not a failure


def test_no_pair_no_costs():
    assert run.costs(_finished([_run(PLAIN, 1, 600_000)])) == []


# --------------------------------------------------------------------------- the count check


def test_a_count_short_of_the_rows_written_is_a_mismatch():
    r = run._finish_run(_run(EOS, 1, 500_000, landed=1_999_992), _args())
    assert r["status"] == "count-mismatch" and r["verified"] is False
    assert "1,999,992 landed, 2,000,000 sent" in r["note"]
    r = run._finish_run(_run(EOS, 1, 500_000, landed=None, verified_by="read_committed: timed out"), _args())
    assert r["status"] == "unverified"


@pytest.mark.broker
@pytest.mark.transactions
def test_committed_count_on_apache_kafka(apache_kafka):
    """Two committed transactions and an aborted one over 4 partitions: the watermarks count
    markers and aborted records, read_committed counts exactly the committed rows; rows behind an
    open transaction, or rows never written, make the check fail."""
    from benchmarks.common import count_committed, count_landed
    from sparkkafka_sink import Producer
    from sparkkafka_sink.testing.brokers import create_topics
    from sparkkafka_sink.testing.waiting import wait_until

    bootstrap = apache_kafka.bootstrap_servers
    topic = f"bench-count-{uuid.uuid4().hex[:8]}"
    create_topics(bootstrap, {topic: 4}, timeout=30)
    rows = 5_000
    with Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{uuid.uuid4().hex}",
                   "linger.ms": 5, "max.block.ms": 30000}) as p:
        p.init_transactions()
        for _txn in range(2):
            p.begin_transaction()
            p.send_batch(topic, values=[b"v%d" % i for i in range(rows)], keys=[b"k%d" % i for i in range(rows)])
            p.commit_transaction()
        p.begin_transaction()
        p.send_batch(topic, values=[b"a%d" % i for i in range(300)], keys=[b"k%d" % i for i in range(300)])
        p.abort_transaction()

        expected = 2 * rows + 300 + 3 * 4  # 3 markers per partition

        def landed_with_markers():
            # the coordinator writes the abort's markers after answering EndTxn; until a partition
            # has its marker, its end offset as librdkafka asks it (read_committed: the last stable
            # offset) stops before the aborted records
            offsets, how = count_landed(bootstrap, topic, 4, "apache")
            return (offsets, how) if offsets >= expected else None

        offsets, how = wait_until(f"{expected} offsets, the abort's markers written", landed_with_markers,
                                  timeout=30, interval=0.1)
        assert how == "ListOffsets" and offsets == expected
        n, how = count_landed(bootstrap, topic, 4, "apache", committed=True)
        assert n == 2 * rows, how
        assert how.startswith("read_committed (312 of 10,312 offsets")
        ok = run._finish_run({"contender": EOS, "compression": "none", "records": 2 * rows, "status": "ok",
                              "elapsed_s": 1.0, "landed": n}, _args())
        assert ok["status"] == "ok" and ok["verified"]
        missing = run._finish_run({"contender": EOS, "compression": "none", "records": 2 * rows + 1,
                                   "status": "ok", "elapsed_s": 1.0, "landed": n}, _args())
        assert missing["status"] == "count-mismatch"

        # rows of a transaction still open are not counted (and say so)
        p.begin_transaction()
        p.send_batch(topic, values=[b"o%d" % i for i in range(100)], keys=[b"k%d" % i for i in range(100)])
        p.flush()
        n, how = count_committed(bootstrap, topic, 4, timeout=30, settle_timeout=0.5)
        assert n == 2 * rows and "open transaction" in how
        p.commit_transaction()
    n, how = count_landed(bootstrap, topic, 4, "apache", committed=True)
    assert n == 2 * rows + 100, how
    assert count_landed(bootstrap, topic, 4, "tansu", committed=True)[0] is None


# ---------------------------------------------------------------------------- configurations, batches


def test_tuned_gives_every_client_the_same_batching_and_defaults_give_none():
    from benchmarks.common import confluent_config, fair_buffer_memory, kafka_python_config, ours_config

    tuned = _spec(config="tuned", linger_ms=5, batch_size=262144, buffer_memory=128 << 20)
    assert (ours_config(tuned)["linger.ms"], ours_config(tuned)["batch.size"], ours_config(tuned)["buffer.memory"]) \
        == (5, 262144, 128 << 20)
    assert confluent_config(tuned)["queue.buffering.max.kbytes"] == 128 << 10
    assert spark_contenders._sink_options(tuned)["kafka.batch.size"] == "262144"
    defaults = _spec(config="defaults")
    for config in (ours_config(defaults), confluent_config(defaults), kafka_python_config(defaults),
                   spark_contenders._sink_options(defaults)):
        assert not {k for k in config if any(w in k for w in ("linger", "batch.size", "batch_size", "buffer",
                                                              "queue.buffering.max.kbytes"))}, config
        assert config.get("acks", config.get("kafka.acks")) in ("all", -1)  # the same guarantees stay
    # Java's documentation: every partition's open batch reserves batch.size of buffer.memory
    assert fair_buffer_memory(256, 262144, 32 << 20) == 64 << 20
    assert fair_buffer_memory(4, 262144, 128 << 20) == 128 << 20
    args = run.parse_args(["--matrix"])
    assert args.configs == ["defaults", "tuned"] and args.alternate
    assert run.parse_args([]).configs == ["tuned"]


def test_batch_census_reads_the_batches_the_broker_stored(tmp_path):
    from benchmarks.common import batch_census
    from sparkkafka_sink.record.batch import RecordBatchBuilder

    def batch(n):
        b = RecordBatchBuilder(0, 1 << 20)
        for i in range(n):
            b.try_append(1, None, b"v%d" % i)
        return b.build()

    for partition, counts in ((0, [3, 5]), (1, [1])):
        d = tmp_path / f"t-{partition}"
        d.mkdir()
        (d / "00000000000000000000.log").write_bytes(b"".join(batch(n) for n in counts))
        (d / "00000000000000000000.index").write_bytes(b"\0" * 64)  # not a log: not read
    (tmp_path / "other-0").mkdir()
    census = batch_census(str(tmp_path), "t")
    assert census["batches"] == 3
    assert census["records_per_batch"]["p50"] == 3 and census["records_per_batch"]["mean"] == 3.0
    assert census["bytes_per_batch"]["p90"] == len(batch(5))
    assert batch_census(str(tmp_path), "nothing") is None and batch_census("", "t") is None


def test_median_round_ratio_pairs_each_round_with_the_same_round_of_the_other():
    def runs(*rates):
        return {"rounds": [{"round": i + 1, "status": "ok" if r else "error", "records_per_s": r}
                           for i, r in enumerate(rates)]}
    # round 1 of ours was cold: the best-over-best ratio (4.0) hides it, the median does not
    assert run.median_round_ratio(runs(100, 400, 380), runs(100, 200, 190)) == pytest.approx(2.0)
    # a failed round drops that round's pair, not the other rounds
    assert run.median_round_ratio(runs(300, None, 200), runs(100, 100, 100)) == pytest.approx(2.5)
    assert run.median_round_ratio(runs(300), None) is None


# ------------------------------------------------------------------ the broker's request metrics


def test_request_figures_are_the_differences_of_two_snapshots():
    from benchmarks.broker_requests import request_figures

    before = {"produce_requests": 10, "request_bytes_count": 10, "request_bytes_total": 10_240.0,
              "total_time_ms_count": 10, "total_time_ms_total": 20.0, "messages_in": 1_000, "bytes_in": 5_000}
    after = {"produce_requests": 60, "request_bytes_count": 60, "request_bytes_total": 10_240.0 + 50 * 262_144,
             "total_time_ms_count": 60, "total_time_ms_total": 20.0 + 150.0, "messages_in": 101_000,
             "bytes_in": 12_005_000}
    got = request_figures(before, after, elapsed_s=2.0, stored_batches=200)
    assert got == {"produce_requests": 50, "requests_per_s": 25.0, "messages_in": 100_000, "bytes_in": 12_000_000,
                   "request_kib_mean": 256.0, "total_time_ms_mean": 3.0, "records_per_request": 2_000.0,
                   "batches_per_request": 4.0}
    assert "records_per_request" not in request_figures(before, before, 1.0)


class _Snapshots:
    """A probe whose snapshots are given (None: that snapshot fails, as a stopped probe's)."""

    def __init__(self, *snapshots):
        self._snapshots = list(snapshots)

    def try_snapshot(self):
        return self._snapshots.pop(0)


def test_a_request_meter_has_figures_only_with_both_snapshots_and_a_time():
    from benchmarks.broker_requests import RequestMeter

    before, after = {"produce_requests": 1, "messages_in": 10}, {"produce_requests": 5, "messages_in": 410}
    meter = RequestMeter(_Snapshots(before, after))
    meter.stop()
    assert meter.figures(2.0, stored_batches=8)["batches_per_request"] == 2.0
    assert meter.figures(None) is None  # the run failed before its clock stopped
    assert RequestMeter(None).figures(2.0) is None  # no probe (no JMX, not a write)
    failed = RequestMeter(_Snapshots(before, None))
    failed.stop()
    assert failed.figures(2.0) is None


def test_the_matrix_gets_a_requests_table_only_with_request_metrics():
    doc = {"meta": {"cells": [(100, 4, "tuned")], "compressions": ["none"]},
           "results": [dict(_run(PLAIN, 1, 500_000), config="tuned")]}
    assert run.requests_table(doc) == []
    doc["results"][0]["broker_requests"] = {"requests_per_s": 180.4, "batches_per_request": 3.96,
                                            "records_per_request": 2_100.0, "request_kib_mean": 230.2,
                                            "total_time_ms_mean": 1.23}
    table = run.requests_table(doc)
    assert table[-1] == "| tuned | 100 B | 4 | none | 180 · 4.0 · 2,100 · 230 · 1.2 |"


@pytest.mark.broker
def test_broker_request_metrics_count_the_produce_requests(apache_kafka):
    """The JMX probe against a real broker: three acknowledged sends of 100 records each, one at
    a time, are three Produce requests and 300 messages in (this process sends nothing else to
    its broker meanwhile)."""
    from benchmarks.broker_requests import RequestMeter, RequestProbe, enable_jmx
    from sparkkafka_sink import Producer
    from sparkkafka_sink.testing.brokers import create_topics

    bootstrap = apache_kafka.bootstrap_servers
    topic = f"bench-requests-{uuid.uuid4().hex[:8]}"
    create_topics(bootstrap, {topic: 2}, timeout=30)
    with RequestProbe(enable_jmx(apache_kafka.nodes[0].pid)) as probe, \
            Producer({"bootstrap.servers": bootstrap, "linger.ms": 0}) as producer:
        producer.send_batch(topic, values=[b"warm"], partitions=0).get(30)  # connections, producer id
        requests = RequestMeter(probe)
        for i in range(3):
            producer.send_batch(topic, values=[b"v%d" % j for j in range(100)], partitions=i % 2).get(30)
        requests.stop()
    got = requests.figures(elapsed_s=1.0, stored_batches=3)
    assert (got["produce_requests"], got["messages_in"], got["batches_per_request"]) == (3, 300, 1.0)
    # the attach socket jcmd made the JVM open is not left in the temp directory
    assert not os.path.exists(f"/tmp/.java_pid{apache_kafka.nodes[0].pid}")
    assert got["request_kib_mean"] > 0 and got["total_time_ms_mean"] >= 0


def test_the_matrix_gets_a_cpu_split_table_where_runs_have_one():
    doc = {"meta": {"cells": [(100, 4, "tuned")], "compressions": ["none"]},
           "results": [dict(_run(PLAIN, 1, 500_000), config="tuned")]}
    assert run.cpu_split_table(doc) == []
    doc["results"][0]["cpu_split_s"] = {"spark_jvm": 2.85, "python_workers": 5.67}
    assert run.cpu_split_table(doc)[-1] == "| tuned | 100 B | 4 | none | 2.9 / 5.7 / 1.0 |"


def test_the_sink_cpu_table_gives_each_sinks_process_per_gb_and_ours_over_the_jvm_sinks():
    """2,000,000 rows of 10 + 100 B are 0.22 GB: ours' Python workers 1.1 CPU s are 5.0 s/GB,
    the JVM sink's JVM 2.2 s are 10.0 s/GB (their Python workers are not its sink), and 0.50 of
    it; a run with no split, or a split of 0 s, has no figure."""
    cells = {"meta": {"cells": [(100, 4, "tuned")], "compressions": ["none"], "key_size": 10}}
    ours = dict(_run("spark-pyprod", 1, 500_000), config="tuned")
    jvm = dict(_run("spark-jvm-kafka", 1, 400_000), config="tuned")
    assert run.sink_cpu_per_gb_table(dict(cells, results=[ours, jvm])) == []
    ours["cpu_split_s"] = {"spark_jvm": 3.0, "python_workers": 1.1}
    jvm["cpu_split_s"] = {"spark_jvm": 2.2, "python_workers": 0.0}
    table = run.sink_cpu_per_gb_table(dict(cells, results=[ours, jvm]))
    assert table[2] == "| config | value | partitions | codec | pyprod-kafka (ours) | Spark kafka (JVM) | ours ÷ JVM |"
    assert table[-1] == "| tuned | 100 B | 4 | none | 5.00 | 10.00 | 0.50 |"
    jvm["cpu_split_s"] = {"spark_jvm": 0.0}
    assert run.sink_cpu_per_gb_table(dict(cells, results=[ours, jvm]))[-1] == "| tuned | 100 B | 4 | none | 5.00 | – | – |"


def test_the_headroom_table_bounds_what_a_free_sink_could_reach():
    """Floor 0.5 s with 1.0 CPU s, broker 1.0 CPU s under ours on 2 CPUs: a free sink needs 1.0 s,
    so 4.0 s of the JVM sink is a 4.0× ceiling; ours spent 6.0 - 1.0 - 1.0 = 4.0 CPU s of its own,
    and 1.5× (2.67 s on 2 CPUs = 5.33 CPU s) leaves it 3.33."""
    cells = {"meta": {"cells": [(100, 4, "tuned")], "compressions": ["none"], "cpus": 2}}
    doc = dict(cells, results=[dict(_run(n, 1, 2_000_000 / s, cpu=c), config="tuned")
                               for n, s, c in (("spark-noop", 0.5, 1.0), ("spark-pyprod", 2.0, 6.0),
                                               ("spark-jvm-kafka", 4.0, 7.0))])
    assert run.headroom_table(doc)[-1] == "| tuned | 100 B | 4 | none | 2.00× | 4.00× | 4.0 | 3.3 |"
    assert run.headroom_table(dict(cells, results=doc["results"][1:])) == []  # no floor: no ceiling


def test_the_sinks_memory_target_counts_its_call_and_encoded_copy():
    """spark-pyprod's worker may hold buffer.memory, one call of rows and their encoded copy
    (coalesceBytes each) and the slack: 128 + 2 x 16 + 64 = 224 MiB by default."""
    def target(*flags, extra_mb=200.0):
        args = run.parse_args(["--contenders", "spark-pyprod", *flags])
        results = [dict(_run(PLAIN, 1, 1_000_000), peak_rss_mb=100.0 + extra_mb, records_per_s=1_000_000)]
        return next(t for t in run.targets(results, args, spark_floor_mb=100.0) if "worker RSS" in t["target"])

    got = target()
    assert (got["goal"], got["pass"]) == (224, True) and "2 x coalesceBytes" in got["target"]
    assert (target("--sink-option", "coalesceBytes=0")["goal"], target("--sink-option", "coalesceBytes=0")["pass"]) \
        == (192, False)


def test_cpu_split_counts_a_python_worker_by_its_command_line():
    """A process whose command line names pyspark.daemon counts as a Python worker: the CPU it
    burnt during the meter's span is in ``python_workers`` (read while it still lives), and this
    process (no Spark) is in no class."""
    import subprocess

    from benchmarks.common import CpuMeter, _pid_ticks, _process_class
    from sparkkafka_sink.testing.waiting import wait_until

    assert _process_class(os.getpid(), 0) is None
    meter = CpuMeter(0, split=True)
    # burns 0.5 s, waited for up to 0.3 s of it: /proc counts whole ticks, and a child that burnt
    # exactly the awaited amount could read one tick short for ever
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass\ntime.sleep(60)"
    child = subprocess.Popen([sys.executable, "-c", burn, "pyspark.daemon"])
    try:
        wait_until("the worker burnt 0.3 s", lambda: _pid_ticks(child.pid) >= 30 * os.sysconf("SC_CLK_TCK") // 100,
                   timeout=30, interval=0.05)
        assert _process_class(child.pid, 0) == "python_workers"
        split = meter.stop()["cpu_split_s"]
    finally:
        child.kill()
        child.wait()
    # (Spark processes of other tests running beside this one may add to either class)
    assert split["python_workers"] >= 0.29 and set(split) == {"spark_jvm", "python_workers"}


def test_alternating_rounds_reverse_the_order_every_other_round():
    """The matrix's schedule: round 1 of each contender, then round 2 of each in the reverse
    order (ABBA), so none always runs first in a cell or after the same neighbour."""
    names = ["spark-pyprod", "spark-jvm-kafka", "spark-mapinarrow-confluent", "spark-noop"]
    order = spark_contenders.schedule(names, 3, alternate=True)
    assert order == [(n, 1) for n in names] + [(n, 2) for n in reversed(names)] + [(n, 3) for n in names]


# ------------------------------------------------------------------------------------- Avro

AVRO_OURS, AVRO_BYTES = "spark-pyprod-avro", "spark-pyprod-avro-bytes"


def test_the_avro_contenders_are_a_group_of_their_own_with_the_cost_of_avro_as_a_pair():
    from benchmarks.contenders import AVRO

    assert resolve("avro") == AVRO == [AVRO_OURS, "spark-jvm-avro", "spark-confluent-avro", AVRO_BYTES]
    for group in ("all", "spark"):
        assert not set(AVRO) & set(GROUPS[group])
    assert {CONTENDERS[n].rows for n in AVRO} == {"avro", "avro-bytes"} and all(CONTENDERS[n].registry for n in AVRO)
    assert CONTENDERS["spark-jvm-avro"].jars == ("kafka", "avro") and CONTENDERS["spark-jvm-kafka"].jars == ("kafka",)
    assert (COST_PAIRS["avro"].contender, COST_PAIRS["avro"].baseline) == (AVRO_OURS, AVRO_BYTES)
    assert spark_contenders.frame_kinds(AVRO) == {"avro"}
    assert spark_contenders.frame_kinds([PLAIN, AVRO_OURS]) == {"binary", "avro"}


def test_the_avro_matrix_runs_the_four_over_its_cells_with_room_for_both_cached_values():
    args = run.parse_args(["--avro-matrix"])
    assert args.names == resolve("avro") and args.matrix and args.alternate
    assert (args.value_sizes, args.partitions_list, args.configs, args.compressions) == (
        [100, 1024], [4, 64], ["defaults", "tuned"], ["none"])
    # 2M rows of a 1 KiB struct and its 1 KiB bytes
    assert args.spark_driver_memory == run.auto_driver_memory(2_000_000, 10, 1024, 2, 100_000) == "12g"
    assert run.parse_args(["--avro-matrix", "--partitions", "4"]).partitions_list == [4]


@pytest.mark.parametrize("value_size", [100, 1024, 333])
def test_an_avro_record_is_exactly_the_value_size_framed(value_size):
    import pyarrow.compute as pc

    from benchmarks.avro import encode_values, make_avro_pool, value_schema

    pool = make_avro_pool(5_000, 10, value_size)
    assert pool.schema.field("value").nullable is False
    values = encode_values(pool.column("value"), value_schema(pool.schema.field("value").type), 3)
    assert pc.min_max(pc.binary_length(values)).as_py() == {"min": value_size, "max": value_size}
    assert pool.column("key").to_pylist()[:2] == [b"0000000000", b"0000000001"]


def test_no_record_of_an_impossible_size():
    from benchmarks.avro import FIXED_BYTES, text_length

    assert text_length(FIXED_BYTES + 1) == 0
    with pytest.raises(ValueError, match="try 93"):
        text_length(92)  # 63 characters make 91 bytes, 64 make 93: the length prefix grows
    with pytest.raises(ValueError):
        text_length(FIXED_BYTES)


def test_the_jvm_paths_header_is_the_sinks_framing():
    import pyarrow as pa

    from benchmarks.avro import registry_header
    from sparkkafka_sink.serialization.encoded import frame

    for schema_id in (1, 258, (1 << 31) - 1):
        assert frame(pa.array([b"body"]), schema_id)[0].as_py() == registry_header(schema_id) + b"body"
    assert registry_header(258) == b"\x00\x00\x00\x01\x02"


def test_the_derived_schema_is_the_one_spark_to_avro_writes():
    """Spark 4's ``to_avro`` schema of ``struct<id long, at timestamp, score double, text string>``
    (all non-null), as ``SchemaConverters.toAvroType(...).toString`` prints it."""
    from benchmarks.avro import make_avro_pool, value_schema

    assert value_schema(make_avro_pool(10, 10, 100).schema.field("value").type) == (
        '{"type": "record", "name": "topLevelRecord", "fields": [{"name": "id", "type": "long"}, '
        '{"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}}, '
        '{"name": "score", "type": "double"}, {"name": "text", "type": "string"}]}')


def test_compare_bytes_counts_identical_values_and_shows_the_first_difference():
    from benchmarks.avro import compare_bytes

    pool = {b"a": b"\x00\x00\x00\x00\x01xy", b"b": b"\x00\x00\x00\x00\x01zz"}
    same = compare_bytes(list(pool.items()), pool.get)
    assert same == {"records": 2, "identical": 2, "schema_ids": [1]}
    other = compare_bytes([(b"a", pool[b"a"]), (b"b", b"\x00\x00\x00\x00\x02zz")], pool.get)
    assert other["identical"] == 1 and other["schema_ids"] == [1, 2]
    assert other["first_difference"] == {"key": "b'b'", "got": "00000000027a7a", "expected": "00000000017a7a"}


def test_the_avro_options_of_our_sink():
    spec = _spec(schema_registry="http://127.0.0.1:1/apis/ccompat/v7")
    plain = spark_contenders._pyprod_options(PLAIN, spec)
    assert spark_contenders._pyprod_options(AVRO_OURS, spec) == dict(
        plain, valueFormat="avro", **{"schema.registry.url": spec.schema_registry})
    assert spark_contenders._pyprod_options(AVRO_BYTES, spec) == plain  # binary values: the same bytes
    assert "no Schema Registry" in spark_contenders._available(AVRO_OURS, {"spec": {"schema_registry": ""}})
    assert "jars" in spark_contenders._available("spark-jvm-avro", {"spec": {"schema_registry": "x"}})


def test_avro_ratios_are_taken_against_ours_with_avro_and_the_cost_of_avro_is_a_pair():
    runs = [_run(AVRO_OURS, 1, 400_000), _run("spark-jvm-avro", 1, 225_000), _run(AVRO_BYTES, 1, 500_000),
            _run(AVRO_OURS, 2, 450_000), _run(AVRO_BYTES, 2, 450_000)]
    results = _finished(runs)
    ratio = {r["contender"]: (r["reference"], r["ratio_to_ours"]) for r in results}
    assert ratio["spark-jvm-avro"] == (AVRO_OURS, pytest.approx(0.5))
    assert ratio[AVRO_BYTES] == (AVRO_OURS, pytest.approx(500 / 450))
    (cost,) = run.costs(results)
    assert (cost["pair"], cost["ratio"], cost["round_ratios"]) == ("avro", pytest.approx(0.9), pytest.approx([0.8, 1.0]))
    line = run._cost_lines({"costs": [cost]})[0]
    assert line.startswith(f"**Cost of Avro serialization** (none; valueFormat=avro against the same bytes pre-encoded, "
                           f"same broker, same run): `{AVRO_OURS}` / `{AVRO_BYTES}` = **0.90**")


def test_the_results_say_whether_the_avro_contenders_wrote_the_same_bytes():
    meta = {"schema_registry": {"kind": "Apicurio Registry", "version": "2.6.13.Final"},
            "spark": {"avro_identity": [
                {"value_size": 100, "rows": 2000, "pool_schema_id": 1, "identical": True,
                 "contenders": {AVRO_OURS: {}, "spark-jvm-avro": {}}},
                {"value_size": 1024, "rows": 2000, "pool_schema_id": 1, "identical": True,
                 "contenders": {AVRO_OURS: {}, "spark-jvm-avro": {}}}]}}
    (line, _) = run._registry_lines(meta)
    assert (f"each of `{AVRO_OURS}`, `spark-jvm-avro` (100 B, 1 KiB values; 2 checks, schema id 1)" in line)
    meta["spark"]["avro_identity"][1]["identical"] = False
    assert "1 KiB values: **the contenders' bytes differ**" in run._registry_lines(meta)[0]
    assert run._registry_lines({}) == []


def test_a_sample_read_back_must_deserialize_into_the_pools_rows(schema_registry):
    """confluent-kafka's AvroDeserializer reads the pool's bytes (the schema by the id in their
    header, from a real registry) back into the pool's rows; a value changed in one byte, or one
    framed with an id the registry does not know, fails the check and says which key."""
    from benchmarks.avro import AvroPool, check_sample

    pool = AvroPool(100, 10, 100, 42, schema_registry.url)
    keys = pool.table.column("key").to_pylist()[:20]
    records = [(k, pool.expected_bytes(k)) for k in keys]
    assert check_sample(records, "t", schema_registry.url, pool.expected_value) == {
        "sampled": 20, "matched": 20, "ok": True}
    changed = records[:5] + [(keys[5], records[5][1][:-1] + b"!")] + records[6:]
    got = check_sample(changed, "t", schema_registry.url, pool.expected_value)
    assert (got["matched"], got["ok"]) == (19, False) and got["first_failure"].startswith(f"key {keys[5]!r}: read ")
    unknown = [(keys[0], b"\x00\x7f\xff\xff\xff" + records[0][1][5:])]
    assert check_sample(unknown, "t", schema_registry.url, pool.expected_value)["ok"] is False
    assert check_sample([], "t", schema_registry.url, pool.expected_value)["first_failure"] == "nothing read"


# --------------------------------------------------------------------------------- Protobuf

PB_OURS, PB_CONFLUENT, PB_BYTES = "spark-pyprod-protobuf", "spark-confluent-protobuf", "spark-pyprod-protobuf-bytes"


def test_the_protobuf_contenders_are_a_group_of_their_own_with_the_cost_of_protobuf_as_a_pair():
    from benchmarks.contenders import PROTOBUF

    assert resolve("protobuf") == PROTOBUF == [PB_OURS, PB_CONFLUENT, PB_BYTES]
    for group in ("all", "spark", "avro"):
        assert not set(PROTOBUF) & set(GROUPS[group])
    assert [CONTENDERS[n].format for n in PROTOBUF] == ["protobuf"] * 3 and CONTENDERS[PLAIN].format is None
    assert all(CONTENDERS[n].registry for n in PROTOBUF) and CONTENDERS[PB_BYTES].rows == "protobuf-bytes"
    assert spark_contenders.frame_kinds(PROTOBUF) == {"protobuf"}
    assert spark_contenders.frame_kinds([AVRO_OURS, *PROTOBUF]) == {"avro", "protobuf"}


def test_the_protobuf_matrix_runs_the_three_and_ours_with_avro_beside_them():
    args = run.parse_args(["--protobuf-matrix"])
    assert args.names == [AVRO_OURS, PB_OURS, PB_CONFLUENT, PB_BYTES] and args.matrix and args.alternate
    assert (args.value_sizes, args.partitions_list, args.configs, args.compressions) == (
        [100, 1024], [4, 64], ["defaults", "tuned"], ["none"])
    # Protobuf's struct and bytes, Avro's struct (no Avro bytes contender: not cached)
    assert args.spark_driver_memory == run.auto_driver_memory(2_000_000, 10, 1024, 3, 200_000) == "17g"
    # a smoke run broadcasts both pools too
    assert run.parse_args(["--protobuf-matrix", "--quick"]).spark_driver_memory == "4g"
    with pytest.raises(SystemExit):
        run.parse_args(["--protobuf-matrix", "--avro-matrix"])


@pytest.mark.parametrize("value_size", [100, 1024, 333])
def test_a_protobuf_record_is_exactly_the_value_size_framed_and_the_runtimes_message(value_size):
    """Every framed value is ``value_size`` bytes: the header (magic, id, message index 0), then
    the bytes Protobuf's own runtime writes for the row (what ProtobufSerializer writes after
    its header), the class built from protoc's descriptor set as the tasks build it."""
    import pyarrow.compute as pc

    from benchmarks.protobuf import descriptor_set, make_protobuf_pool, message_class, message_name, value_schema
    from benchmarks.struct_rows import encode_values, registry_header

    pool = make_protobuf_pool(5_000, 10, value_size)
    schema = value_schema(pool.schema.field("value").type)
    assert "google.protobuf.Timestamp at = 2;" in schema and "optional" not in schema
    values = encode_values(pool.column("value"), "protobuf", schema, 3)
    assert pc.min_max(pc.binary_length(values)).as_py() == {"min": value_size, "max": value_size}
    cls = message_class(descriptor_set(schema), message_name(schema))
    rows = pool.column("value").to_pylist()
    for i in (0, 999, 4_999):
        assert values[i].as_py() == registry_header(3) + b"\x00" + cls(**rows[i]).SerializeToString()


def test_no_protobuf_record_of_an_impossible_size():
    from benchmarks.protobuf import FIXED_BYTES, text_length

    assert FIXED_BYTES == 6 + 7 + 13 + 9 + 1
    assert text_length(100) == 63 and text_length(FIXED_BYTES + 1) == 0
    with pytest.raises(ValueError, match="try 166"):
        text_length(165)  # 127 characters make 164 bytes, 128 make 166: the length prefix grows


def test_protobuf_identity_compares_the_message_after_the_header():
    from benchmarks.struct_rows import compare_bytes

    pool = {b"a": b"\x00\x00\x00\x00\x01\x00xy"}
    theirs = [(b"a", b"\x00\x00\x00\x00\x07\x00xy")]
    assert compare_bytes(theirs, pool.get)["identical"] == 0
    assert compare_bytes(theirs, pool.get, 6) == {"records": 1, "identical": 1, "schema_ids": [7]}


def test_the_protobuf_options_of_our_sink():
    spec = _spec(schema_registry="http://127.0.0.1:1/apis/ccompat/v7")
    plain = spark_contenders._pyprod_options(PLAIN, spec)
    assert spark_contenders._pyprod_options(PB_OURS, spec) == dict(
        plain, valueFormat="protobuf", **{"schema.registry.url": spec.schema_registry})
    assert spark_contenders._pyprod_options(PB_BYTES, spec) == plain
    assert "no Schema Registry" in spark_contenders._available(PB_CONFLUENT, {"spec": {"schema_registry": ""}})


def test_the_protobuf_matrix_measures_the_cost_of_protobuf_and_of_avro_over_the_same_sized_bytes():
    runs = [_run(PB_OURS, 1, 400_000), _run(PB_CONFLUENT, 1, 100_000), _run(PB_BYTES, 1, 500_000),
            _run(AVRO_OURS, 1, 450_000), _run(PB_OURS, 2, 450_000), _run(PB_BYTES, 2, 450_000),
            _run(AVRO_OURS, 2, 360_000)]
    results = _finished(runs)
    ratio = {r["contender"]: (r["reference"], r["ratio_to_ours"]) for r in results}
    assert ratio[PB_CONFLUENT] == (PB_OURS, pytest.approx(100 / 450))  # best rounds
    costs = {c["pair"]: c for c in run.costs(results)}
    assert set(costs) == {"protobuf", "avro-beside-protobuf"}  # no Avro bytes ran: no "avro" pair
    assert costs["protobuf"]["round_ratios"] == pytest.approx([0.8, 1.0])
    assert costs["avro-beside-protobuf"]["round_ratios"] == pytest.approx([0.9, 0.8])
    lines = run._cost_lines({"costs": list(costs.values())})
    assert lines[1].startswith("**Cost of Avro serialization** (none; valueFormat=avro against Protobuf's "
                               f"pre-encoded values of the same size, same broker, same run): `{AVRO_OURS}` / `{PB_BYTES}`")
    doc = {"meta": {"cells": [[100, 4, "tuned"]], "compressions": ["none"]}, "results": results}
    assert "ours ÷ mapInArrow+ProtobufSerializer" in run.matrix_table(doc)[0]


def test_the_results_say_whether_the_protobuf_contenders_wrote_the_same_messages():
    meta = {"schema_registry": {"kind": "Apicurio Registry", "version": "2.6.13.Final"},
            "spark": {"protobuf_identity": [
                {"format": "protobuf", "value_size": 100, "rows": 2000, "pool_schema_id": 1, "identical": True,
                 "body_only": True, "contenders": {PB_OURS: {"schema_ids": [1]}, PB_CONFLUENT: {"schema_ids": [4]}}}]}}
    (line, _) = run._registry_lines(meta)
    assert line.startswith("Protobuf: Apicurio Registry 2.6.13.Final")
    assert (f"the message bytes (after the 6-byte header) the sink's encoder makes of the first 2,000 rows, written "
            f"by each of `{PB_OURS}`, `{PB_CONFLUENT}` (100 B values; 1 check, schema id 1)") in line
    assert f"registered by the contenders themselves: `{PB_CONFLUENT}` 4." in line
    meta["spark"]["protobuf_identity"][0]["identical"] = False
    assert "**the contenders' message bytes (after the 6-byte header) differ**" in run._registry_lines(meta)[0]
    assert run.identity_checks(meta) == meta["spark"]["protobuf_identity"]


def test_a_protobuf_sample_read_back_must_parse_into_the_pools_rows(schema_registry):
    """confluent-kafka's ProtobufDeserializer with the class protoc compiles from the text the
    registry holds under the pool's id reads the pool's bytes back into its rows; a value changed
    in one byte, or framed with an id the registry does not know, fails and says which key."""
    from benchmarks.protobuf import ProtobufPool

    pool = ProtobufPool(100, 10, 100, 42, schema_registry.url)
    keys = pool.table.column("key").to_pylist()[:20]
    records = [(k, pool.expected_bytes(k)) for k in keys]
    assert pool.check_sample(records, "t") == {"sampled": 20, "matched": 20, "ok": True}
    changed = records[:5] + [(keys[5], records[5][1][:-1] + b"!")] + records[6:]
    got = pool.check_sample(changed, "t")
    assert (got["matched"], got["ok"]) == (19, False) and got["first_failure"].startswith(f"key {keys[5]!r}: read ")
    unknown = [(keys[0], b"\x00\x7f\xff\xff\xff" + records[0][1][5:])]
    assert "names no PROTOBUF schema" in pool.check_sample(unknown, "t")["first_failure"]
    assert pool.check_sample([], "t")["first_failure"] == "nothing read"


def test_profile_charges_a_sample_to_the_innermost_frame_of_the_package():
    from benchmarks.profile import FROM_SPARK, OUTSIDE, stage_of

    task = "write (sparkkafka_sink/spark/task/write_task.py:70)"
    encode = "_encode_records (sparkkafka_sink/record/arrow.py:400)"
    join = "binary_join_element_wise (pyarrow/compute.py:240)"
    assert stage_of(["<module> (daemon.py:1)", task, encode, join]) == "record encoding (varints, the join)"
    assert stage_of(["<module> (daemon.py:1)", task, "coalesced (sparkkafka_sink/spark/task/batches.py:30)"]) \
        == "coalescing Spark's batches"
    # Spark's Arrow stream read inside the task's ``for batch in iterator``: Spark's side
    assert stage_of([task, "coalesced (sparkkafka_sink/spark/task/batches.py:23)",
                     "load_stream (pyspark/sql/pandas/serializers.py:120)", "read_next_batch (pyarrow/ipc.py:9)"]) \
        == FROM_SPARK
    assert stage_of(["<module> (daemon.py:1)", "main (pyspark/worker.py:3)"]) == FROM_SPARK
    # the samplers' full file names (--full-filenames: py-spy would shorten pyspark's to the bare name)
    site = "/venv/lib/python3.11/site-packages"
    assert stage_of([f"coalesced ({site}/sparkkafka_sink/spark/task/batches.py:23)",
                     f"ArrowStreamSerializer.load_stream ({site}/pyspark/sql/pandas/serializers.py:87)"]) == FROM_SPARK
    assert stage_of(["write (/work/main/sparkkafka_sink/spark/task/write_task.py:70)",
                     "coalesced (/work/main/sparkkafka_sink/spark/task/batches.py:34)"]) == "coalescing Spark's batches"
    assert stage_of(["<module> (bench.py:1)", "run (bench.py:9)"]) == OUTSIDE
    assert stage_of([task, "select (selectors.py:400)"]) is None  # a thread waiting
