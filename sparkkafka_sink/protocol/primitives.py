"""Kafka primitive types: a ``Writer`` that builds bodies and a ``Reader`` that parses them.

Every message codec is written in terms of these two classes, so this is the one place that
knows the wire encodings and the one place that turns malformed input into ``ProtocolError``.
The ``Writer`` keeps large payloads (record batches) as references instead of copying them,
so a request can go out through ``socket.sendmsg`` as a list of buffers.
"""

from __future__ import annotations

import builtins
import struct
import uuid as _uuid
from typing import Any, Protocol

from sparkkafka_sink.errors import ProtocolError
from sparkkafka_sink.varint import decode_unsigned_varint
from sparkkafka_sink.varint import encode_unsigned_varint as encode_uvarint

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_F64 = struct.Struct(">d")
_UUID = struct.Struct(">16s")

ZERO_UUID = _uuid.UUID(int=0)

_MAX_UVARINT_BYTES = 5  # lengths, counts and tags are at most 32 bits


def _utf8(value: str) -> bytes:
    return value.encode("utf-8")


class Pieces(Protocol):
    """A value written by reference in pieces: a record batch kept as its buffers."""

    @property
    def parts(self) -> list: ...

    def __len__(self) -> int: ...


#: what a bytes field holds: bytes, or a record batch in pieces
Payload = builtins.bytes | bytearray | memoryview | Pieces


class Writer:
    """Appends Kafka primitives to a bytearray.

    ``external(data)`` adds a buffer by reference (no copy); ``parts()`` then returns the body as
    a list of buffers in order.  ``getvalue()`` joins everything into one ``bytes`` (tests).
    """

    __slots__ = ("_buf", "_parts")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._parts: list = []

    # -- fixed width -------------------------------------------------------------------------
    def int8(self, v: int) -> None:
        self._buf += _I8.pack(v)

    def int16(self, v: int) -> None:
        self._buf += _I16.pack(v)

    def int32(self, v: int) -> None:
        self._buf += _I32.pack(v)

    def int64(self, v: int) -> None:
        self._buf += _I64.pack(v)

    def uint16(self, v: int) -> None:
        self._buf += _U16.pack(v)

    def uint32(self, v: int) -> None:
        self._buf += _U32.pack(v)

    def float64(self, v: float) -> None:
        self._buf += _F64.pack(v)

    def boolean(self, v: bool) -> None:
        self._buf.append(1 if v else 0)

    def uuid(self, v: _uuid.UUID | None) -> None:
        self._buf += (v or ZERO_UUID).bytes

    def raw(self, data: builtins.bytes | bytearray | memoryview) -> None:
        """Copy ``data`` into the buffer (small payloads)."""
        self._buf += data

    # -- variable width ----------------------------------------------------------------------
    def uvarint(self, v: int) -> None:
        if 0 <= v < 0x80:
            self._buf.append(v)
        else:
            self._buf += encode_uvarint(v)

    # -- strings (int16 length / compact uvarint length+1) ----------------------------------
    def string(self, v: str) -> None:
        data = _utf8(v)
        self._buf += _I16.pack(len(data))
        self._buf += data

    def nullable_string(self, v: str | None) -> None:
        if v is None:
            self._buf += b"\xff\xff"
        else:
            self.string(v)

    def compact_string(self, v: str) -> None:
        data = _utf8(v)
        self.uvarint(len(data) + 1)
        self._buf += data

    def compact_nullable_string(self, v: str | None) -> None:
        if v is None:
            self._buf.append(0)
        else:
            self.compact_string(v)

    # -- bytes (int32 length / compact). ``external=True`` keeps a reference, no copy. -------
    def bytes(self, v: Payload, external: bool = False) -> None:
        self._buf += _I32.pack(_nbytes(v))
        self._payload(v, external)

    def nullable_bytes(self, v: Payload | None, external: bool = False) -> None:
        if v is None:
            self._buf += b"\xff\xff\xff\xff"
        else:
            self.bytes(v, external)

    def compact_bytes(self, v: Payload, external: bool = False) -> None:
        self.uvarint(_nbytes(v) + 1)
        self._payload(v, external)

    def compact_nullable_bytes(self, v: Payload | None, external: bool = False) -> None:
        if v is None:
            self._buf.append(0)
        else:
            self.compact_bytes(v, external)

    def _payload(self, v: Payload, external: bool) -> None:
        if external or not isinstance(v, (builtins.bytes, bytearray, memoryview)):  # (pieces go by reference)
            self.external(v)
        else:
            self._buf += v

    # -- arrays ------------------------------------------------------------------------------
    def array_length(self, n: int | None) -> None:
        """int32 count; ``None`` writes the null array (-1)."""
        self._buf += _I32.pack(-1 if n is None else n)

    def compact_array_length(self, n: int | None) -> None:
        """uvarint count+1; ``None`` writes the null array (0)."""
        self.uvarint(0 if n is None else n + 1)

    # -- tagged fields (flexible versions) --------------------------------------------------
    def empty_tagged_fields(self) -> None:
        self._buf.append(0)

    # -- output ------------------------------------------------------------------------------
    def external(self, data: Payload) -> None:
        """Append ``data`` by reference: it becomes its own element of ``parts()`` (a value with
        ``parts``, a record batch kept as its buffers, becomes one element per buffer)."""
        if self._buf:
            self._parts.append(bytes(self._buf))
            self._buf = bytearray()
        if _nbytes(data):
            parts = getattr(data, "parts", None)
            if parts is None:
                self._parts.append(data)
            else:
                self._parts.extend(parts)

    def parts(self) -> list:
        """The written body as a list of buffers (record batches are the caller's objects)."""
        if self._buf:
            return [*self._parts, bytes(self._buf)]
        return list(self._parts)

    def getvalue(self) -> builtins.bytes:  # builtins': ``bytes`` here is the method above
        return b"".join(self.parts())

    def __len__(self) -> int:
        return sum(map(_nbytes, self._parts)) + len(self._buf)


