"""Message codecs: hand-computed golden bytes at the lowest and highest supported version of
each request, byte-for-byte agreement with kafka-python's independent encoder, and the
zero-copy guarantee for record batches."""

from __future__ import annotations

import uuid

import pytest

from sparkkafka_sink.errors import ProtocolError, UnsupportedVersionError
from sparkkafka_sink.protocol import SUPPORTED_VERSIONS, ApiKey, messages
from sparkkafka_sink.protocol.broker_protocol import BrokerProtocol
from sparkkafka_sink.protocol.produce import ProduceRequest, decode_produce_response

ZERO_UUID_HEX = "00" * 16


# --- the messages, built from the declarations (positional arguments as the tests use them) ---

def _struct(message, struct):
    return messages.schema_of(message).structs[struct].cls


def ApiVersionsRequest(name, version):
    return messages.ApiVersionsRequest(client_software_name=name, client_software_version=version)


def MetadataRequest(topics, auto=True, cluster_ops=False, topic_ops=False):
    request = messages.metadata_request(topics, auto)
    request.include_cluster_authorized_operations = cluster_ops
    request.include_topic_authorized_operations = topic_ops
    return request


def InitProducerIdRequest(txn, timeout, producer_id=-1, epoch=-1):
    return messages.InitProducerIdRequest(transactional_id=txn, transaction_timeout_ms=timeout,
                                          producer_id=producer_id, producer_epoch=epoch)


def ApiVersionRange(key, lo, hi):
    return _struct("ApiVersionsResponse", "ApiVersion")(api_key=key, min_version=lo, max_version=hi)


def ApiVersionsResponse(error, keys, throttle=0):
    return messages.ApiVersionsResponse(error_code=error, api_keys=keys, throttle_time_ms=throttle)


def LeaderIdAndEpoch(leader, epoch):
    return _struct("ProduceResponse", "LeaderIdAndEpoch")(leader_id=leader, leader_epoch=epoch)


def NodeEndpoint(node, host, port, rack):
    return _struct("ProduceResponse", "NodeEndpoint")(node_id=node, host=host, port=port, rack=rack)


def PartitionProduceResponse(index, error, base_offset, append_time=-1, log_start=-1, record_errors=(),
                             message=None, leader=None):
    error_cls = _struct("ProduceResponse", "BatchIndexAndErrorMessage")
    p = _struct("ProduceResponse", "PartitionProduceResponse")(
        index=index, error_code=error, base_offset=base_offset, log_append_time_ms=append_time,
        log_start_offset=log_start, record_errors=[error_cls(i, m) for i, m in record_errors],
        error_message=message)
    if leader is not None:
        p.current_leader = leader
    return p


def TopicProduceResponse(name, partitions):
    return _struct("ProduceResponse", "TopicProduceResponse")(name=name, partition_responses=partitions)


def ProduceResponse(responses, throttle, endpoints=()):
    return messages.ProduceResponse(responses=responses, throttle_time_ms=throttle, node_endpoints=list(endpoints))


def InitProducerIdResponse(throttle, error, producer_id, epoch):
    return messages.InitProducerIdResponse(throttle_time_ms=throttle, error_code=error,
                                           producer_id=producer_id, producer_epoch=epoch)


def MetadataBroker(node, host, port, rack):
    return _struct("MetadataResponse", "MetadataResponseBroker")(node_id=node, host=host, port=port, rack=rack)


def MetadataPartition(error, index, leader, epoch, replicas, isr, offline):
    return _struct("MetadataResponse", "MetadataResponsePartition")(
        error_code=error, partition_index=index, leader_id=leader, leader_epoch=epoch,
        replica_nodes=replicas, isr_nodes=isr, offline_replicas=offline)


def MetadataTopic(error, name, partitions, internal=False, topic_id=None, topic_ops=-(2**31)):
    return _struct("MetadataResponse", "MetadataResponseTopic")(
        error_code=error, name=name, partitions=partitions, is_internal=internal,
        topic_id=topic_id or uuid.UUID(int=0), topic_authorized_operations=topic_ops)


def MetadataResponse(brokers, topics, cluster_id, controller, throttle=0, cluster_ops=-(2**31)):
    return messages.MetadataResponse(brokers=brokers, topics=topics, cluster_id=cluster_id,
                                     controller_id=controller, throttle_time_ms=throttle,
                                     cluster_authorized_operations=cluster_ops)


def body(message, version) -> str:
    if isinstance(message, ProduceRequest):
        return b"".join(bytes(p) for p in message.encode(version)).hex()
    return b"".join(bytes(p) for p in messages.encode_body(message, version)).hex()


