"""Values of declared messages for tests: deterministic samples (``sample``) and hypothesis
strategies (``values``), built from the declarations themselves, so every field a version has
is exercised -- tagged fields set so they travel, nulls where the version allows them."""

from __future__ import annotations

import random
import uuid
from typing import Any

from hypothesis import strategies as st

from sparkkafka_sink.protocol.schema import Field, StructSchema

_BITS = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}


def sample(schema: StructSchema, version: int, seed: int, records=None) -> Any:
    """A reproducible value of ``schema`` at ``version``; ``records(rng)`` makes record batches."""
    return _Sample(random.Random(seed), version, records).struct(schema)


class _Sample:
    def __init__(self, rng: random.Random, version: int, records):
        self.rng, self.version, self.records = rng, version, records

    def struct(self, schema: StructSchema) -> Any:
        obj = schema.cls()
        for f in schema.fields:
            if f.present_in(self.version):
                setattr(obj, f.name, self.field(f))
        return obj

    def field(self, f: Field) -> Any:
        rng = self.rng
        if f.nullable_in(self.version) and rng.random() < 0.25:
            return None
        if f.is_array:
            return [self.value(f, f.element) for _ in range(rng.randrange(0 if rng.random() < 0.2 else 1, 4))]
        return self.value(f, f.type)

    def value(self, f: Field, type_: str) -> Any:
        rng = self.rng
        if type_ == "bool":
            return rng.random() < 0.5
        bits = _BITS.get(type_)
        if bits is not None:
            return rng.choice([-1, 0, 1, 127, -(1 << bits), (1 << bits) - 1, rng.randrange(-(1 << bits), 1 << bits)])
        if type_ == "uint16":
            return rng.choice([0, 65535, rng.randrange(65536)])
        if type_ == "uint32":
            return rng.choice([0, (1 << 32) - 1, rng.randrange(1 << 32)])
        if type_ == "float64":
            return rng.choice([0.0, -1.5, 1e300, rng.random()])
        if type_ == "string":
            return rng.choice(["", "topic-a", "ünïcödé-鍵", "x" * rng.randrange(1, 200)])
        if type_ == "bytes":
            return rng.randbytes(rng.randrange(0, 40))
        if type_ == "records":
            return self.records(rng) if self.records else rng.randbytes(rng.randrange(0, 40))
        if type_ == "uuid":
            return uuid.UUID(bytes=rng.randbytes(16))
        return self.struct(f.struct)


_SCALARS = {
    "bool": st.booleans(),
    "int8": st.integers(-(2**7), 2**7 - 1), "int16": st.integers(-(2**15), 2**15 - 1),
    "int32": st.integers(-(2**31), 2**31 - 1), "int64": st.integers(-(2**63), 2**63 - 1),
    "uint16": st.integers(0, 2**16 - 1), "uint32": st.integers(0, 2**32 - 1),
    "float64": st.floats(allow_nan=False), "string": st.text(max_size=12),
    "bytes": st.binary(max_size=20), "records": st.binary(max_size=20), "uuid": st.uuids(),
}


def values(schema: StructSchema, version: int) -> st.SearchStrategy:
    """Hypothesis values of ``schema`` at ``version`` (fields the version lacks keep defaults)."""
    @st.composite
    def build(draw):
        obj = schema.cls()
        for f in schema.fields:
            if f.present_in(version):
                setattr(obj, f.name, draw(_field(f, version)))
        return obj
    return build()


def _field(f: Field, version: int) -> st.SearchStrategy:
    one = _SCALARS.get(f.element) if f.element in _SCALARS else st.deferred(lambda: values(f.struct, version))
    strategy = st.lists(one, max_size=3) if f.is_array else one
    return st.none() | strategy if f.nullable_in(version) else strategy
