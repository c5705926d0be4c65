"""Driver-side validation without Spark jobs: schema, options, save mode."""

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from sparkkafka_sink.errors import ConfigError
from sparkkafka_sink.producer.config import read_properties
from sparkkafka_sink.spark.driver.validation import check_save_mode, validate_schema
from sparkkafka_sink.spark.options import parse_options
from sparkkafka_sink.spark.plan import ColumnLayout
from sparkkafka_sink.spark.sink_errors import SinkValidationError

HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def schema(**cols):
    return StructType([StructField(n, t) for n, t in cols.items()])


def test_full_layout_found():
    s = schema(value=StringType(), key=BinaryType(), topic=StringType(), partition=IntegerType(),
               headers=HEADERS, timestamp=TimestampType(), extra=LongType())
    assert validate_schema(s, None) == ColumnLayout("value", "key", "topic", "partition", "headers", "timestamp")


def test_columns_match_case_insensitively():
    assert validate_schema(schema(Value=BinaryType()), "t") == ColumnLayout("Value")


def test_missing_value_column_names_it_and_lists_columns():
    with pytest.raises(SinkValidationError, match=r"no 'value' column \(required; string or binary.*Columns present: id:bigint"):
        validate_schema(schema(id=LongType()), "t")


@pytest.mark.parametrize("col,dtype,accepted", [
    ("value", LongType(), "string or binary"),
    ("key", IntegerType(), "string or binary"),
    ("topic", BinaryType(), "string"),
    ("partition", LongType(), "int"),
    ("timestamp", StringType(), "timestamp"),
])
def test_wrong_type_names_column_and_accepted_types(col, dtype, accepted):
    cols = {"value": StringType(), col: dtype}
    with pytest.raises(SinkValidationError) as e:
        validate_schema(schema(**cols), "t")
    assert f"column '{col}' has type {dtype.simpleString()}; accepted types for '{col}': {accepted}" in str(e.value)


def test_wrong_headers_type():
    bad = ArrayType(StructType([StructField("key", StringType()), StructField("value", StringType())]))
    with pytest.raises(SinkValidationError, match=r"column 'headers' has type array<struct<key:string,value:string>>; "
                                                  r"accepted type for 'headers': array<struct<key:string,value:binary>>"):
        validate_schema(schema(value=StringType(), headers=bad), "t")


def test_no_topic_column_and_no_option():
    with pytest.raises(SinkValidationError, match=r"no topic: the DataFrame has no 'topic' column \(string\) and the 'topic' option is not set"):
        validate_schema(schema(value=StringType()), None)


def test_overwrite_refused_with_reason():
    with pytest.raises(SinkValidationError, match=r"'overwrite' is not supported: Kafka topics cannot be truncated"):
        check_save_mode(True)
    check_save_mode(False)


def test_options_need_bootstrap_servers():
    with pytest.raises(SinkValidationError, match=r"option 'kafka.bootstrap.servers' is required"):
        parse_options({"topic": "t"})


def test_options_strip_prefix_and_keep_topic():
    o = parse_options({"kafka.bootstrap.servers": "h:9092", "kafka.compression.type": "zstd",
                       "kafka.linger.ms": "20", "topic": "events", "checkpointLocation": "/x"})
    assert o.topic == "events" and o.bootstrap_servers == "h:9092"
    assert o.producer_config["compression.type"] == "zstd"
    assert o.producer_config["linger.ms"] == 20
    assert "enable.idempotence" not in o.producer_config.explicit  # the producer's default (on) applies
    assert o.producer_config["enable.idempotence"]
    assert "checkpointlocation" not in o.producer_config


def test_unknown_kafka_key_is_reported_by_the_producer_config():
    with pytest.raises(SinkValidationError, match=r"invalid producer option: Unknown configuration 'kafka.lingr.ms'. Did you mean 'kafka.linger.ms'") as e:
        parse_options({"kafka.bootstrap.servers": "h:9092", "kafka.lingr.ms": "5"})
    assert isinstance(e.value, ConfigError)


def test_invalid_kafka_value_is_reported():
    with pytest.raises(SinkValidationError, match=r"invalid producer option: Invalid value 'brotli' for configuration 'kafka.compression.type'"):
        parse_options({"kafka.bootstrap.servers": "h:9092", "kafka.compression.type": "brotli"})


@pytest.mark.parametrize("key", ["key.serializer", "value.serializer", "transactional.id"])
def test_unsupported_kafka_keys(key):
    with pytest.raises(SinkValidationError, match=rf"option 'kafka.{key}' is not supported: "):
        parse_options({"kafka.bootstrap.servers": "h:9092", f"kafka.{key}": "x"})


