"""Record batch v2 (magic 2): the row-at-a-time builder, re-stamping, and a checking decoder.

Layout (KIP-98), big-endian; the CRC-32C covers ``attributes`` to the end::

    0  baseOffset int64        27 baseTimestamp int64     57 recordCount int32
    8  batchLength int32       35 maxTimestamp int64      61 records...
    12 partitionLeaderEpoch    43 producerId int64
    16 magic int8              51 producerEpoch int16
    17 crc uint32              53 baseSequence int32
    21 attributes int16
    23 lastOffsetDelta int32

Each record: ``length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
keyLength varint | key | valueLength varint | value | headerCount varint | headers``, where a
null key/value has length -1 and a header is ``keyLength varint | key utf-8 | valueLength varint
| value``.  Only the records section is compressed.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

from sparkkafka_sink.errors import InvalidRecordError, ProtocolError
from sparkkafka_sink.record.compression import CompressionType, compress, decompress
from sparkkafka_sink.record.crc import crc32c
from sparkkafka_sink.varint_columns import (
    SMALL_LIMIT,
    SMALL_VARINTS,
    decode_varint,
    decode_varlong,
    size_of_varint,
    varint_bytes,
)

__all__ = [
    "MAGIC",
    "BATCH_OVERHEAD",
    "MAX_RECORD_OVERHEAD",
    "CRC_OFFSET",
    "ATTRIBUTES_OFFSET",
    "NO_TIMESTAMP",
    "RecordBatchBuilder",
    "EncodedRecordsBuilder",
    "encode_record",
    "encode_headers",
    "headers_size",
    "estimate_record_size",
    "estimate_batch_size_upper_bound",
    "batch_attributes",
    "batch_header",
    "finish_batch",
    "finish_batch_in_place",
    "BatchBuffers",
    "set_producer_state",
    "DecodedRecord",
    "DecodedBatch",
    "decode_batches",
]

MAGIC = 2
BATCH_OVERHEAD = 61  # header bytes before the first record
#: Upper bound of a record's fixed part: length (5) + attributes (1) + timestamp delta (10) +
#: offset delta (5), as in Java's ``DefaultRecord.MAX_RECORD_OVERHEAD``.
MAX_RECORD_OVERHEAD = 21
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
PRODUCER_ID_OFFSET = 43
RECORDS_COUNT_OFFSET = 57
NO_TIMESTAMP = -1
NO_PARTITION_LEADER_EPOCH = -1

TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
COMPRESSION_MASK = 0x07

_HEADER = struct.Struct(">qiibIhiqqqhii")  # the whole header, for decoding
# baseOffset, batchLength, partitionLeaderEpoch, magic, crc: the part before the CRC coverage.
_HEAD_CRC = struct.Struct(">qiibI")
# attributes, lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch,
# baseSequence, recordCount: the CRC-covered part of the header.
_TAIL = struct.Struct(">hiqqqhii")
_CRC = struct.Struct(">I")
_PRODUCER_STATE = struct.Struct(">qhi")
assert _HEAD_CRC.size + _TAIL.size == BATCH_OVERHEAD == _HEADER.size

#: a record's headers: ``(key, value)`` pairs, the value bytes-like or None
Headers: TypeAlias = Sequence[tuple[str, bytes | bytearray | memoryview | None]]

_NULL = b"\x01"  # zigzag varint of -1
_NO_HEADERS = b"\x00"
_ATTR = b"\x00"  # record attributes are unused in v2


# ------------------------------------------------------------------------------------- records


def encode_headers(headers: Headers | None) -> bytes:
    """Header count plus headers; ``headers`` is a sequence of ``(str, bytes | None)``."""
    if not headers:
        return _NO_HEADERS
    t, s = SMALL_VARINTS, SMALL_LIMIT
    n = len(headers)
    parts: list[bytes | bytearray | memoryview] = [t[n] if n < s else varint_bytes(n)]
    append = parts.append
    for hkey, hval in headers:
        kb = hkey.encode("utf-8")
        kl = len(kb)
        append(t[kl] if kl < s else varint_bytes(kl))
        append(kb)
        if hval is None:
            append(_NULL)
        else:
            vl = len(hval)
            append(t[vl] if vl < s else varint_bytes(vl))
            append(hval)
    return b"".join(parts)


def headers_size(headers: Headers | None) -> int:
    """Encoded size of :func:`encode_headers`' output, without building it."""
    if not headers:
        return 1
    size = size_of_varint(len(headers))
    for hkey, hval in headers:
        kl = len(hkey.encode("utf-8"))
        size += size_of_varint(kl) + kl
        size += 1 if hval is None else size_of_varint(len(hval)) + len(hval)
    return size


