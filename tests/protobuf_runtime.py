"""Protobuf's own runtime as the independent reader of what the sink writes: a schema's text
compiled by protoc (grpcio-tools) into message classes, and messages filled from rows by the
runtime's API (Confluent's conversion for decimals)."""

from __future__ import annotations

import datetime as dt
import os
import tempfile
from decimal import Decimal

import pyarrow as pa
from confluent_kafka.schema_registry.confluent.type import decimal_pb2
from confluent_kafka.schema_registry.protobuf import decimal_to_protobuf
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message
from grpc_tools import protoc

from sparkkafka_sink.serialization.protobuf_schema import ProtoFile, parse_proto


def descriptor_set(text: str) -> descriptor_pb2.FileDescriptorSet:
    """``.proto`` ``text`` compiled by protoc into a descriptor set, its imports first, from their
    own packages (protoc's well-known types, googleapis' Date, Confluent's Decimal as Confluent
    ships it)."""
    import google.type.date_pb2 as date_pb2
    import grpc_tools

    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "column.proto"), "w") as f:
            f.write(text)
        confluent = descriptor_pb2.FileDescriptorSet()
        confluent.file.add().ParseFromString(decimal_pb2.DESCRIPTOR.serialized_pb)
        deps = os.path.join(tmp, "confluent.pb")
        with open(deps, "wb") as f:
            f.write(confluent.SerializeToString())
        out = os.path.join(tmp, "out.pb")
        googleapis = os.path.dirname(os.path.dirname(os.path.dirname(date_pb2.__file__)))
        well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
        code = protoc.main(["protoc", f"--proto_path={tmp}", f"--proto_path={googleapis}",
                            f"--proto_path={well_known}", f"--descriptor_set_in={deps}", "--include_imports",
                            f"--descriptor_set_out={out}", os.path.join(tmp, "column.proto")])
        assert code == 0, f"protoc refused the schema:\n{text}"
        files = descriptor_pb2.FileDescriptorSet()
        with open(out, "rb") as f:
            files.ParseFromString(f.read())
    return files


def compiled(schema: ProtoFile, text: str | None = None) -> type[Message]:
    """The message class of ``schema`` (of its ``.proto`` ``text``, by default its own rendering)."""
    pool = descriptor_pool.DescriptorPool()
    for file in descriptor_set(schema.text() if text is None else text).file:  # dependencies first
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(schema.full_name))


def filled(cls: type[Message], value: dict, arrow_type: pa.DataType) -> Message:
    message = cls()
    _fill(message, value, arrow_type)
    return message


def _fill(message: Message, value: dict, t: pa.DataType) -> None:
    for f in message.DESCRIPTOR.fields:
        v, ft = value.get(f.name), t.field(f.name).type
        if v is None:
            continue
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            target = getattr(message, f.name)
            for key, item in v:
                if pa.types.is_struct(ft.item_type):
                    _fill(target[key], item, ft.item_type)
                else:
                    _set(target, key, item, ft.item_type)
        elif f.is_repeated:
            target = getattr(message, f.name)
            for item in v:
                if f.message_type is not None:
                    _value_into(target.add(), item, ft.value_type)
                else:
                    target.append(item)
        elif f.message_type is not None:
            sub = getattr(message, f.name)
            sub.SetInParent()
            _value_into(sub, v, ft)
        else:
            setattr(message, f.name, v)


def _set(target, key, item, t: pa.DataType) -> None:
    if isinstance(item, (dt.datetime, dt.timedelta, dt.date, Decimal)):
        _value_into(target[key], item, t)
    else:
        target[key] = item


def _value_into(sub: Message, v: object, t: pa.DataType) -> None:
    name = sub.DESCRIPTOR.full_name
    if name == "google.protobuf.Timestamp":
        assert isinstance(v, dt.datetime)
        epoch = dt.datetime(1970, 1, 1, tzinfo=v.tzinfo)
        sub.FromMicroseconds((v - epoch) // dt.timedelta(microseconds=1))
    elif name == "google.protobuf.Duration":
        assert isinstance(v, dt.timedelta)
        sub.FromTimedelta(v)
    elif name == "google.type.Date":
        assert isinstance(v, dt.date)
        sub.year, sub.month, sub.day = v.year, v.month, v.day
    elif name == "confluent.type.Decimal":
        assert isinstance(v, Decimal)
        confluents = decimal_to_protobuf(v, t.scale)  # Confluent's own conversion
        sub.value, sub.precision, sub.scale = confluents.value, confluents.precision, confluents.scale
    else:
        assert isinstance(v, dict)
        _fill(sub, v, t)


def compiled_text(text: str, message_name: str | None = None) -> type[Message]:
    """The class of ``message_name`` (the first message by default) of ``.proto`` ``text``."""
    return compiled(parse_proto(text, message_name), text)
