"""What a codec hands back, the two errors it raises, and the Schema Registry's framing.

A codec encodes a whole column at once and never raises for one row: rows that do not fit the
schema come back as ``bad_rows`` with a reason each (the sink sends them to its dead-letter
handling or fails the task naming the first), and their values are null, like the column's own
null rows (Kafka tombstones, as Confluent's serializers write for ``None``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkkafka_sink.errors import ConfigError, SerializationError

__all__ = ["EncodedColumn", "InvalidSchemaError", "RecordSchemaError", "MAGIC_BYTE", "frame"]

#: the first byte of the Schema Registry's wire format, before the schema id
MAGIC_BYTE = 0


class InvalidSchemaError(ConfigError):
    """A schema that cannot be used: not valid Avro, JSON Schema or proto3, or unable to hold the
    DataFrame's column (the message names the field path, Spark's type and the schema's)."""


class RecordSchemaError(SerializationError):
    """One row that the schema cannot hold: ``row`` (its position in the column), ``field`` (the
    path of the value at fault, e.g. ``value.address.zip``) and what is wrong."""

    def __init__(self, message: str, row: int, field: str):
        super().__init__(f"Row {row}: {message}")
        self.row = row
        self.field = field


@dataclass(frozen=True)
class EncodedColumn:
    """A column's encoded values; ``values`` is null where the input was null or the row is bad.
    ``bad_rows`` are ascending row positions, ``fields`` and ``reasons`` one per bad row."""

    values: pa.Array
    bad_rows: np.ndarray
    fields: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()

    def error(self, i: int = 0) -> RecordSchemaError:
        """The ``i``-th bad row as an exception."""
        return RecordSchemaError(self.reasons[i], int(self.bad_rows[i]), self.fields[i])


def frame(values: pa.Array, schema_id: int, after_id: bytes = b"") -> pa.Array:
    """Every non-null value behind the Schema Registry's header: the magic byte and the schema's
    id as 4 big-endian bytes (then ``after_id``: Protobuf's message indexes).  Nulls stay null
    (tombstones carry no schema)."""
    if not 0 <= schema_id < 1 << 31:
        raise ValueError(f"a Schema Registry id is a non-negative int32, not {schema_id}")
    header = pa.scalar(bytes([MAGIC_BYTE]) + schema_id.to_bytes(4, "big") + after_id, pa.binary())
    return pc.binary_join_element_wise(header, values, pa.scalar(b"", pa.binary()))
