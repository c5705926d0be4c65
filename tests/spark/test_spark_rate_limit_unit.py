"""The rate limiter of a write task, on a fake clock: slices of a tenth of a second's allowance,
each sent at its turn; no credit saved by a slow task; bytes counted from key, value and headers."""

from __future__ import annotations

import pyarrow as pa
import pytest

from sparkkafka_sink.spark.options import parse_options
from sparkkafka_sink.spark.plan import ColumnLayout
from sparkkafka_sink.spark.sink_errors import SinkValidationError
from sparkkafka_sink.spark.task.rate_limit import RateLimiter, payload_bytes


class FakeClock:
    def __init__(self):
        self.now = 100.0
        self.slept = []

    def __call__(self):
        return self.now

    def sleep(self, s):
        self.slept.append(s)
        self.now += s


def batch(rows: int, value_size: int = 10):
    """A write task's table of ``rows`` rows, in two pieces (Spark's batches, grouped)."""
    first = rows // 3
    return pa.Table.from_batches([pa.RecordBatch.from_arrays([pa.array([b"v" * value_size] * k)], ["value"])
                                  for k in (first, rows - first)])


LAYOUT = ColumnLayout(value="value")


def test_records_per_second_slices_and_paces():
    clock = FakeClock()
    limiter = RateLimiter(1000, None, clock=clock, sleep=clock.sleep)
    sent = [(clock.now, piece.num_rows) for piece in limiter.paced(batch(1000), payload_bytes(LAYOUT))]
    # ten slices of 100 rows (a tenth of a second each), the first at once, then one per 0.1 s
    assert [n for _, n in sent] == [100] * 10
    assert [round(t - 100.0, 6) for t, _ in sent] == [round(0.1 * i, 6) for i in range(10)]
    assert limiter.throttled_s == pytest.approx(0.9)


def test_bytes_per_second_slices_by_payload():
    clock = FakeClock()
    limiter = RateLimiter(None, 10_000, clock=clock, sleep=clock.sleep)  # 1 KB per slice: 100 rows of 10 bytes
    pieces = list(limiter.paced(batch(450, 10), payload_bytes(LAYOUT)))
    assert [p.num_rows for p in pieces] == [100, 100, 100, 100, 50]
    assert clock.now - 100.0 == pytest.approx(0.4)


def test_the_stricter_limit_wins_and_a_slow_task_saves_no_credit():
    clock = FakeClock()
    limiter = RateLimiter(1000, 1_000_000, clock=clock, sleep=clock.sleep)
    limiter.acquire(100, 100)  # costs 0.1 s of the record limit
    clock.now += 5.0  # the task was busy elsewhere for 5 s
    limiter.acquire(100, 100)
    limiter.acquire(100, 100)
    assert clock.slept == [pytest.approx(0.1)]  # no burst of 5 s of saved credit


def test_payload_bytes_counts_key_value_and_headers():
    headers = pa.array([[{"key": "h", "value": b"xyz"}], None, []],
                       pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))
    b = pa.RecordBatch.from_arrays([pa.array([b"ab", None, b"c"]), pa.array(["kk", "k", None]), headers],
                                   ["value", "key", "headers"])
    count = payload_bytes(ColumnLayout(value="value", key="key", headers="headers"))
    assert count(pa.Table.from_batches([b])) == (2 + 1) + (2 + 1) + (1 + 3)
    assert count(pa.Table.from_batches([b.slice(0, 1), b.slice(1)])) == (2 + 1) + (2 + 1) + (1 + 3)


def test_options_parse_and_refuse():
    base = {"kafka.bootstrap.servers": "h:1", "topic": "t"}
    o = parse_options({**base, "maxRecordsPerSecond": "5000", "MAXBYTESPERSECOND": "1e6"})
    assert (o.max_records_per_second, o.max_bytes_per_second) == (5000.0, 1e6)
    assert parse_options(base).max_records_per_second is None
    for bad in ("0", "-5", "fast", "inf"):
        with pytest.raises(SinkValidationError, match="option 'maxRecordsPerSecond' must be a positive number"):
            parse_options({**base, "maxRecordsPerSecond": bad})


def test_a_serialized_columns_bytes_are_its_data_before_serialization():
    """maxBytesPerSecond with valueFormat avro or json: a struct value counts its strings and
    binaries by length and its other values by their Arrow width (the bytes on the wire are the
    encoding's, known only after it)."""
    value = pa.array([{"id": 1, "name": "abc", "tags": ["x", "yz"], "attrs": [("k", 2.5)]}],
                     pa.struct([("id", pa.int64()), ("name", pa.string()), ("tags", pa.list_(pa.string())),
                                ("attrs", pa.map_(pa.string(), pa.float64()))]))
    b = pa.RecordBatch.from_arrays([value, pa.array([b"key"])], ["value", "key"])
    assert payload_bytes(ColumnLayout(value="value", key="key"))(pa.Table.from_batches([b])) == 8 + 3 + 3 + 1 + 8 + 3
