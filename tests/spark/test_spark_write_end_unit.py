"""Commit-message aggregation, driver summaries and metric merging."""

from sparkkafka_sink.spark.commit_message import TaskCommitMessage
from sparkkafka_sink.spark.driver.write_end import abort_summary, commit_summary, merge_offsets
from sparkkafka_sink.spark.sink_metrics import MetricsParam, SinkMetrics, snapshot_of, task_metrics


def msg(pid, offsets):
    return TaskCommitMessage(pid, 0, sum(c for c, _, _ in offsets.values()), offsets)


def test_merge_offsets_adds_counts_and_spans_offsets():
    m = merge_offsets([msg(0, {("a", 0): (2, 10, 11)}), None, msg(1, {("a", 0): (3, 0, 2), ("b", 1): (1, 5, 5)})])
    assert m == {("a", 0): (5, 0, 11), ("b", 1): (1, 5, 5)}


def test_commit_summary_is_one_line():
    line = commit_summary([msg(0, {("a", 0): (2, 0, 1)}), msg(1, {("a", 1): (3, 0, 2)})])
    assert "\n" not in line
    assert line.startswith("pyprod-kafka: write committed: 5 records to 2 topic-partitions from 2 tasks")
    assert "a-0 [0..1] (2)" in line and "a-1 [0..2] (3)" in line


def test_abort_summary_says_what_stays_in_kafka():
    line = abort_summary([msg(0, {("a", 0): (4, 0, 3)}), None, None], what="micro-batch 7")
    assert "micro-batch 7 aborted: 1 of 3 tasks had finished and their 4 records stay in Kafka" in line
    assert "the 2 unfinished tasks may have sent records too, which also stay" in line
    assert "unfinished" not in abort_summary([msg(0, {("a", 0): (4, 0, 3)})])
    assert "at-least-once" in line


def test_metrics_param_sums_counters_and_maxes_latency():
    p = MetricsParam()
    total = p.zero({})
    for pm, delivered in (({"bytes_sent": 10, "batches_sent": 2, "request_latency_max_ms": 5, "request_latency_avg_ms": 2}, 4),
                          ({"bytes_sent": 30, "batches_sent": 1, "request_latency_max_ms": 9, "request_latency_avg_ms": 8, "retries": 2}, 6)):
        total = p.addInPlace(total, task_metrics(pm, delivered, 0))
    snap = snapshot_of(total)
    assert snap["records_sent"] == 10 and snap["bytes_sent"] == 40 and snap["batches_sent"] == 3
    assert snap["retries"] == 2 and snap["records_failed"] == 0 and snap["write_tasks"] == 2
    assert snap["produce_latency_max_ms"] == 9
    assert snap["produce_latency_avg_ms"] == (2 * 2 + 8 * 1) / 3


def test_disabled_metrics_report_zeros():
    m = SinkMetrics(None)
    assert not m.enabled
    snap = m.snapshot()
    for k in ("records_sent", "bytes_sent", "batches_sent", "records_failed", "retries"):
        assert snap[k] == 0


def test_micro_batch_counters_are_filed_per_batch():
    class Acc:
        value = {}

    p = MetricsParam()
    acc = Acc()
    for mb, n in ((("q1", 0), 3), (("q1", 0), 4), (("q1", 1), 5), (None, 100)):
        acc.value = p.addInPlace(acc.value, task_metrics({"bytes_sent": 10}, n, 0, mb))
    m = SinkMetrics(acc)
    assert m.snapshot()["records_sent"] == 112
    rows = m.micro_batches()
    assert [(r["query_id"], r["batch_id"], r["records_sent"], r["write_tasks"]) for r in rows] == [
        ("q1", 0, 7, 2), ("q1", 1, 5, 1)]
    assert m.micro_batches("other") == []


def test_writer_commit_and_abort_log_one_line_each(capfd):
    from sparkkafka_sink.spark.stream_writer import PyprodKafkaStreamWriter
    from sparkkafka_sink.spark.writer import PyprodKafkaWriter

    PyprodKafkaWriter(plan=None).commit([msg(0, {("a", 0): (2, 0, 1)})])
    PyprodKafkaWriter(plan=None).abort([msg(0, {("a", 0): (2, 0, 1)}), None])
    PyprodKafkaStreamWriter(plan=None).commit([msg(0, {("a", 1): (1, 5, 5)})], 4)
    lines = [ln for ln in capfd.readouterr().err.splitlines() if "pyprod-kafka:" in ln]
    assert len(lines) == 3
    assert lines[0].startswith("INFO sparkkafka_sink.spark: pyprod-kafka: write committed: 2 records")
    assert lines[1].startswith("WARNING sparkkafka_sink.spark: pyprod-kafka: write aborted: 1 of 2 tasks")
    assert "micro-batch 4 committed: 1 records" in lines[2]
