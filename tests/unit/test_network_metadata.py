"""Metadata.update: what a MetadataResponse installs in the Cluster."""

from sparkkafka_sink.network.metadata import Metadata
from sparkkafka_sink.protocol import messages


def _struct(struct: str):
    return messages.schema_of("MetadataResponse").structs[struct].cls


def _response(*topics: str):
    partition = _struct("MetadataResponsePartition")
    topic = _struct("MetadataResponseTopic")
    return messages.MetadataResponse(
        brokers=[_struct("MetadataResponseBroker")(node_id=1, host="127.0.0.1", port=9092)],
        topics=[topic(error_code=0, name=t, partitions=[partition(error_code=0, partition_index=0, leader_id=1,
                                                                   replica_nodes=[1], isr_nodes=[1])])
                for t in topics],
        cluster_id="c", controller_id=1)


def test_topics_not_asked_for_are_not_kept():
    """tansu answers an empty topic list (the producer's first, brokers-only request) with every
    topic, as Metadata v0 did; a producer must still ask for a topic it sends to, so that the
    broker's answer about it (an authorization error, a new partition count) is seen."""
    md = Metadata([("127.0.0.1", 9092)], max_age_ms=300_000, refresh_backoff_ms=100, max_idle_ms=300_000)
    md.update(_response("asked", "other"), 0.0)
    assert md.cluster.partition_count("other") == 0 and md.cluster.partition_count("asked") == 0
    md.add_topic("asked", 1.0)
    assert md.update_requested
    md.update(_response("asked", "other"), 2.0)
    assert md.cluster.partition_count("asked") == 1 and md.cluster.partition_count("other") == 0
    assert not md.update_requested and set(md.cluster.brokers) == {1}