def encode_record(offset_delta: int, timestamp_delta: int, key: bytes | bytearray | memoryview | None,
                  value: bytes | bytearray | memoryview | None,
                  headers: Headers | None = None) -> bytes:
    """One complete record, length prefix included (the builder's hot path).

    Small varints come from a lookup table and the parts are joined once: about twice as fast
    as appending field by field to the batch buffer.
    """
    t, s = SMALL_VARINTS, SMALL_LIMIT
    ts = t[timestamp_delta] if -s <= timestamp_delta < s else varint_bytes(timestamp_delta)
    od = t[offset_delta] if 0 <= offset_delta < s else varint_bytes(offset_delta)
    if key is None:
        kl, klen, key = _NULL, 0, b""
    else:
        klen = len(key)
        kl = t[klen] if klen < s else varint_bytes(klen)
    if value is None:
        vl, vlen, value = _NULL, 0, b""
    else:
        vlen = len(value)
        vl = t[vlen] if vlen < s else varint_bytes(vlen)
    hd = encode_headers(headers) if headers else _NO_HEADERS
    body = 1 + len(ts) + len(od) + len(kl) + klen + len(vl) + vlen + len(hd)
    return b"".join(
        (t[body] if body < s else varint_bytes(body), _ATTR, ts, od, kl, key, vl, value, hd)
    )


def estimate_record_size(key_len: int | None, value_len: int | None, headers: Headers | None = None) -> int:
    """Upper bound of one record's encoded size; ``None`` (or -1) means a null key/value.

    Uses the worst-case sizes for the length, offset delta and timestamp delta, so the result
    holds wherever in a batch the record lands (Java's ``DefaultRecord.recordSizeUpperBound``).
    """
    size = MAX_RECORD_OVERHEAD + headers_size(headers)
    for n in (key_len, value_len):
        if n is None or n < 0:
            size += 1
        else:
            size += size_of_varint(n) + n
    return size


def estimate_batch_size_upper_bound(key_len: int | None, value_len: int | None,
                                    headers: Headers | None = None) -> int:
    """Size bound of a batch holding only this record (what ``max.request.size`` is checked
    against at ``send()``, before compression)."""
    return BATCH_OVERHEAD + estimate_record_size(key_len, value_len, headers)


# ------------------------------------------------------------------------------------ batches


def batch_attributes(compression_type: int, is_transactional: bool = False) -> int:
    """The batch attributes field: codec bits, transactional flag, create-time timestamps."""
    return int(compression_type) | (TRANSACTIONAL_FLAG if is_transactional else 0)


def _tail_fields(attributes: int, record_count: int, base_timestamp: int, max_timestamp: int, producer_id: int,
                 producer_epoch: int, base_sequence: int) -> tuple:
    """The header fields after the CRC, in ``_TAIL``'s order (both ways of finishing a batch)."""
    return (attributes, record_count - 1, base_timestamp, max_timestamp, producer_id, producer_epoch,
            base_sequence, record_count)


