"""Every declared message, at every version we speak, encodes to the bytes Apache Kafka's
own generated classes write, and Kafka's classes read our bytes back to the same values.

For each message and version a value is generated from the declaration (every field the version
has, tagged fields set so they travel, nulls where the version allows them).  ``MessageCodec.java``
builds the same value through Kafka's JsonConverter, encodes it (the Java-encoded frame) and
decodes our encoding.  Checked: our bytes == Java's bytes; our decoder on Java's bytes gives the
value back; Java's decoder on our bytes gives the value back.
"""

from __future__ import annotations

import base64
import json
import random
from typing import Any

import pytest
from message_values import sample

from sparkkafka_sink.protocol import codec
from sparkkafka_sink.protocol.api import SUPPORTED_VERSIONS
from sparkkafka_sink.protocol.messages import SPEC_NAMES
from sparkkafka_sink.protocol.schema import Field, MessageSchema, StructSchema, load
from sparkkafka_sink.record.batch import RecordBatchBuilder

from .support import needs_java_oracle

pytestmark = needs_java_oracle


def _record_batch(rng: random.Random) -> bytes:
    b = RecordBatchBuilder(0, 1 << 20)
    for i in range(rng.randrange(1, 4)):
        b.try_append(1_700_000_000_000 + i, rng.randbytes(3), rng.randbytes(5), [("h", b"v")])
    return b.build(7, 1, 0)


def _to_json(schema: StructSchema, obj: Any, version: int, omit_default_tags: bool = False) -> dict:
    """``obj`` as Kafka's JsonConverter spells it: camelCase fields, base64 bytes, Kafka uuids
    (``omit_default_tags``: as its writer prints, without tagged fields at their default)."""
    out = {}
    for f in schema.fields:
        if not f.present_in(version):
            continue
        value = getattr(obj, f.name)
        if omit_default_tags and f.tagged_in(version) and value == f.new_default():
            continue
        out[f.spec_name[0].lower() + f.spec_name[1:]] = _json_value(f, value, version)
    return out


def _json_value(f: Field, value: Any, version: int) -> Any:
    if value is None:
        return None
    if f.is_array:
        return [_json_scalar(f, f.element, v, version) for v in value]
    return _json_scalar(f, f.type, value, version)


def _json_scalar(f: Field, type_: str, value: Any, version: int) -> Any:
    if type_ in ("bytes", "records"):
        return base64.b64encode(bytes(value)).decode()
    if type_ == "uuid":
        return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")
    if f.struct is not None and type_ == f.struct.name:
        return _to_json(f.struct, value, version)
    return value


def _without_records(value):
    """Kafka's JsonConverter cannot print records it decoded (it writes ""); byte equality of the
    whole message already covers them."""
    if isinstance(value, dict):
        return {k: _without_records(v) for k, v in value.items() if k != "records"}
    if isinstance(value, list):
        return [_without_records(v) for v in value]
    return value


def _difference(got, want, path="") -> str:
    """The first place two JSON values differ, for the failure message."""
    if isinstance(got, dict) and isinstance(want, dict):
        for k in sorted(set(got) | set(want)):
            if got.get(k, "<missing>") != want.get(k, "<missing>"):
                return _difference(got.get(k, "<missing>"), want.get(k, "<missing>"), f"{path}.{k}")
    if isinstance(got, list) and isinstance(want, list) and len(got) == len(want):
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            if g != w:
                return _difference(g, w, f"{path}[{i}]")
    return f"{path}: {str(got)[:120]} (expected {str(want)[:120]})"


def _cases():
    """Every declared message at every version we speak of it."""
    for name in SPEC_NAMES:
        lo, hi = SUPPORTED_VERSIONS[load(name).api_key]
        for version in range(lo, hi + 1):
            yield name, version


CASES = list(_cases())


def _encode(message: MessageSchema, obj, version: int) -> bytes:
    return b"".join(bytes(p) for p in codec.encode(message, obj, version))


def test_every_declared_message_matches_kafkas_generated_classes(java, tmp_path):
    lines, expected = [], []
    for i, (name, version) in enumerate(CASES):
        message = load(name)
        value = sample(message, version, seed=i, records=_record_batch)
        ours = _encode(message, value, version)
        want_json = _to_json(message, value, version)
        lines.append(f"{name}\t{version}\t{json.dumps(want_json)}\t{ours.hex()}")
        expected.append((name, version, message, value, ours, want_json))
    (tmp_path / "in.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    java.run("MessageCodec", tmp_path / "in.tsv", tmp_path / "out.tsv")
    results = (tmp_path / "out.tsv").read_text(encoding="utf-8").splitlines()
    assert len(results) == len(expected)
    failures = []
    for (name, version, message, value, ours, want_json), line in zip(expected, results, strict=True):
        java_hex, java_json = line.split("\t")
        java_bytes = bytes.fromhex(java_hex)
        if ours != java_bytes:
            failures.append(f"{name} v{version}: our bytes {ours.hex()[:120]} != Java's {java_hex[:120]}")
            continue
        decoded = codec.decode(message, java_bytes, version)
        if _to_json(message, decoded, version) != want_json:
            failures.append(f"{name} v{version}: we decode Java's bytes to {_to_json(message, decoded, version)}")
        java_read = _without_records(json.loads(java_json))
        printed = _without_records(_to_json(message, value, version, omit_default_tags=True))
        if java_read != printed:
            failures.append(f"{name} v{version}: Java reads our bytes differently: {_difference(java_read, printed)}")
    assert not failures, f"{len(failures)} of {len(expected)} cases differ:\n" + "\n".join(failures[:20])
    covered = {name for name, _ in CASES}
    assert covered == set(SPEC_NAMES)


@pytest.mark.parametrize("name", ["SaslHandshakeRequest", "SaslAuthenticateRequest", "FindCoordinatorRequest",
                                  "AddPartitionsToTxnRequest", "EndTxnRequest", "ListTransactionsRequest",
                                  "DescribeTransactionsRequest", "DescribeProducersRequest"])
def test_the_security_and_transaction_apis_are_declared(name):
    """What security and transactions will need is declared (and so covered above)."""
    assert name in SPEC_NAMES and name.replace("Request", "Response") in SPEC_NAMES