def test_exactly_once_options():
    plain = parse_options({"kafka.bootstrap.servers": "h:9092"})
    assert not plain.exactly_once
    eos = parse_options({"kafka.bootstrap.servers": "h:9092", "deliveryGuarantee": "exactly-once"})
    other = parse_options({"kafka.bootstrap.servers": "h:9092", "deliveryGuarantee": "EXACTLY-ONCE"})
    # the target's prefix (a later write finds what a crashed one left); each write a run of its own
    assert eos.exactly_once and eos.transactional_id_prefix == other.transactional_id_prefix
    assert eos.write() != other.write()
    assert eos.decision_topic == "pyprod-kafka-decisions" and eos.lease_keeper == "process"
    elsewhere = parse_options({"kafka.bootstrap.servers": "h:9092", "deliveryGuarantee": "exactly-once", "topic": "t2"})
    assert elsewhere.transactional_id_prefix != eos.transactional_id_prefix
    assert eos.producer_config["transaction.timeout.ms"] == 900000
    named = parse_options({"kafka.bootstrap.servers": "h:9092", "deliveryGuarantee": "exactly-once",
                           "transactionalIdPrefix": "nightly-load"})
    assert named.transactional_id_prefix == "nightly-load"
    in_foreach_batch = parse_options({"kafka.bootstrap.servers": "h:9092", "deliveryGuarantee": "exactly-once",
                                      "batchId": "7", "checkpointLocation": "/cp/q"})
    assert in_foreach_batch.batch_id == 7
    # any path Spark accepts names the query: the sink writes nothing under it
    for location in ("file:///cp/q", "dbfs:/cp/q", "s3a://bucket/cp/q", "abfss://c@a.dfs.core.windows.net/q",
                     "gs://b/q", "hdfs://nn/q"):
        on_object_store = parse_options({"kafka.bootstrap.servers": "h:9092", "deliveryGuarantee": "exactly-once",
                                         "checkpointLocation": location}, streaming=True)
        assert on_object_store.transactional_id_prefix.startswith("pyprod-kafka-q") and on_object_store.streaming
    with pytest.raises(SinkValidationError, match="needs kafka.transaction.timeout.ms of at least 60000, got 30000"):
        parse_options({"kafka.bootstrap.servers": "h:9092", "deliveryGuarantee": "exactly-once",
                       "kafka.transaction.timeout.ms": "30000"})
    from sparkkafka_sink.spark.task.write_task import transaction_budget_s

    assert transaction_budget_s(900_000) == 810.0  # 90 %: the commit keeps 90 s
    assert transaction_budget_s(60_000) == 15.0  # the commit's 30 s, 5 s of skew, 10 s of flushing kept
    keeperless = parse_options({"kafka.bootstrap.servers": "h:9092", "deliveryGuarantee": "exactly-once",
                                "leaseKeeper": "none", "decisionTopic": "ops.decisions"})
    assert keeperless.lease_keeper == "none" and keeperless.decision_topic == "ops.decisions"
    again = parse_options({"kafka.bootstrap.servers": "h:9092", "deliveryGuarantee": "exactly-once",
                           "batchId": "8", "checkpointLocation": "/cp/q"})
    assert again.transactional_id_prefix == in_foreach_batch.transactional_id_prefix  # stable per query
    # ... however the location is spelled, where the spellings name one directory
    for spelling in ("/cp/q/", "//cp//q", "file:///cp/q", "file:/cp/q/", "file://localhost/cp/q"):
        respelled = parse_options({"kafka.bootstrap.servers": "h:9092", "deliveryGuarantee": "exactly-once",
                                   "batchId": "9", "checkpointLocation": spelling})
        assert respelled.transactional_id_prefix == in_foreach_batch.transactional_id_prefix, spelling
    for one, other in (("dbfs:/cp/q", "dbfs:///cp/q/"), ("s3a://bucket/cp/q", "s3a://bucket//cp/q/")):
        first, second = (parse_options({"kafka.bootstrap.servers": "h:9092", "deliveryGuarantee": "exactly-once",
                                        "checkpointLocation": location}, streaming=True) for location in (one, other))
        assert first.transactional_id_prefix == second.transactional_id_prefix != in_foreach_batch.transactional_id_prefix
    for options, message in [
        ({"deliveryGuarantee": "twice"}, "deliveryGuarantee' must be one of at-least-once, exactly-once"),
        ({"transactionalIdPrefix": "x"}, "needs deliveryGuarantee=exactly-once"),
        ({"deliveryGuarantee": "exactly-once", "kafka.acks": "1"}, "needs kafka.acks=all"),
        ({"deliveryGuarantee": "exactly-once", "kafka.enable.idempotence": "false"}, "needs idempotence"),
        ({"batchId": "3"}, "'batchId' needs deliveryGuarantee=exactly-once"),
        ({"deliveryGuarantee": "exactly-once", "batchId": "3"}, "needs .option\\(\"checkpointLocation\""),
        ({"deliveryGuarantee": "exactly-once", "batchId": "-1", "checkpointLocation": "/c"}, "'batchId' must be"),
        ({"deliveryGuarantee": "exactly-once", "leaseKeeper": "thread"}, "'leaseKeeper' must be one of process, none"),
        ({"deliveryGuarantee": "exactly-once", "kafka.ssl.truststore.location": "/nowhere/ca.pem",
          "kafka.security.protocol": "SSL"}, "is not on the driver"),
    ]:
        with pytest.raises(SinkValidationError, match=message):
            parse_options({"kafka.bootstrap.servers": "h:9092", **options})


