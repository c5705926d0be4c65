"""Every driver-side validation error, raised through a real ``save()`` before any task runs."""

from __future__ import annotations

import pytest

BOOTSTRAP = "127.0.0.1:1"  # never contacted: validation fails first

CASES = {
    "missing value column": (
        "id bigint", {"topic": "t"},
        "pyprod-kafka: the DataFrame has no 'value' column (required; string or binary"),
    "wrong value type": (
        "value int", {"topic": "t"},
        "pyprod-kafka: column 'value' has type int; accepted types for 'value': string or binary"),
    "wrong key type": (
        "value string, key double", {"topic": "t"},
        "column 'key' has type double; accepted types for 'key': string or binary"),
    "wrong partition type": (
        "value string, partition bigint", {"topic": "t"},
        "column 'partition' has type bigint; accepted types for 'partition': int"),
    "wrong headers type": (
        "value string, headers map<string,string>", {"topic": "t"},
        "accepted type for 'headers': array<struct<key:string,value:binary>>"),
    "no topic": (
        "value string", {},
        "pyprod-kafka: no topic: the DataFrame has no 'topic' column (string) and the 'topic' option is not set"),
    "missing bootstrap servers": (
        "value string", {"topic": "t", "kafka.bootstrap.servers": None},
        "pyprod-kafka: option 'kafka.bootstrap.servers' is required"),
    "unknown kafka key": (
        "value string", {"topic": "t", "kafka.linger.msec": "5"},
        "pyprod-kafka: invalid producer option: Unknown configuration 'kafka.linger.msec'. Did you mean 'kafka.linger.ms'"),
    "invalid kafka value": (
        "value string", {"topic": "t", "kafka.acks": "most"},
        "pyprod-kafka: invalid producer option: Invalid value 'most' for configuration 'kafka.acks'"),
    "unsupported kafka key": (
        "value string", {"topic": "t", "kafka.value.serializer": "x"},
        "pyprod-kafka: option 'kafka.value.serializer' is not supported"),
    "mistyped sink option": (
        "value string", {"topic": "t", "coalesceByte": "1"},
        "pyprod-kafka: unknown option 'coalescebyte'. Did you mean 'coalesceBytes'?"),
}


def _error_text(df, mode="append", **options):
    w = df.write.format("pyprod-kafka")
    if mode:
        w = w.mode(mode)
    opts = {"kafka.bootstrap.servers": BOOTSTRAP, **options}
    for k, v in opts.items():
        if v is not None:
            w = w.option(k, v)
    with pytest.raises(Exception) as e:
        w.save()
    return str(e.value)


@pytest.mark.parametrize("case", list(CASES))
def test_validation_message(spark, case):
    schema, options, expected = CASES[case]
    df = spark.createDataFrame([], schema)
    text = _error_text(df, **options)
    assert expected in text
    # read in a few lines: Spark's header, one frame of ours, our line (first or last), SQLSTATE
    lines = [line for line in text.strip().splitlines() if line.strip()]
    assert len(lines) <= 7, text
    ours = [line for line in lines if "pyprod-kafka: " in line]
    assert len(ours) == 1 and len(ours[0][ours[0].index("pyprod-kafka: "):]) <= 500, text
    assert ours[0] in (lines[-1], lines[-2], lines[0]), text  # last, before SQLSTATE, or first


def test_overwrite_mode_is_refused(spark):
    text = _error_text(spark.createDataFrame([], "value string"), mode="overwrite", topic="t")
    assert "save mode 'overwrite' is not supported: Kafka topics cannot be truncated" in text


def test_default_mode_needs_append(spark):
    """Spark itself rejects ErrorIfExists for Python data sources: users write .mode("append")."""
    text = _error_text(spark.createDataFrame([], "value string"), mode=None, topic="t")
    assert "ErrorIfExists" in text and "Append" in text


def test_validation_runs_before_any_task(spark):
    """A bad option fails at once even for data that would take long to produce."""
    df = spark.range(10**9).selectExpr("cast(id as string) as value")
    assert "option 'kafka.bootstrap.servers' is required" in _error_text(
        df, topic="t", **{"kafka.bootstrap.servers": None})
