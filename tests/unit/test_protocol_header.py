"""Request/response headers and the size prefix, against hand-computed bytes and kafka-python."""

from __future__ import annotations

import pytest
from broker_frames import decode_request_header, encode_response_header

from sparkkafka_sink.errors import ProtocolError
from sparkkafka_sink.protocol import ApiKey, decode_response_header, encode_request
from sparkkafka_sink.protocol.header import request_header_version, response_header_version


def test_request_header_v1_golden():
    body = b"\xff\xff\xff\xff"  # Metadata v1: all topics
    parts = encode_request(ApiKey.METADATA, 1, 7, "cid", [body])
    #           size      api  ver  corr      client id
    expected = "00000011" "0003" "0001" "00000007" "0003636964" "ffffffff"
    assert b"".join(parts).hex() == expected
    assert parts[1] is body


def test_request_header_v2_golden_keeps_int16_client_id_and_adds_tags():
    parts = encode_request(ApiKey.METADATA, 12, 7, "cid", [b"\x01", b"\x00"])
    expected = "00000010" "0003" "000c" "00000007" "0003636964" "00" "01" "00"
    assert b"".join(parts).hex() == expected


def test_null_client_id_and_memoryview_body_sizes():
    body = memoryview(bytearray(300))
    parts = encode_request(ApiKey.PRODUCE, 3, 1, None, [body])
    assert parts[0].hex() == "00000136" "0000" "0003" "00000001" "ffff"
    assert parts[1] is body


def test_header_versions():
    assert request_header_version(ApiKey.PRODUCE, 8) == 1
    assert request_header_version(ApiKey.PRODUCE, 9) == 2
    assert response_header_version(ApiKey.PRODUCE, 9) == 1
    assert response_header_version(ApiKey.METADATA, 8) == 0
    # KIP-511: ApiVersions responses always use header v0, even when the body is flexible.
    assert request_header_version(ApiKey.API_VERSIONS, 3) == 2
    assert response_header_version(ApiKey.API_VERSIONS, 3) == 0


@pytest.mark.parametrize("api_key, version, frame, expected", [
    (ApiKey.METADATA, 1, "0000002a" "ff", (42, 4)),
    (ApiKey.METADATA, 12, "0000002a" "00" "ff", (42, 5)),
    (ApiKey.PRODUCE, 9, "0000002a" "01" "0002" "6869" "ff", (42, 9)),  # an unknown tag skipped
    (ApiKey.API_VERSIONS, 3, "0000002a" "00", (42, 4)),
])
def test_decode_response_header(api_key, version, frame, expected):
    assert decode_response_header(memoryview(bytes.fromhex(frame)), api_key, version) == expected


@pytest.mark.parametrize("frame", ["", "000000", "0000002a", "0000002a05"])
def test_decode_response_header_malformed(frame):
    with pytest.raises(ProtocolError):
        decode_response_header(memoryview(bytes.fromhex(frame)), ApiKey.PRODUCE, 9)


def test_the_broker_side_of_the_tests_reads_our_requests_and_writes_what_we_read():
    frame = b"".join(encode_request(ApiKey.PRODUCE, 9, 5, "me", [b"body"]))[4:]
    assert decode_request_header(frame) == (0, 9, 5, "me", 13)
    resp = b"".join(encode_response_header(ApiKey.PRODUCE, 9, 5, [b"xy"]))
    assert resp.hex() == "00000007" "00000005" "00" "7879"


@pytest.mark.parametrize("version", [0, 3])
def test_header_matches_kafka_python(version):
    from kafka.protocol.metadata import ApiVersionsRequest as KpApiVersions

    req = KpApiVersions[version](client_software_name="a", client_software_version="1")
    req.with_header(correlation_id=7, client_id="cid")
    theirs = req.encode(version=version, header=True, framed=True)
    body = b"\x02a\x021\x00" if version == 3 else b""
    ours = b"".join(encode_request(ApiKey.API_VERSIONS, version, 7, "cid", [body]))
    assert ours == bytes(theirs)
