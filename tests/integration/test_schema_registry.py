"""SchemaRegistryClient against a real registry (Apicurio Registry speaking Confluent's API,
the session's ``schema_registry``), and confluent-kafka's own client as the independent reader
of what ours registered.  Paths a real registry cannot be made to show (5xx, silence, refused
credentials, TLS) are in tests/unit/test_serialization_registry_unit.py."""

from __future__ import annotations

import json
import socket
import time

import pytest

from sparkkafka_sink.serialization.registry import SchemaRegistryClient, SchemaRegistryError
from sparkkafka_sink.serialization.subjects import subject_name_strategy
from sparkkafka_sink.testing.brokers import HOST


def record(*fields: dict, name: str = "Order", namespace: str = "shop") -> str:
    return json.dumps({"type": "record", "name": name, "namespace": namespace, "fields": list(fields)})


V1 = record({"name": "id", "type": "long"})
V2_COMPATIBLE = record({"name": "id", "type": "long"}, {"name": "note", "type": "string", "default": ""})
V2_INCOMPATIBLE = record({"name": "id", "type": "string"})
JSON_SCHEMA = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "title": "shop.Order",
                          "type": "object", "properties": {"id": {"type": "integer"}}})


@pytest.fixture
def client(schema_registry) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": schema_registry.url, "retries.wait.ms": 10})


@pytest.fixture
def confluent_client(schema_registry):
    from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient

    return ConfluentClient({"url": schema_registry.url})


def test_the_same_schema_twice_gets_the_same_id_and_reads_back(client, registry_subject):
    subject = registry_subject()
    schema_id = client.register(subject, V1)
    assert SchemaRegistryClient({"url": client.urls[0]}).register(subject, V1) == schema_id  # asked, not cached
    latest = client.latest_version(subject)
    assert (latest.schema_id, latest.subject, latest.version, latest.schema_type) == (schema_id, subject, 1, "AVRO")
    assert json.loads(latest.schema_text) == json.loads(V1)
    assert client.version(subject, 1) == latest
    assert client.lookup(subject, V1) == latest
    text, kind = SchemaRegistryClient({"url": client.urls[0]}).schema_by_id(schema_id)
    assert (json.loads(text), kind) == (json.loads(V1), "AVRO")


def test_a_json_schema_keeps_its_type(client, registry_subject):
    subject = registry_subject()
    schema_id = client.register(subject, JSON_SCHEMA, "JSON")
    assert SchemaRegistryClient({"url": client.urls[0]}).schema_by_id(schema_id)[1] == "JSON"
    assert client.latest_version(subject).schema_type == "JSON"
    assert client.lookup(subject, JSON_SCHEMA, "JSON").schema_type == "JSON"   # Apicurio leaves it out


def test_unknown_subject_version_and_id_say_what_to_do(client, registry_subject):
    subject = registry_subject()
    with pytest.raises(SchemaRegistryError) as e:
        client.latest_version(subject)
    assert (e.value.status, e.value.error_code, e.value.retriable) == (404, 40401, False)
    assert f"subject {subject!r} does not exist" in str(e.value)
    assert "Register the schema first" in str(e.value) and "auto.register.schemas" in str(e.value)
    assert e.value.url == f"{client.urls[0]}/subjects/{subject}/versions/latest"

    client.register(subject, V1)
    with pytest.raises(SchemaRegistryError) as e:
        client.version(subject, 7)
    assert (e.value.status, e.value.error_code) == (404, 40402)
    assert "has no version 7" in str(e.value) and e.value.registry_message

    with pytest.raises(SchemaRegistryError) as e:
        client.schema_by_id(987654)
    assert (e.value.status, e.value.error_code) == (404, 40403)
    assert "no schema with id 987654" in str(e.value) and "check url" in str(e.value)

    with pytest.raises(SchemaRegistryError) as e:
        client.lookup(subject, V2_COMPATIBLE)
    assert e.value.error_code == 40403 and "not registered under subject" in str(e.value)