def test_read_properties(tmp_path):
    p = tmp_path / "p.properties"
    p.write_text("# comment\n! also\n\ncompression.type = zstd\nlinger.ms:10\n")
    assert read_properties(str(p)) == {"compression.type": "zstd", "linger.ms": "10"}


def test_acks_1_is_accepted_and_turns_the_default_idempotence_off():
    """As the Java client (3.2 and newer): the default idempotence yields to an explicit acks=1,
    while an explicit enable.idempotence=true with it is refused."""
    default = parse_options({"kafka.bootstrap.servers": "h:9092"}).producer_config
    assert default["enable.idempotence"] is True and default["acks"] == -1  # all
    acks_1 = parse_options({"kafka.bootstrap.servers": "h:9092", "kafka.acks": "1"}).producer_config
    assert acks_1["acks"] == 1
    assert acks_1["enable.idempotence"] is False
    with pytest.raises(SinkValidationError, match=r"kafka.enable.idempotence=true conflicts .*kafka.acks must be 'all'"):
        parse_options({"kafka.bootstrap.servers": "h:9092", "kafka.acks": "1", "kafka.enable.idempotence": "true"})


def test_sink_batches_are_the_bulk_path_s_unless_batch_size_is_given():
    base = {"kafka.bootstrap.servers": "h:1"}
    assert parse_options(base).producer_config.bulk_batch_size == 262144
    assert parse_options({**base, "kafka.batch.size": "1000"}).producer_config.bulk_batch_size == 1000
    small = parse_options({**base, "kafka.buffer.memory": "100000"}).producer_config
    assert small.bulk_batch_size == 100000  # never above buffer.memory


def test_sink_linger_default_explicit_override_and_room_beside_delivery_timeout():
    base = {"kafka.bootstrap.servers": "h:1"}
    assert parse_options(base).producer_config["linger.ms"] == 100
    assert parse_options({**base, "kafka.linger.ms": "0"}).producer_config["linger.ms"] == 0
    # an explicit delivery.timeout.ms must stay >= linger.ms + request.timeout.ms: the default yields
    tight = parse_options({**base, "kafka.delivery.timeout.ms": "1050", "kafka.request.timeout.ms": "1000"})
    assert tight.producer_config["linger.ms"] == 50
    assert parse_options({**base, "kafka.delivery.timeout.ms": "30000"}).producer_config["linger.ms"] == 0


def test_coalesce_bytes_default_explicit_and_invalid():
    base = {"kafka.bootstrap.servers": "h:1", "topic": "t"}
    assert parse_options(base).coalesce_bytes == 16 << 20
    assert parse_options({**base, "coalesceBytes": "0"}).coalesce_bytes == 0
    assert parse_options({**base, "COALESCEBYTES": " 65536 "}).coalesce_bytes == 65536
    for bad in ("-1", "4MB", "", str((1 << 30) + 1)):
        with pytest.raises(SinkValidationError, match=r"option 'coalesceBytes' must be a whole number of bytes"):
            parse_options({**base, "coalesceBytes": bad})