def batch_header(
    records: bytes | bytearray | memoryview | list | tuple,
    attributes: int,
    record_count: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    with_crc: bool = True,
) -> bytearray:
    """The 61-byte header (base offset 0) of a (compressed) records section -- bytes-like, or a
    list of bytes-like chunks --, its CRC run over the header's tail then the chunks in place
    (``with_crc=False``: left 0, for a batch ``set_producer_state`` stamps before it is sent)."""
    chunks = records if isinstance(records, (list, tuple)) else (records,)
    head = bytearray(BATCH_OVERHEAD)
    _TAIL.pack_into(head, ATTRIBUTES_OFFSET, *_tail_fields(attributes, record_count, base_timestamp, max_timestamp,
                                                           producer_id, producer_epoch, base_sequence))
    _HEAD_CRC.pack_into(head, 0, 0, BATCH_OVERHEAD - 12 + sum(map(len, chunks)), NO_PARTITION_LEADER_EPOCH,
                        MAGIC, _batch_crc(head, chunks) if with_crc else 0)
    return head


def _batch_crc(head: bytearray | memoryview, chunks: Iterable[bytes | bytearray | memoryview] = ()) -> int:
    """A batch's CRC-32C: from its attributes to the end of ``head``, then over ``chunks`` where
    they are (a header alone, or a whole batch in one buffer with no chunks)."""
    crc = crc32c(memoryview(head)[ATTRIBUTES_OFFSET:])
    for chunk in chunks:
        crc = crc32c(chunk, crc)
    return crc


def finish_batch(records: bytes | bytearray | memoryview | list | tuple, attributes: int, record_count: int,
                 base_timestamp: int, max_timestamp: int,
                 producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                 with_crc: bool = True) -> bytes:
    """The header and the records as one ``bytes`` (one copy, the join).  Positional and
    branch-free: the Arrow path calls it once per compressed batch."""
    chunks = records if isinstance(records, (list, tuple)) else (records,)
    return b"".join((batch_header(chunks, attributes, record_count, base_timestamp, max_timestamp, producer_id,
                                  producer_epoch, base_sequence, with_crc), *chunks))


class BatchBuffers:
    """A built batch kept as its buffers: the header (writable: re-stamped in place) and the
    records' chunks as the encoder left them.  The Sender writes them as they are (the request
    is a list of buffers), so a batch filled across ``send_batch`` calls is never joined into one
    buffer: for large records that join was a whole extra pass over every byte sent.
    ``len()`` is its size in bytes; ``bytes()`` joins it (splitting, tests)."""

    __slots__ = ("head", "chunks", "_size")

    def __init__(self, head: bytearray, chunks: list):
        self.head = head
        self.chunks = chunks
        self._size = len(head) + sum(map(len, chunks))

    def __len__(self) -> int:
        return self._size

    @property
    def parts(self) -> list:
        return [self.head, *self.chunks]

    def __bytes__(self) -> bytes:
        return b"".join(self.parts)

    def restamp(self, producer_id: int, producer_epoch: int, base_sequence: int,
                is_transactional: bool | None) -> BatchBuffers:
        """``set_producer_state`` on the header, the CRC run over the chunks where they are."""
        head = self.head
        _stamp_header(head, producer_id, producer_epoch, base_sequence, is_transactional)
        _CRC.pack_into(head, CRC_OFFSET, _batch_crc(head, self.chunks))
        return self


def finish_batch_in_place(
    view: memoryview,
    attributes: int,
    record_count: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    with_crc: bool = True,
) -> memoryview:
    """Fill the header of an uncompressed batch whose first 61 bytes were left for it.

    ``view`` is writable and spans exactly the batch; returned as is, nothing copied.
    """
    _TAIL.pack_into(view, ATTRIBUTES_OFFSET, *_tail_fields(attributes, record_count, base_timestamp, max_timestamp,
                                                           producer_id, producer_epoch, base_sequence))
    _HEAD_CRC.pack_into(view, 0, 0, len(view) - 12, NO_PARTITION_LEADER_EPOCH, MAGIC,
                        _batch_crc(view) if with_crc else 0)
    return view


