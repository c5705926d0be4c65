"""Splits a byte stream into Kafka frames (int32 size prefix + payload).

Sans-I/O: the network layer feeds whatever ``recv`` returned and gets complete frames back.
A frame that spans several reads is assembled in one preallocated buffer, so large responses
cost one copy, not a quadratic series of concatenations.
"""

from __future__ import annotations

import struct

from sparkkafka_sink.errors import ProtocolError

_SIZE = struct.Struct(">i")

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024


class FrameReader:
    """Incremental frame splitter.

    ``feed(data)`` returns the frames completed by ``data`` as memoryviews without the size
    prefix.  A frame entirely inside an immutable ``bytes`` chunk is returned as a zero-copy
    slice of it; anything else is copied, so callers may reuse a mutable receive buffer.
    """

    __slots__ = ("max_frame_bytes", "_size_buf", "_frame", "_filled")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._size_buf = bytearray()       # partial size prefix (< 4 bytes)
        self._frame: bytearray | None = None  # frame being assembled
        self._filled = 0

    @property
    def buffered_bytes(self) -> int:
        """Bytes received but not yet returned as part of a frame."""
        return len(self._size_buf) + (self._filled if self._frame is not None else 0)

    def _check_size(self, size: int) -> int:
        if size < 0:
            raise ProtocolError(f"negative frame size {size}")
        if size > self.max_frame_bytes:
            raise ProtocolError(f"frame size {size} exceeds max_frame_bytes {self.max_frame_bytes}")
        return size

    def feed(self, data: bytes | bytearray | memoryview) -> list[memoryview]:
        mv = data if isinstance(data, memoryview) else memoryview(data)
        if mv.format != "B" or mv.ndim != 1:
            mv = mv.cast("B")
        immutable = isinstance(data, bytes)
        end = mv.nbytes
        pos = 0
        frames: list[memoryview] = []
        while pos < end:
            frame = self._frame
            if frame is not None:  # continue a partial frame
                take = min(len(frame) - self._filled, end - pos)
                frame[self._filled:self._filled + take] = mv[pos:pos + take]
                self._filled += take
                pos += take
                if self._filled == len(frame):
                    frames.append(memoryview(frame))
                    self._frame = None
                continue
            if self._size_buf or end - pos < 4:  # size prefix split across reads
                take = min(4 - len(self._size_buf), end - pos)
                self._size_buf += mv[pos:pos + take]
                pos += take
                if len(self._size_buf) < 4:
                    break
                size = self._check_size(_SIZE.unpack(self._size_buf)[0])
                self._size_buf.clear()
            else:
                size = self._check_size(_SIZE.unpack_from(mv, pos)[0])
                pos += 4
            if end - pos >= size:  # whole frame in this chunk
                chunk = mv[pos:pos + size]
                frames.append(chunk if immutable else memoryview(bytes(chunk)))
                pos += size
            else:
                self._frame = bytearray(size)
                self._filled = 0
        return frames
