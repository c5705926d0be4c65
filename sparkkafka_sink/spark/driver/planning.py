"""Plan a write on the driver: options parsed, schema checked, cluster asked, before any task.

``DataSource.writer()`` / ``streamWriter()`` call it in a Python process of their own and build
their writer of the plan, which is pickled into the writer and so into every task.  Each failure is a ``SinkValidationError``
naming what to fix.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from pyspark.sql.types import StructType

from sparkkafka_sink.spark.driver.validation import validate_schema
from sparkkafka_sink.spark.options import parse_options
from sparkkafka_sink.spark.plan import WritePlan


def plan_write(option_map: Mapping[str, str], schema: StructType, streaming: bool = False) -> WritePlan:
    options = parse_options(option_map, streaming=streaming)
    layout = validate_schema(schema, options.topic, [c.column for c in options.formats.serialized],
                             trace_column=options.trace_headers == "column")
    # The two checks ask the cluster, so they bring the network stack: imported only when they
    # run, which a streaming query's at-least-once micro-batches never do.
    if not streaming:  # Spark plans a stream's writer again each micro-batch: a broker
        # restarting then must not stop the query (the tasks ride it out within their timeouts)
        from sparkkafka_sink.spark.driver.cluster_check import check_cluster

        check_cluster(options)
    if options.exactly_once:
        from sparkkafka_sink.spark.driver.exactly_once_writes import start_exactly_once

        options = start_exactly_once(options, streaming)
    key_serializer = value_serializer = None
    if options.formats.serialized:  # the registry is asked here, once: the tasks need the ids
        from sparkkafka_sink.spark.driver.schema_plan import plan_serialization

        key_serializer, value_serializer = plan_serialization(options, schema, layout)
    return WritePlan(options=options, layout=layout, key_serializer=key_serializer, value_serializer=value_serializer,
                     planned_at_ms=time.time() * 1000)