class RecordBatchBuilder:
    """Accumulates records into one v2 batch, encoding each into a single bytearray on append.

    ``write_limit`` bounds the *uncompressed* estimated size (header included), like Java's
    ``MemoryRecordsBuilder`` with the ``batch.size`` limit; the first record is always accepted
    so that a record larger than ``batch.size`` still gets a batch of its own.
    """

    __slots__ = (
        "compression_type",
        "compression_level",
        "write_limit",
        "magic",
        "_buf",
        "_count",
        "_base_ts",
        "_max_ts",
    )

    def __init__(self, compression_type: CompressionType | int, write_limit: int, magic: int = 2,
                 compression_level: int | None = None):
        if magic != MAGIC:
            raise ValueError(f"only record batch magic 2 is supported, not {magic}")
        self.compression_type = CompressionType(compression_type)
        #: Kafka's level of the codec (None: its default)
        self.compression_level = compression_level
        self.write_limit = write_limit
        self.magic = magic
        self._buf = bytearray()
        self._count = 0
        self._base_ts = 0
        self._max_ts = NO_TIMESTAMP

    @property
    def record_count(self) -> int:
        return self._count

    @property
    def estimated_size(self) -> int:
        """Bytes the batch would take uncompressed (header included)."""
        return BATCH_OVERHEAD + len(self._buf)

    def try_append(self, timestamp_ms: int, key: bytes | bytearray | memoryview | None,
                   value: bytes | bytearray | memoryview | None,
                   headers: Headers | None = None) -> bool:
        """Append one record; False (nothing appended) if it would pass ``write_limit``.

        ``key``/``value`` are bytes-like or None; ``headers`` a sequence of ``(str, bytes|None)``.
        Raises ``InvalidRecordError`` for values of the wrong type.
        """
        count = self._count
        if count == 0:
            self._base_ts = timestamp_ms
        try:
            rec = encode_record(count, timestamp_ms - self._base_ts, key, value, headers)
        except (TypeError, AttributeError, ValueError) as exc:
            raise InvalidRecordError(f"cannot encode record: {exc}") from exc
        buf = self._buf
        if count and BATCH_OVERHEAD + len(buf) + len(rec) > self.write_limit:
            return False
        buf += rec
        self._count = count + 1
        if timestamp_ms > self._max_ts:
            self._max_ts = timestamp_ms
        return True

    def build(
        self,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        is_transactional: bool = False,
    ) -> bytes:
        """The complete batch (base offset 0): records compressed once, one CRC pass."""
        count = self._count
        return finish_batch(
            compress(self.compression_type, self._buf, self.compression_level),
            batch_attributes(self.compression_type, is_transactional),
            count,
            self._base_ts if count else NO_TIMESTAMP,
            self._max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
        )


class EncodedRecordsBuilder:
    """A batch whose records arrive already encoded, a chunk at a time (the Arrow path: each
    ``send_batch`` call encodes its rows for a partition in one vectorised pass and appends
    them to the partition's open batch), framed -- and compressed -- once, at ``build``:
    uncompressed, a header over the chunks as they are (``BatchBuffers``), nothing copied.

    A chunk's records carry offset deltas from ``record_count`` on and timestamp deltas from
    ``base_timestamp``, as the encoder was told (``record.arrow.Slice``).  Like Java's
    ``MemoryRecordsBuilder``, an open batch keeps filling across calls until ``batch.size`` or
    ``linger.ms`` ends it, instead of every call sealing a batch of its own per partition.
    """

    __slots__ = ("compression_type", "compression_level", "base_timestamp", "_chunks", "_count", "_size", "_max_ts")

    def __init__(self, compression_type: CompressionType | int, base_timestamp: int,
                 compression_level: int | None = None):
        self.compression_type = CompressionType(compression_type)
        self.compression_level = compression_level
        self.base_timestamp = base_timestamp
        self._chunks: list = []
        self._count = 0
        self._size = BATCH_OVERHEAD
        self._max_ts = NO_TIMESTAMP

    @property
    def record_count(self) -> int:
        return self._count

    @property
    def estimated_size(self) -> int:
        """Bytes the batch takes uncompressed (header included)."""
        return self._size

    def append(self, records: memoryview | bytes, count: int, max_timestamp: int) -> int:
        """Add ``count`` encoded records; returns the index of the first."""
        first = self._count
        self._chunks.append(records)
        self._count = first + count
        self._size += len(records)
        self._max_ts = max(self._max_ts, max_timestamp)
        return first

    def try_append(self, timestamp_ms: int, key: bytes | bytearray | memoryview | None,
                   value: bytes | bytearray | memoryview | None,
                   headers: Headers | None = None) -> bool:
        """Records one at a time (``send()``) start a batch of their own after this one."""
        return False

    def build(self, producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
              is_transactional: bool = False) -> BatchBuffers:
        chunks, self._chunks = self._chunks, []
        ctype = self.compression_type
        records = [compress(ctype, b"".join(chunks), self.compression_level)] if ctype else chunks  # uncompressed: no copy at all
        return BatchBuffers(batch_header(records, batch_attributes(ctype, is_transactional), self._count,
                                         self.base_timestamp, self._max_ts, producer_id, producer_epoch,
                                         base_sequence), records)