def _nbytes(data: Payload) -> int:
    return data.nbytes if isinstance(data, memoryview) else len(data)


def _underflow(need: int, pos: int, size: int) -> ProtocolError:
    return ProtocolError(f"truncated data: need {need} byte(s) at offset {pos}, have {size - pos}")


class Reader:
    """Reads Kafka primitives from a buffer, advancing ``pos``.

    Byte fields come back as ``memoryview`` slices of the input (no copy).  Any malformed value
    raises ``ProtocolError``.
    """

    __slots__ = ("_buf", "pos", "_end")

    def __init__(self, data: builtins.bytes | bytearray | memoryview, pos: int = 0) -> None:
        buf = data if isinstance(data, memoryview) else memoryview(data)
        if buf.format != "B" or buf.ndim != 1:
            buf = buf.cast("B")
        self._buf = buf
        self.pos = pos
        self._end = buf.nbytes

    @property
    def buffer(self) -> memoryview:
        return self._buf

    @property
    def remaining(self) -> int:
        return self._end - self.pos

    def _unpack(self, st: struct.Struct) -> tuple[Any, ...]:
        pos = self.pos
        try:
            value = st.unpack_from(self._buf, pos)
        except struct.error:
            raise _underflow(st.size, pos, self._end) from None
        self.pos = pos + st.size
        return value

    def unpack(self, st: struct.Struct) -> tuple:
        """Read a precompiled struct in one call (hot paths with several fixed-width fields)."""
        return self._unpack(st)

    # -- fixed width -------------------------------------------------------------------------
    def int8(self) -> int:
        return self._unpack(_I8)[0]

    def int16(self) -> int:
        return self._unpack(_I16)[0]

    def int32(self) -> int:
        return self._unpack(_I32)[0]

    def int64(self) -> int:
        return self._unpack(_I64)[0]

    def uint16(self) -> int:
        return self._unpack(_U16)[0]

    def uint32(self) -> int:
        return self._unpack(_U32)[0]

    def float64(self) -> float:
        return self._unpack(_F64)[0]

    def boolean(self) -> bool:
        return self._unpack(_I8)[0] != 0

    def uuid(self) -> _uuid.UUID:
        return _uuid.UUID(bytes=self._unpack(_UUID)[0])

    def raw(self, n: int) -> memoryview:
        """The next ``n`` bytes as a memoryview slice."""
        pos = self.pos
        end = pos + n
        if n < 0 or end > self._end:
            raise _underflow(n, pos, self._end)
        self.pos = end
        return self._buf[pos:end]

    # -- variable width ----------------------------------------------------------------------
    def uvarint(self) -> int:
        """Unsigned varint of at most 5 bytes (32 bits)."""
        value, pos = decode_unsigned_varint(self._buf[:self._end], self.pos, _MAX_UVARINT_BYTES)
        if value > 0xFFFFFFFF:
            raise ProtocolError(f"varint overflows 32 bits at offset {self.pos}")
        self.pos = pos
        return value

    # -- strings -----------------------------------------------------------------------------
    def _text(self, n: int) -> str:
        data = self.raw(n)
        try:
            return str(data, "utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"invalid UTF-8 in string at offset {self.pos - n}: {exc}") from None

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise ProtocolError(f"negative string length {n} at offset {self.pos - 2}")
        return self._text(n)

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n == -1:
            return None
        if n < 0:
            raise ProtocolError(f"invalid string length {n} at offset {self.pos - 2}")
        return self._text(n)

    def compact_string(self) -> str:
        n = self.uvarint()
        if n == 0:
            raise ProtocolError(f"null where a non-null compact string is required at offset {self.pos - 1}")
        return self._text(n - 1)

    def compact_nullable_string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self._text(n - 1)

    # -- bytes -------------------------------------------------------------------------------
    def bytes(self) -> memoryview:
        n = self.int32()
        if n < 0:
            raise ProtocolError(f"negative bytes length {n} at offset {self.pos - 4}")
        return self.raw(n)

    def nullable_bytes(self) -> memoryview | None:
        n = self.int32()
        if n == -1:
            return None
        if n < 0:
            raise ProtocolError(f"invalid bytes length {n} at offset {self.pos - 4}")
        return self.raw(n)

    def compact_bytes(self) -> memoryview:
        n = self.uvarint()
        if n == 0:
            raise ProtocolError(f"null where non-null compact bytes are required at offset {self.pos - 1}")
        return self.raw(n - 1)

    def compact_nullable_bytes(self) -> memoryview | None:
        n = self.uvarint()
        return None if n == 0 else self.raw(n - 1)

    # -- arrays ------------------------------------------------------------------------------
    def _check_count(self, n: int, min_item_size: int) -> int:
        # Every array element takes at least one byte: a count larger than what is left is
        # malformed, and rejecting it early stops a hostile count from allocating huge lists.
        if n * min_item_size > self._end - self.pos:
            raise ProtocolError(f"array count {n} exceeds the {self._end - self.pos} bytes left")
        return n

    def array_length(self, min_item_size: int = 1) -> int | None:
        """int32 count; ``None`` for the null array (-1)."""
        n = self.int32()
        if n == -1:
            return None
        if n < 0:
            raise ProtocolError(f"invalid array length {n} at offset {self.pos - 4}")
        return self._check_count(n, min_item_size)

    def compact_array_length(self, min_item_size: int = 1) -> int | None:
        """uvarint count+1; ``None`` for the null array (0)."""
        n = self.uvarint()
        if n == 0:
            return None
        return self._check_count(n - 1, min_item_size)

    # -- tagged fields -----------------------------------------------------------------------
    def tagged_fields(self) -> dict[int, memoryview]:
        """All tagged fields as ``{tag: raw bytes}``."""
        n = self.uvarint()
        if n == 0:
            return {}
        self._check_count(n, 2)
        fields = {}
        for _ in range(n):
            tag = self.uvarint()
            fields[tag] = self.raw(self.uvarint())
        return fields

    def skip_tagged_fields(self) -> None:
        n = self.uvarint()
        for _ in range(n):
            self.uvarint()
            size = self.uvarint()
            if size > self._end - self.pos:
                raise _underflow(size, self.pos, self._end)
            self.pos += size
