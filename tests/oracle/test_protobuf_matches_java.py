"""Protobuf's Java runtime reads what our Protobuf encoder writes: ``java/protobuf/ProtobufRoundTrip.java``
parses each value as a ``DynamicMessage`` of the schema (protoc's descriptor set of the text we
derive or a user's), finds no field it does not know, and serializes it again; Java's bytes must
be ours, value for value (maps in the order written).  protobuf-java from Maven, javac in the run."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from sparkkafka_sink.serialization.protobuf_encoder import ProtobufEncoder
from sparkkafka_sink.serialization.protobuf_schema import parse_proto, protobuf_schema_of
from sparkkafka_sink.testing.apache_kafka import resolve_maven_artifacts

from .support import JAVA_SOURCES, hex_round_trip, needs_java_oracle

pytest.importorskip("grpc_tools.protoc")
from protobuf_runtime import descriptor_set
from unit.test_serialization_protobuf import ROW, USER_PROTO, _random_row

pytestmark = needs_java_oracle

PROTOBUF_VERSION = "4.36.2"
PROTOBUF_POM = f"""<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>sparkkafka-sink</groupId><artifactId>protobuf-oracle</artifactId><version>1</version>
<dependencies><dependency><groupId>com.google.protobuf</groupId><artifactId>protobuf-java</artifactId>
<version>{PROTOBUF_VERSION}</version></dependency></dependencies></project>
"""


@pytest.fixture(scope="module")
def protobuf_round_trip(tmp_path_factory):
    """Runs ProtobufRoundTrip on (.proto text, message, values): Java's re-encoding of each value."""
    lib = resolve_maven_artifacts(f"protobuf-java-{PROTOBUF_VERSION}", PROTOBUF_POM)
    work = tmp_path_factory.mktemp("protobuf-oracle")
    round_trip = hex_round_trip(lib, JAVA_SOURCES / "protobuf" / "ProtobufRoundTrip.java", work)

    def run(text: str, message: str, values: pa.Array) -> list[bytes | None]:
        (work / "set.pb").write_bytes(descriptor_set(text).SerializeToString())
        return round_trip([work / "set.pb", message], values.to_pylist())
    return run


def test_java_reads_every_type_and_a_users_proto_as_we_wrote_them(protobuf_round_trip):
    rng = random.Random(36)
    derived = protobuf_schema_of(ROW, "Order", "shop.v1")
    rows = pa.array([_random_row(rng) for _ in range(300)] + [None], ROW)
    ours = ProtobufEncoder(derived, ROW).encode(rows)
    assert ours.bad_rows.tolist() == []
    assert protobuf_round_trip(derived.text(), "shop.v1.Order", ours.values) == ours.values.to_pylist()

    user = parse_proto(USER_PROTO, "shop.v1.Order")
    t = pa.struct([pa.field("id", pa.int64()), pa.field("labels", pa.map_(pa.string(), pa.string())),
                   pa.field("lines", pa.list_(pa.struct([pa.field("sku", pa.string()),
                                                         pa.field("quantity", pa.int32())])))])
    values = pa.array([{"id": i, "labels": [("b", str(i)), ("a", "")], "lines": [{"sku": "x", "quantity": i}] * (i % 3)}
                       for i in range(-5, 50)], t)
    ours = ProtobufEncoder(user, t).encode(values)
    assert protobuf_round_trip(USER_PROTO, "shop.v1.Order", ours.values) == ours.values.to_pylist()