#: a built batch as it goes to the broker: one buffer (``bytes`` from ``build``, a ``bytearray`` or
#: writable ``memoryview`` once stamped in place) or a header over its chunks (``BatchBuffers``)
BuiltBatch = bytes | bytearray | memoryview | BatchBuffers


def set_producer_state(batch_bytes: BuiltBatch, producer_id: int, producer_epoch: int, base_sequence: int,
                       is_transactional: bool | None = None) -> bytearray | memoryview | BatchBuffers:
    """Stamp producer id, epoch and base sequence into one built batch and fix its CRC.

    A writable buffer (``bytearray`` or writable ``memoryview``: the bulk path's uncompressed
    batches) is stamped in place and returned; anything else is copied once into a
    ``bytearray``.  The Sender stamps every batch of an idempotent producer as it drains it,
    so a copy per stamp would copy every byte sent.  The records are untouched.
    """
    if isinstance(batch_bytes, BatchBuffers):
        return batch_bytes.restamp(producer_id, producer_epoch, base_sequence, is_transactional)
    if isinstance(batch_bytes, bytearray) or (isinstance(batch_bytes, memoryview) and not batch_bytes.readonly):
        out = batch_bytes
    else:
        out = bytearray(batch_bytes)
    _stamp_header(out, producer_id, producer_epoch, base_sequence, is_transactional)
    _CRC.pack_into(out, CRC_OFFSET, _batch_crc(out))
    return out


def _stamp_header(out: bytearray | memoryview, producer_id: int, producer_epoch: int, base_sequence: int,
                  is_transactional: bool | None) -> None:
    """Producer state (and, unless None, the transactional flag) into a writable header."""
    if len(out) < BATCH_OVERHEAD or out[MAGIC_OFFSET] != MAGIC:
        raise ValueError("not a record batch v2")
    _PRODUCER_STATE.pack_into(out, PRODUCER_ID_OFFSET, producer_id, producer_epoch, base_sequence)
    if is_transactional is not None:  # the bulk path builds batches before it knows
        attributes = int.from_bytes(out[ATTRIBUTES_OFFSET:ATTRIBUTES_OFFSET + 2], "big")
        attributes = attributes | TRANSACTIONAL_FLAG if is_transactional else attributes & ~TRANSACTIONAL_FLAG
        out[ATTRIBUTES_OFFSET:ATTRIBUTES_OFFSET + 2] = attributes.to_bytes(2, "big")


