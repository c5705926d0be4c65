"""``propertiesFile`` (spark/properties_file.py): a client properties file as the sink's options --
the Kafka lines as ``kafka.*``, the registry lines as ``schema.registry.*``, the options given
winning, the registry lines unused when nothing is written in a registry format, and a file that
cannot be read named on the driver."""

from __future__ import annotations

import pytest

from sparkkafka_sink.spark.options import parse_options
from sparkkafka_sink.spark.properties_file import options_of
from sparkkafka_sink.spark.sink_errors import SinkValidationError

FILE = """\
# Confluent Cloud's client.properties, as it hands it out
bootstrap.servers=pkc-xxxxx.eu-west-1.aws.confluent.cloud:9092
security.protocol=SASL_SSL
sasl.mechanism=PLAIN
sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username='KEY' password='SECRET';
acks=all
schema.registry.url=https://psrc-xxxxx.eu-west-1.aws.confluent.cloud
basic.auth.credentials.source=USER_INFO
basic.auth.user.info=SRKEY:SRSECRET
"""


@pytest.fixture
def client_properties(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text(FILE)
    return str(path)


def test_each_line_goes_to_its_client(client_properties, tmp_path):
    oauth = tmp_path / "oauth.properties"
    oauth.write_text("bearer.auth.credentials.source=OAUTHBEARER\nbearer.auth.logical.cluster=lsrc-1\n")
    assert options_of(str(oauth)) == {"schema.registry.bearer.auth.credentials.source": "OAUTHBEARER",
                                      "schema.registry.bearer.auth.logical.cluster": "lsrc-1"}
    options = options_of(client_properties)
    assert options["kafka.bootstrap.servers"] == "pkc-xxxxx.eu-west-1.aws.confluent.cloud:9092"
    assert options["kafka.acks"] == "all"
    assert options["schema.registry.url"] == "https://psrc-xxxxx.eu-west-1.aws.confluent.cloud"
    assert options["schema.registry.basic.auth.user.info"] == "SRKEY:SRSECRET"
    assert not any(k.startswith("kafka.schema.registry") or k.startswith("kafka.basic.auth") for k in options)


def test_the_options_given_win_and_unused_registry_lines_are_dropped(client_properties):
    parsed = parse_options({"propertiesFile": client_properties, "topic": "t", "kafka.acks": "1",
                            "kafka.enable.idempotence": "false"})
    assert parsed.producer_config["acks"] == 1
    assert parsed.producer_config["sasl.mechanism"] == "PLAIN"
    assert not parsed.formats.registry  # the file's registry lines serve the job's other clients
    with_avro = parse_options({"propertiesFile": client_properties, "topic": "t", "valueFormat": "avro"})
    assert with_avro.formats.registry_config["basic.auth.user.info"] == "SRKEY:SRSECRET"
    assert "SRSECRET" not in repr(with_avro) and "SECRET'" not in repr(with_avro.producer_config)


def test_a_file_the_driver_cannot_read_is_named(tmp_path):
    with pytest.raises(SinkValidationError, match=r"option 'propertiesFile': cannot read .*missing.properties"):
        parse_options({"propertiesFile": str(tmp_path / "missing.properties"), "topic": "t"})
    bad = tmp_path / "bad.properties"
    bad.write_text("bootstrap.servers\n")
    with pytest.raises(SinkValidationError, match=r"option 'propertiesFile': .*bad.properties:1: expected key=value"):
        parse_options({"propertiesFile": str(bad), "topic": "t"})


JAVA_JOB = """\
# a Java job's producer.properties
bootstrap.servers=broker:9092
key.serializer=org.apache.kafka.common.serialization.StringSerializer
value.serializer={value_serializer}
schema.registry.url=http://registry:8081
auto.register.schemas=false
use.latest.version=true
value.subject.name.strategy=io.confluent.kafka.serializers.subject.RecordNameStrategy
"""


def _java_job(tmp_path, value_serializer: str) -> str:
    path = tmp_path / "producer.properties"
    path.write_text(JAVA_JOB.format(value_serializer=value_serializer))
    return str(path)


def test_a_java_job_s_byte_and_string_serializers_are_dropped_with_a_note_its_serializer_settings_kept(
        tmp_path, caplog):
    path = _java_job(tmp_path, "org.apache.kafka.common.serialization.ByteArraySerializer")
    with caplog.at_level("WARNING", logger="sparkkafka_sink.spark.properties_file"):
        parsed = parse_options({"propertiesFile": path, "topic": "t", "valueFormat": "avro"})
    notes = [r.getMessage() for r in caplog.records]
    assert any("key.serializer=org.apache.kafka.common.serialization.StringSerializer is not used" in n
               and "key column" in n for n in notes), notes
    assert any("value.serializer=org.apache.kafka.common.serialization.ByteArraySerializer is not used" in n
               for n in notes), notes
    formats = parsed.formats
    assert (formats.registers_schemas, formats.use_latest_version) == (False, True)
    assert formats.value.subject_name_strategy == "RecordNameStrategy"
    assert formats.registry_config == {"url": "http://registry:8081"}


@pytest.mark.parametrize("serializer, fmt", [
    ("io.confluent.kafka.serializers.KafkaAvroSerializer", "avro"),
    ("io.confluent.kafka.serializers.json.KafkaJsonSchemaSerializer", "json"),
    ("io.confluent.kafka.serializers.protobuf.KafkaProtobufSerializer", "protobuf"),
])
def test_confluent_s_serializers_are_refused_naming_the_format_that_does_their_work(tmp_path, serializer, fmt):
    with pytest.raises(SinkValidationError, match=rf"line value.serializer={serializer}: the sink serializes the "
                                                  rf"value column itself: drop the line and set "
                                                  rf'.option\("valueFormat", "{fmt}"\)'):
        parse_options({"propertiesFile": _java_job(tmp_path, serializer), "topic": "t"})


def test_any_other_serializer_is_refused(tmp_path):
    with pytest.raises(SinkValidationError, match="line value.serializer=org.apache.kafka.common.serialization."
                                                  "IntegerSerializer: the sink writes the value column's bytes"):
        parse_options({"propertiesFile": _java_job(tmp_path, "org.apache.kafka.common.serialization.IntegerSerializer"),
                       "topic": "t"})
