"""``propertiesFile`` (spark/properties_file.py): a client properties file as the sink's options --
the Kafka lines as ``kafka.*``, the registry lines as ``schema.registry.*``, the options given
winning, the registry lines unused when nothing is written in a registry format, and a file that
cannot be read named on the driver."""

from __future__ import annotations

import pytest

from sparkkafka_sink.spark.errors import SinkValidationError
from sparkkafka_sink.spark.options import parse_options
from sparkkafka_sink.spark.properties_file import options_of

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