def test_writers_registering_a_new_subject_at_once_all_get_its_id(schema_registry, registry_subject):
    """The tasks of one write register the same new subject at the same moment; Apicurio refuses
    all but the first with 409 ("artifact already exists"): the client then finds the schema
    registered and answers with its id."""
    import threading

    ids, errors = [], []
    for _ in range(10):
        subject, schema = registry_subject(), record({"name": "id", "type": "long"})
        start = threading.Barrier(4)

        def register(subject: str, schema: str, start: threading.Barrier) -> None:
            client = SchemaRegistryClient({"url": schema_registry.url})
            start.wait()
            try:
                ids.append((subject, client.register(subject, schema)))
            except SchemaRegistryError as e:
                errors.append(e)

        threads = [threading.Thread(target=register, args=(subject, schema, start)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, errors[0]
    per_subject = {}
    for subject, schema_id in ids:
        per_subject.setdefault(subject, set()).add(schema_id)
    assert len(per_subject) == 10 and all(len(v) == 1 for v in per_subject.values()), per_subject


def test_an_incompatible_schema_under_backward_is_refused_with_how_to_evolve(client, registry_subject):
    subject = registry_subject()
    client.register(subject, V1)
    assert client.compatibility(subject) == "NONE"                   # Apicurio's default
    client.set_compatibility(subject, "BACKWARD")                    # PUT /config/<subject>
    assert client.compatibility(subject) == "BACKWARD"
    assert not client.is_compatible(subject, V2_INCOMPATIBLE)
    with pytest.raises(SchemaRegistryError) as e:
        client.register(subject, V2_INCOMPATIBLE)
    text = str(e.value)
    assert (e.value.status, e.value.error_code) == (409, 409)
    assert "incompatible" in text and "(compatibility BACKWARD)" in text
    assert "add fields only with a default" in text and "PUT /config/<subject>" in text
    assert client.is_compatible(subject, V2_COMPATIBLE)
    client.register(subject, V2_COMPATIBLE)
    assert client.latest_version(subject).version == 2
    assert client.is_compatible(registry_subject(), V2_INCOMPATIBLE)      # no version yet: anything goes


def test_an_invalid_schema_is_refused_as_such(client, registry_subject):
    with pytest.raises(SchemaRegistryError) as e:
        client.register(registry_subject(), '{"type": "recrd", "name": "X"}')
    assert (e.value.status, e.value.error_code) == (422, 42201)
    assert "rejects the AVRO schema as invalid" in str(e.value) and "Fix the schema text" in str(e.value)


def test_a_dead_first_url_hands_over_to_the_next(schema_registry, registry_subject):
    with socket.socket() as s:
        s.bind((HOST, 0))
        dead = f"http://{HOST}:{s.getsockname()[1]}/apis/ccompat/v7"
    client = SchemaRegistryClient({"url": f"{dead},{schema_registry.url}", "max.retries": 1,
                                   "retries.wait.ms": 10})
    started = time.monotonic()
    subject = registry_subject()
    schema_id = client.register(subject, V1)
    assert client.latest_version(subject).schema_id == schema_id
    assert time.monotonic() - started < 10


def test_subject_strategies_name_subjects_as_confluent_does(client, registry_subject):
    """Ours and confluent-kafka's strategy functions agree, and the registry takes the names."""
    from confluent_kafka.schema_registry import (
        record_subject_name_strategy,
        topic_record_subject_name_strategy,
        topic_subject_name_strategy,
    )
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = registry_subject("topic")
    confluent = {"TopicNameStrategy": topic_subject_name_strategy,
                 "io.confluent.kafka.serializers.subject.RecordNameStrategy": record_subject_name_strategy,
                 "TopicRecordNameStrategy": topic_record_subject_name_strategy}
    for name, theirs in confluent.items():
        for is_key, field in ((True, MessageField.KEY), (False, MessageField.VALUE)):
            subject = subject_name_strategy(name).subject(topic, is_key, "shop.Order")
            assert subject == theirs(SerializationContext(topic, field), "shop.Order"), name
            client.register(subject, V1)
            assert client.latest_version(subject).subject == subject


def test_confluent_kafkas_client_reads_what_ours_registered_and_back(client, confluent_client, registry_subject):
    from confluent_kafka.schema_registry import Schema

    subject = registry_subject()
    schema_id = client.register(subject, V1)
    assert json.loads(confluent_client.get_schema(schema_id).schema_str) == json.loads(V1)
    latest = confluent_client.get_latest_version(subject)
    assert (latest.schema_id, latest.version) == (schema_id, 1)
    assert confluent_client.lookup_schema(subject, Schema(V1, "AVRO")).schema_id == schema_id

    theirs = confluent_client.register_schema(subject, Schema(V2_COMPATIBLE, "AVRO"))
    assert json.loads(client.schema_by_id(theirs)[0]) == json.loads(V2_COMPATIBLE)
    assert client.latest_version(subject).version == 2


def test_a_url_without_the_api_path_is_named_as_the_problem(schema_registry, registry_subject):
    root = schema_registry.url.removesuffix("/apis/ccompat/v7")
    with pytest.raises(SchemaRegistryError) as e:
        SchemaRegistryClient({"url": root}).latest_version(registry_subject())
    assert e.value.status == 404 and "does not exist" not in str(e.value)
    assert "Check url: is it a Schema Registry's API (Apicurio: .../apis/ccompat/v7)?" in str(e.value)


def test_an_https_registry_verified_with_ssl_ca_location(schema_registry, pki, registry_subject):
    client = SchemaRegistryClient({"url": schema_registry.https_url, "ssl.ca.location": str(pki.ca_cert_path)})
    subject = registry_subject()
    schema_id = client.register(subject, V1)
    assert client.latest_version(subject).schema_id == schema_id


def test_an_https_registry_signed_by_an_unknown_ca_fails_at_once_naming_ssl_ca_location(schema_registry, pki):
    client = SchemaRegistryClient({"url": schema_registry.https_url, "ssl.ca.location": str(pki.unknown_ca_cert_path),
                                   "retries.wait.ms": 1000})
    started = time.monotonic()
    with pytest.raises(SchemaRegistryError) as e:
        client.schema_by_id(1)
    assert time.monotonic() - started < 1.0                          # not retried: it cannot change
    assert "TLS handshake failed" in str(e.value) and "ssl.ca.location" in str(e.value)
    assert "did not verify" in str(e.value) and not e.value.retriable