def decode(message, data, version):
    """Decode ``data`` as the kind of message ``message`` is (the Produce hot path for its response)."""
    name = type(message).__name__
    if isinstance(message, ProduceRequest):
        return messages.decode_body("ProduceRequest", data, version)
    if name == "ProduceResponse":
        return decode_produce_response(data, version)
    return messages.decode_body(name, data, version)


def versions(api_key):
    lo, hi = SUPPORTED_VERSIONS[api_key]
    return range(lo, hi + 1)


# --- golden request bodies (computed by hand from the JSON message specs) ------------------

GOLDEN_REQUESTS = [
    (ApiVersionsRequest("a", "1"), 0, ""),
    #                                  name    version  tags
    (ApiVersionsRequest("a", "1"), 3, "0261" "0231" "00"),
    #                                       topics=1  "t"
    (MetadataRequest(["t"]), 1, "00000001" "000174"),
    (MetadataRequest(None), 1, "ffffffff"),
    #             topics=1 topic_id         "t"    tags  auto  topic_ops  tags
    (MetadataRequest(["t"]), 12, "02" + ZERO_UUID_HEX + "0274" "00" "01" "00" "00"),
    (MetadataRequest(None, False), 12, "00" "00" "00" "00"),
    #                        auto cluster_ops topic_ops
    (MetadataRequest([], True, True, True), 8, "00000000" "01" "01" "01"),
    #  txn "x"   acks  timeout    topics   "t"    parts     index     size      records
    (ProduceRequest("x", 1, 5, [("t", [(0, b"abc")])]), 3,
     "000178" "0001" "00000005" "00000001" "000174" "00000001" "00000000" "00000003" "616263"),
    #  txn null acks  timeout   topics "t" parts index   records   tags x3
    (ProduceRequest(None, -1, 30000, [("t", [(0, b"abc")])]), 11,
     "00" "ffff" "00007530" "02" "0274" "02" "00000000" "04616263" "00" "00" "00"),
    (ProduceRequest(None, 0, 1, [("t", [(2, None)])]), 9,
     "00" "0000" "00000001" "02" "0274" "02" "00000002" "00" "00" "00" "00"),
    #     txn null  timeout    producer_id          epoch  tags
    (InitProducerIdRequest(None, 60000), 3, "00" "0000ea60" "ffffffffffffffff" "ffff" "00"),
    (InitProducerIdRequest("txn", 1000, 42, 3), 5,
     "0474786e" "000003e8" "000000000000002a" "0003" "00"),
]


@pytest.mark.parametrize("request_, version, expected", GOLDEN_REQUESTS)
def test_request_golden_bytes(request_, version, expected):
    assert body(request_, version) == expected
    decoded = decode(request_, memoryview(bytes.fromhex(expected)), version)
    assert body(decoded, version) == expected


GOLDEN_RESPONSES = [
    #                      error  keys=1 (18, 0, 3)
    (ApiVersionsResponse(0, [ApiVersionRange(18, 0, 3)]), 0, "0000" "00000001" "001200000003"),
    #                                                       error keys   key tags throttle tags
    (ApiVersionsResponse(0, [ApiVersionRange(0, 3, 11)], 5), 3, "0000" "02" "00000003000b" "00" "00000005" "00"),
    #                  index error base_offset       log_append        log_start         throttle
    (ProduceResponse([TopicProduceResponse("t", [PartitionProduceResponse(0, 0, 7, -1, 0)])], 0), 5,
     "00000001" "000174" "00000001" "00000000" "0000" "0000000000000007" "ffffffffffffffff"
     "0000000000000000" "00000000"),
    # v10 with record errors, a message, a current leader (tag 0) and node endpoints (tag 0)
    (ProduceResponse([TopicProduceResponse("t", [PartitionProduceResponse(
        1, 6, -1, -1, -1, [(2, "bad")], "oops", LeaderIdAndEpoch(3, 4))])], 0,
        [NodeEndpoint(3, "h", 9092, None)]), 10,
     "02" "0274" "02" "00000001" "0006" "ffffffffffffffff" "ffffffffffffffff" "ffffffffffffffff"
     "02" "00000002" "04626164" "00"  # record_errors: [(2, "bad")] + tags
     "056f6f7073"                      # error_message "oops"
     "01" "00" "09" "00000003" "00000004" "00"  # tagged: current_leader
     "00"                              # topic tags
     "00000000"                        # throttle
     "01" "00" "0d" "02" "00000003" "0268" "00002384" "00" "00"),  # tagged: node_endpoints
    (InitProducerIdResponse(0, 0, 1000, 2), 4, "00000000" "0000" "00000000000003e8" "0002" "00"),
    #   throttle  brokers  id      host    port    rack  cluster  ctrl    topics err "t"  internal parts
    (MetadataResponse([MetadataBroker(1, "h", 9, None)], [MetadataTopic(0, "t", [
        MetadataPartition(0, 0, 1, -1, [1], [1], [])])], None, 1, 0), 5,
     "00000000" "00000001" "00000001" "000168" "00000009" "ffff" "ffff" "00000001" "00000001" "0000"
     "000174" "00" "00000001" "0000" "00000000" "00000001" "0000000100000001" "0000000100000001"
     "00000000"),
]


