"""Azure Event Hubs' limits, kept by the configuration (``ProducerConfig._event_hubs_limits``): a
``*.servicebus.windows.net`` bootstrap host gets gzip or none only, requests of at most
1,046,528 bytes (the default lowered, an explicit larger one refused naming the service) and
connections closed after 180 s idle, before the service closes them at 240 s."""

from __future__ import annotations

import pytest

from sparkkafka_sink.errors import ConfigError
from sparkkafka_sink.producer.config import ProducerConfig

HUB = {"bootstrap.servers": "mynamespace.servicebus.windows.net:9093"}


def test_the_defaults_fit_event_hubs():
    config = ProducerConfig(HUB)
    assert config["max.request.size"] == 1_046_528
    assert config["connections.max.idle.ms"] == 180_000 and config["metadata.max.idle.ms"] == 180_000
    assert ProducerConfig({**HUB, "connections.max.idle.ms": "60000"})["connections.max.idle.ms"] == 60_000
    elsewhere = ProducerConfig({"bootstrap.servers": "broker:9092"})
    assert elsewhere["max.request.size"] == 1_048_576 and elsewhere["connections.max.idle.ms"] == 540_000


@pytest.mark.parametrize("codec", ["lz4", "zstd", "snappy"])
def test_a_codec_event_hubs_refuses_is_refused_naming_it(codec):
    with pytest.raises(ConfigError, match=f"Azure Event Hubs .* takes gzip compression only and refuses {codec}"):
        ProducerConfig({**HUB, "compression.type": codec})
    assert ProducerConfig({**HUB, "compression.type": "gzip"})["compression.type"] == "gzip"


def test_a_larger_request_size_is_refused_naming_the_limit():
    with pytest.raises(ConfigError, match="Azure Event Hubs .* refuses requests over 1046528 bytes: "
                                          "max.request.size must be at most 1046528"):
        ProducerConfig({**HUB, "max.request.size": "2097152"})