def test_cluster_check_timeout_default_explicit_and_invalid():
    base = {"kafka.bootstrap.servers": "h:1", "topic": "t"}
    assert parse_options(base).cluster_check_timeout_ms == 10_000
    assert parse_options({**base, "clusterCheckTimeoutMs": "0"}).cluster_check_timeout_ms == 0
    assert parse_options({**base, "CLUSTERCHECKTIMEOUTMS": " 2500 "}).cluster_check_timeout_ms == 2500
    for bad in ("-1", "10s", "", "600001"):
        with pytest.raises(SinkValidationError, match=r"option 'clusterCheckTimeoutMs' must be a whole number"):
            parse_options({**base, "clusterCheckTimeoutMs": bad})


def test_tune_allocator_option():
    base = {"kafka.bootstrap.servers": "h:1", "topic": "t"}
    assert parse_options(base).tune_allocator is True
    assert parse_options({**base, "TUNEALLOCATOR": " False "}).tune_allocator is False
    with pytest.raises(SinkValidationError, match="option 'tuneAllocator' must be true or false, got 'no'"):
        parse_options({**base, "tuneAllocator": "no"})


def test_error_handling_options():
    base = {"kafka.bootstrap.servers": "h:1", "topic": "t"}
    o = parse_options(base)
    assert (o.tolerate_bad_rows, o.errors_deadletterqueue_topic_name, o.errors_deadletterqueue_context_headers_enable, o.errors_log_enable) == \
        (False, None, True, False)
    o = parse_options({**base, "errors.tolerance": "ALL", "errors.deadletterqueue.topic.name": "dlq",
                       "errors.deadletterqueue.context.headers.enable": "false", "errors.log.enable": "true"})
    assert (o.tolerate_bad_rows, o.errors_deadletterqueue_topic_name, o.errors_deadletterqueue_context_headers_enable, o.errors_log_enable) == \
        (True, "dlq", False, True)
    for bad, message in [({"errors.tolerance": "some"}, "must be one of none, all"),
                         ({"errors.deadletterqueue.topic.name": "dlq"}, "needs errors.tolerance=all"),
                         ({"errors.tolerance": "all", "errors.deadletterqueue.topic.name": "t"}, "a topic of their own"),
                         ({"errors.tolerance": "all", "errors.deadletterqueue.topic.name": " "}, "is empty"),
                         ({"errors.log.enable": "yes"}, "must be true or false")]:
        with pytest.raises(SinkValidationError, match=message):
            parse_options({**base, **bad})


def test_dead_letter_record_context_and_truncation():
    from sparkkafka_sink.errors import RecordTooLargeError, condemns_record
    from sparkkafka_sink.spark.task.dead_letters import BadRow, DeadLetters

    dl = DeadLetters("dlq", True, False, spark_partition=3, attempt=1, max_request_size=10_000,
                     layout=ColumnLayout("value"))
    bad = BadRow(42, "events", 2, RecordTooLargeError("too big"), "producer", b"k", b"x" * 50_000, [("h", b"1")])
    dl.reject(bad)
    assert dl.skipped == 1 and dl.take() == [bad] and dl.take() == []
    key, value, headers = dl.record_of(bad)
    h = dict(headers)
    assert key == b"k" and len(value) < 10_000 and h["__pyprod.errors.value.truncated.from"] == b"50000"
    assert (h["__connect.errors.topic"], h["__connect.errors.partition"], h["__pyprod.errors.row"]) == \
        (b"events", b"2", b"42")
    assert h["__connect.errors.exception.class.name"] == b"sparkkafka_sink.errors.RecordTooLargeError"
    assert (h["__pyprod.errors.spark.partition"], h["__pyprod.errors.spark.attempt"], h["h"]) == (b"3", b"1", b"1")
    assert condemns_record(bad.error) and not condemns_record(TimeoutError())
    plain = DeadLetters("dlq", False, False, 0, 0, max_request_size=1048576, layout=ColumnLayout("value"))
    assert plain.record_of(BadRow(1, "t", None, bad.error, "producer", None, b"v", []))[2] == []


@pytest.mark.parametrize("key,meant", [("topik", "topic"), ("coalesceByte", "coalesceBytes"),
                                       ("deliveryGuarantees", "deliveryGuarantee"),
                                       ("linger.ms", "kafka.linger.ms"), ("kafka-bootstrap.servers", "kafka.bootstrap.servers")])
def test_a_misspelled_sink_option_gets_a_did_you_mean(key, meant):
    with pytest.raises(SinkValidationError, match=rf"unknown option '{key.lower()}'\. Did you mean '{meant}'\?"):
        parse_options({"kafka.bootstrap.servers": "h:9092", "topic": "t", key: "x"})
    # Spark's own path (save(path)) is not a typo
    parse_options({"kafka.bootstrap.servers": "h:9092", "topic": "t", "path": "/somewhere"})