@pytest.mark.parametrize("response, version, expected", GOLDEN_RESPONSES)
def test_response_golden_bytes(response, version, expected):
    assert body(response, version) == expected
    assert decode(response, memoryview(bytes.fromhex(expected)), version) == response


# --- cross-check against kafka-python's encoder -------------------------------------------

@pytest.mark.parametrize("version", versions(ApiKey.PRODUCE))
def test_produce_request_matches_kafka_python(version):
    from kafka.protocol.producer import ProduceRequest as KP

    data = [("topic-a", [(0, b"batch-0"), (3, b"batch-3" * 10)]), ("b", [(1, b"")])]
    theirs = KP[version](transactional_id="txn", acks=-1, timeout_ms=1234, topic_data=[
        KP.TopicProduceData(name=name, partition_data=[
            KP.TopicProduceData.PartitionProduceData(index=i, records=r) for i, r in parts])
        for name, parts in data])
    ours = ProduceRequest("txn", -1, 1234, data)
    assert body(ours, version) == bytes(theirs.encode(version=version)).hex()


@pytest.mark.parametrize("version", versions(ApiKey.METADATA))
@pytest.mark.parametrize("topics", [None, [], ["a", "bb"]])
def test_metadata_request_matches_kafka_python(version, topics):
    from kafka.protocol.metadata import MetadataRequest as KM

    kwargs = {"topics": None if topics is None else [KM.MetadataRequestTopic(name=t) for t in topics]}
    if version >= 4:
        kwargs["allow_auto_topic_creation"] = False
    if version >= 8:
        kwargs["include_topic_authorized_operations"] = True
        if version <= 10:
            kwargs["include_cluster_authorized_operations"] = False
    theirs = bytes(KM[version](**kwargs).encode(version=version)).hex()
    assert body(MetadataRequest(topics, False, False, True), version) == theirs


@pytest.mark.parametrize("version", versions(ApiKey.INIT_PRODUCER_ID))
@pytest.mark.parametrize("txn", [None, "my-txn"])
def test_init_producer_id_request_matches_kafka_python(version, txn):
    from kafka.protocol.producer import InitProducerIdRequest as KI

    theirs = KI[version](transactional_id=txn, transaction_timeout_ms=9000, producer_id=77,
                         producer_epoch=5).encode(version=version)
    assert body(InitProducerIdRequest(txn, 9000, 77, 5), version) == bytes(theirs).hex()


@pytest.mark.parametrize("version", versions(ApiKey.API_VERSIONS))
def test_api_versions_request_matches_kafka_python(version):
    from kafka.protocol.metadata import ApiVersionsRequest as KA

    kwargs = {"client_software_name": "sk", "client_software_version": "0.1"} if version >= 3 else {}
    theirs = KA[version](**kwargs).encode(version=version)
    assert body(ApiVersionsRequest("sk", "0.1"), version) == bytes(theirs).hex()


def _kafka_python_response(api_key):
    from kafka.protocol.metadata import ApiVersionsResponse as A
    from kafka.protocol.metadata import MetadataResponse as M
    from kafka.protocol.producer import InitProducerIdResponse as I
    from kafka.protocol.producer import ProduceResponse as P

    return {ApiKey.PRODUCE: P, ApiKey.METADATA: M, ApiKey.API_VERSIONS: A, ApiKey.INIT_PRODUCER_ID: I}[api_key]


