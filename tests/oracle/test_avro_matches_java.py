"""Apache Avro's Java library reads what our Avro encoder writes: ``java/avro/AvroRoundTrip.java``
decodes each value with ``GenericDatumReader`` (every byte used) and encodes it again with
``GenericDatumWriter``; Java's bytes must be ours, value for value, for a schema with every type
(derived as Spark derives it) and a user schema with enums, fixed, millis, bytes decimals,
multi-branch unions and defaults.  One JVM for all of them (avro from Maven, javac in the run)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from unit.arrow_samples import EVERY_TYPE, ORDER, ORDER_SCHEMA, every_type_rows, order_rows

from sparkkafka_sink.serialization.avro_encoder import AvroEncoder
from sparkkafka_sink.serialization.avro_schema import avro_schema_of
from sparkkafka_sink.testing.apache_kafka import resolve_maven_artifacts

from .support import JAVA_SOURCES, hex_round_trip, needs_java_oracle

pytestmark = needs_java_oracle

AVRO_VERSION = "1.12.2"
AVRO_POM = f"""<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>sparkkafka-sink</groupId><artifactId>avro-oracle</artifactId><version>1</version>
<dependencies><dependency><groupId>org.apache.avro</groupId><artifactId>avro</artifactId>
<version>{AVRO_VERSION}</version></dependency></dependencies></project>
"""


@pytest.fixture(scope="module")
def avro_round_trip(tmp_path_factory):
    """Runs AvroRoundTrip on (schema, values): Java's re-encoding of each value (None for none)."""
    lib = resolve_maven_artifacts(f"avro-{AVRO_VERSION}", AVRO_POM)
    work = tmp_path_factory.mktemp("avro-oracle")
    round_trip = hex_round_trip(lib, JAVA_SOURCES / "avro" / "AvroRoundTrip.java", work)

    def run(schema, values: pa.Array) -> list[bytes | None]:
        (work / "schema.json").write_text(json.dumps(schema))
        return round_trip([work / "schema.json"], values.to_pylist())
    return run


def test_java_reads_every_type_and_a_user_schema_as_we_wrote_them(avro_round_trip):
    cases = [(avro_schema_of(EVERY_TYPE, True), pa.array(every_type_rows(), EVERY_TYPE)),
             (ORDER_SCHEMA, pa.array(order_rows(), ORDER))]
    for schema, arr in cases:
        ours = AvroEncoder(schema, arr.type).encode(arr)
        assert ours.bad_rows.tolist() == []
        assert avro_round_trip(schema, ours.values) == ours.values.to_pylist()
