"""The task's encoders: keys and values as Avro, JSON Schema or Protobuf in the registry's wire format.

The driver planned each serialized column (``driver/schema_plan.py``): its schema, and the id
it is written with.  The task encodes whole Arrow columns with them (``ColumnSerializer``:
vectorised, each value framed with the id) before ``send_batch`` sees the rows.  When the
subject depends on the values of a ``topic`` column, the driver could not know the ids: the
task asks the registry once per topic, and its Python worker keeps the answer for later tasks
of the same write settings.

A row the schema cannot hold (a null in a non-null field of the user's schema, a decimal out of
its precision...) is not sent: it is handed back with the field at fault and what is wrong, for
the dead letters (``errors.tolerance=all``) or to fail the task.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from sparkkafka_sink.record.refusals import Refused
from sparkkafka_sink.serialization.encoded import RecordSchemaError
from sparkkafka_sink.serialization.serializer import ColumnSerializer, SerializerSpec
from sparkkafka_sink.spark.plan import WritePlan

if TYPE_CHECKING:
    from sparkkafka_sink.serialization.registry import SchemaRegistryClient

#: (registry settings, the column's spec, topic) -> the spec resolved.  Process-wide on purpose:
#: Spark reuses a Python worker for many tasks, and without it each task of a topic-column write
#: would ask the registry again for every topic (ids of a subject's schema never change)
_RESOLVED: dict[tuple, SerializerSpec] = {}
_RESOLVED_LOCK = threading.Lock()


class TaskEncoders:
    """The serialized columns of one write task (none when key and value are written as they are)."""

    def __init__(self, plan: WritePlan):
        self._registry = plan.options.formats.registry
        self._client: SchemaRegistryClient | None = None
        self._columns = [(name, spec) for name, spec in ((plan.layout.key, plan.key_serializer),
                                                         (plan.layout.value, plan.value_serializer))
                         if spec is not None and name is not None]
        self._serializers: dict[tuple[str, str], ColumnSerializer] = {}

    def __bool__(self) -> bool:
        return bool(self._columns)

    def encode(self, batch: pa.Table, rows: np.ndarray, topic: str) -> tuple[pa.Table, np.ndarray, Refused]:
        """``batch`` with its serialized columns replaced by their encodings, without the rows its
        schemas cannot hold; the positions in ``batch`` of the rows kept (ascending); and the
        rows left out, each with a ``RecordSchemaError`` naming the row (its number in the
        task's input, ``rows``) and field."""
        bad: dict[int, tuple[str, str]] = {}
        for name, spec in self._columns:
            array = batch.column(name)
            encoded = self._serializer(name, spec, topic, array.type).encode(array)
            for i, row in enumerate(encoded.bad_rows.tolist()):
                bad.setdefault(row, (encoded.fields[i], encoded.reasons[i]))
            batch = batch.set_column(batch.schema.get_field_index(name), name, encoded.values)
        kept = np.arange(batch.num_rows)
        if not bad:
            return batch, kept, Refused()
        refused = Refused.of([(row, RecordSchemaError(reason, int(rows[row]), field), None)
                              for row, (field, reason) in bad.items()])
        kept = np.delete(kept, refused.rows)
        return batch.take(pa.array(kept)), kept, refused

    def _serializer(self, name: str, spec: SerializerSpec, topic: str, arrow_type: pa.DataType
                    ) -> ColumnSerializer:
        per_topic = topic if spec.schema_id is None else ""
        serializer = self._serializers.get((name, per_topic))
        if serializer is None:
            resolved = spec if spec.schema_id is not None else self._resolved(spec, topic, arrow_type)
            serializer = self._serializers[(name, per_topic)] = ColumnSerializer(resolved)
        return serializer

    def _resolved(self, spec: SerializerSpec, topic: str, arrow_type: pa.DataType) -> SerializerSpec:
        """``spec`` resolved for ``topic``, from this worker's earlier answers or the registry."""
        key = (self._registry, spec, topic)
        with _RESOLVED_LOCK:
            known = _RESOLVED.get(key)
        if known is not None:
            return known
        if self._client is None:
            from sparkkafka_sink.serialization.registry import SchemaRegistryClient

            self._client = SchemaRegistryClient(dict(self._registry))
        resolved = spec.resolve(self._client, topic, arrow_type)
        with _RESOLVED_LOCK:
            _RESOLVED[key] = resolved
        return resolved