def split_batch(data: BuiltBatch, parts: int = 2, compression_level: int | None = None) -> list[tuple[bytes, int]]:
    """One built batch re-encoded as up to ``parts`` batches of consecutive records, each
    ``(bytes, record count)``: what a batch a broker refused as too large becomes.  Same
    compression (at ``compression_level``), timestamps, keys, values and headers; producer
    state unset."""
    (batch,) = decode_batches(data)
    records = batch.records
    size = max(1, -(-len(records) // parts))
    pieces = []
    for start in range(0, len(records), size):
        builder = RecordBatchBuilder(batch.compression_type, write_limit=1 << 62, compression_level=compression_level)
        for r in records[start:start + size]:
            builder.try_append(r.timestamp, r.key, r.value, r.headers)
        pieces.append((builder.build(), builder.record_count))
    return pieces


# ------------------------------------------------------------------------------------ decoding


@dataclass(frozen=True, slots=True)
class DecodedRecord:
    offset_delta: int
    timestamp_delta: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list = field(default_factory=list)
    attributes: int = 0


@dataclass(frozen=True, slots=True)
class DecodedBatch:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    compression_type: CompressionType
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    records: list

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def record_count(self) -> int:
        return len(self.records)


def _read_bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    n, pos = decode_varint(buf, pos)
    if n < 0:
        return None, pos
    end = pos + n
    if end > len(buf):
        raise ProtocolError("truncated record field")
    return bytes(buf[pos:end]), end


def _decode_record(buf: bytes, pos: int, base_timestamp: int) -> tuple[DecodedRecord, int]:
    length, pos = decode_varint(buf, pos)
    end = pos + length
    if length < 1 or end > len(buf):
        raise ProtocolError("truncated record")
    attributes = buf[pos]
    ts_delta, p = decode_varlong(buf, pos + 1)
    offset_delta, p = decode_varint(buf, p)
    key, p = _read_bytes(buf, p)
    value, p = _read_bytes(buf, p)
    n_headers, p = decode_varint(buf, p)
    if n_headers < 0:
        raise ProtocolError("negative header count")
    headers = []
    for _ in range(n_headers):
        hkey, p = _read_bytes(buf, p)
        if hkey is None:
            raise ProtocolError("null header key")
        hval, p = _read_bytes(buf, p)
        try:
            headers.append((hkey.decode("utf-8"), hval))
        except UnicodeDecodeError as exc:
            raise ProtocolError("header key is not utf-8") from exc
    if p != end:
        raise ProtocolError("record length does not match its fields")
    rec = DecodedRecord(
        offset_delta, ts_delta, base_timestamp + ts_delta, key, value, headers, attributes
    )
    return rec, end


def decode_batches(data: BuiltBatch) -> list[DecodedBatch]:
    """Parse and verify (CRC, lengths, record count) every batch in ``data`` (bytes-like, or one
    batch kept as its buffers).

    Truncation, CRC mismatch, an unknown magic or malformed records raise ``ProtocolError``.
    """
    if isinstance(data, BatchBuffers):
        data = bytes(data)
    mv = memoryview(data).cast("B")
    pos, end, batches = 0, len(mv), []
    while pos < end:
        if end - pos < BATCH_OVERHEAD:
            raise ProtocolError("truncated record batch header")
        (base_offset, batch_length, leader_epoch, magic, crc, attributes, last_delta, base_ts,
         max_ts, pid, epoch, base_seq, count) = _HEADER.unpack_from(mv, pos)
        if magic != MAGIC:
            raise ProtocolError(f"unsupported record batch magic {magic}")
        batch_end = pos + 12 + batch_length
        if batch_length < BATCH_OVERHEAD - 12 or batch_end > end:
            raise ProtocolError("truncated record batch")
        actual = crc32c(mv[pos + ATTRIBUTES_OFFSET : batch_end])
        if actual != crc:
            raise ProtocolError(
                f"record batch CRC mismatch: stored {crc:#010x}, computed {actual:#010x}"
            )
        ctype = attributes & COMPRESSION_MASK
        try:
            ctype = CompressionType(ctype)
        except ValueError:
            raise ProtocolError(f"unknown compression type {ctype}") from None
        body = decompress(ctype, mv[pos + BATCH_OVERHEAD : batch_end])
        records, p = [], 0
        for _ in range(count):
            rec, p = _decode_record(body, p, base_ts)
            records.append(rec)
        if p != len(body):
            raise ProtocolError("bytes left over after the last record")
        batches.append(
            DecodedBatch(
                base_offset, batch_length, leader_epoch, magic, crc, attributes, ctype,
                last_delta, base_ts, max_ts, pid, epoch, base_seq,
                bool(attributes & TRANSACTIONAL_FLAG), records,
            )
        )
        pos = batch_end
    return batches