RICH_RESPONSES = {
    ApiKey.PRODUCE: ProduceResponse(
        [TopicProduceResponse("t1", [
            PartitionProduceResponse(0, 0, 100, 1700000000000, 5, [(1, "bad record"), (4, None)],
                                     "batch dropped", LeaderIdAndEpoch(2, 9)),
            PartitionProduceResponse(1, 6, -1, -1, -1)]),
         TopicProduceResponse("t2", [])],
        33, [NodeEndpoint(2, "broker-2", 9093, "rack-b")]),
    ApiKey.METADATA: MetadataResponse(
        [MetadataBroker(1, "b1", 9092, "r1"), MetadataBroker(2, "b2", 9093, None)],
        [MetadataTopic(0, "t", [MetadataPartition(0, 0, 1, 4, [1, 2], [1], [2]),
                                MetadataPartition(5, 1, -1, 2, [2], [], [])],
                       True, uuid.UUID(int=12345), 8),
         MetadataTopic(3, "missing", [], False)],
        "cluster-xyz", 2, 7, 1),
    ApiKey.API_VERSIONS: ApiVersionsResponse(0, [ApiVersionRange(0, 3, 11), ApiVersionRange(18, 0, 4)], 3),
    ApiKey.INIT_PRODUCER_ID: InitProducerIdResponse(4, 0, 123456789012, 7),
}


@pytest.mark.parametrize("api_key, version", [
    (k, v) for k in RICH_RESPONSES for v in versions(k)])
def test_kafka_python_reads_our_responses_and_reencodes_the_same_bytes(api_key, version):
    ours = bytes.fromhex(body(RICH_RESPONSES[api_key], version))
    theirs = _kafka_python_response(api_key).decode(ours, version=version)
    theirs._header = None  # kafka-python 3.0.12 leaves it unset after decode
    assert bytes(theirs.encode(version=version)) == ours
    # and the values they read are the ones we meant
    if api_key == ApiKey.PRODUCE:
        p = theirs.responses[0].partition_responses[0]
        assert (p.index, p.base_offset, p.log_append_time_ms) == (0, 100, 1700000000000)
        if version >= 8:
            assert p.error_message == "batch dropped"
            assert [(e.batch_index, e.batch_index_error_message) for e in p.record_errors] == [
                (1, "bad record"), (4, None)]
        if version >= 10:
            assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (2, 9)
    elif api_key == ApiKey.METADATA:
        assert [b.host for b in theirs.brokers] == ["b1", "b2"]
        assert theirs.topics[0].partitions[1].error_code == 5


# --- behaviour ------------------------------------------------------------------------------

def test_produce_encode_does_not_copy_record_batches():
    batches = [bytes(1000), bytearray(10), memoryview(b"z" * 100)]
    request = ProduceRequest(None, -1, 1000, [("a", [(0, batches[0]), (1, batches[1])]),
                                              ("b", [(0, batches[2])])])
    for version in versions(ApiKey.PRODUCE):
        parts = request.encode(version)
        for batch in batches:
            assert any(part is batch for part in parts), version


def test_produce_request_decode_and_expects_response():
    request = ProduceRequest("t", 0, 5, [("a", [(0, b"xyz")])])
    assert not request.expects_response
    assert ProduceRequest(None, 1, 5, []).expects_response
    for version in versions(ApiKey.PRODUCE):
        decoded = decode(request, memoryview(bytes.fromhex(body(request, version))), version)
        assert decoded == request.as_message()


def test_api_versions_response_helpers():
    r = RICH_RESPONSES[ApiKey.API_VERSIONS]
    assert r.version_range(ApiKey.PRODUCE) == (3, 11)
    assert r.version_range(ApiKey.FETCH) is None


def test_api_versions_v0_fallback_only_for_unsupported_version():
    """KIP-511: a broker that does not know our ApiVersions version answers UNSUPPORTED_VERSION in
    the v0 layout; any other error in v0 layout is malformed (the broker protocol object)."""
    def answer(body_hex):
        proto = BrokerProtocol("c")
        proto.send(ApiVersionsRequest("c", "1"), 3)
        frame = bytes.fromhex("00000001" + body_hex)
        return proto.receive(len(frame).to_bytes(4, "big") + frame)

    ((_, response),) = answer("0023" "00000001" "001200000003")
    assert response.error_code == 35
    with pytest.raises(ProtocolError):
        answer("0001" "00000001" "001200000003")


@pytest.mark.parametrize("name, version", [
    ("ProduceRequest", 2), ("ProduceResponse", 13), ("MetadataResponse", 0), ("MetadataRequest", 13),
    ("InitProducerIdResponse", 2), ("ApiVersionsResponse", 4)])
def test_unsupported_versions_are_refused(name, version):
    with pytest.raises(UnsupportedVersionError):
        messages.decode_body(name, b"", version)
    if name == "ProduceResponse":
        with pytest.raises(UnsupportedVersionError):
            decode_produce_response(b"", version)
    if name == "ProduceRequest":
        with pytest.raises(UnsupportedVersionError):
            ProduceRequest(None, 1, 1, []).encode(version)
