"""A minimal blocking Fetch client (test code only): the raw record batches of one partition
exactly as the broker stores them, for comparing Java's bytes with ours.

Speaks ApiVersions v0 and Fetch v4..v11 (the non-flexible versions Kafka 4.x still accepts,
topics by name), request header v1, response header v0.
"""

from __future__ import annotations

import itertools
import socket
import struct

API_FETCH, API_VERSIONS = 1, 18
FETCH_VERSIONS = (4, 11)
_CLIENT_ID = b"oracle-raw-fetch"
_correlation = itertools.count(1)


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, fmt: str):
        values = struct.unpack_from(">" + fmt, self.data, self.pos)
        self.pos += struct.calcsize(">" + fmt)
        return values if len(values) > 1 else values[0]

    def raw(self, n: int) -> bytes:
        out = self.data[self.pos:self.pos + n]
        if len(out) != n:
            raise ValueError("response truncated")
        self.pos += n
        return out

    def string(self) -> str:
        return self.raw(self.take("h")).decode()


def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


class RawFetchClient:
    """One connection to the partition leader (the tests' single node)."""

    def __init__(self, bootstrap: str, timeout: float = 30.0):
        host, _, port = bootstrap.split(",")[0].rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.version = self._negotiate_fetch()

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawFetchClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, api_key: int, version: int, body: bytes) -> _Reader:
        corr = next(_correlation)
        header = struct.pack(">hhih", api_key, version, corr, len(_CLIENT_ID)) + _CLIENT_ID
        frame = header + body
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", self._recv(4))[0]
        r = _Reader(self._recv(size))
        if r.take("i") != corr:
            raise ValueError("correlation id mismatch")
        return r

    def _recv(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            buf += chunk
        return bytes(buf)

    def _negotiate_fetch(self) -> int:
        r = self._call(API_VERSIONS, 0, b"")
        error = r.take("h")
        if error:
            raise ValueError(f"ApiVersions error {error}")
        for _ in range(r.take("i")):
            key, lo, hi = r.take("hhh")
            if key == API_FETCH:
                version = min(hi, FETCH_VERSIONS[1])
                if version < max(lo, FETCH_VERSIONS[0]):
                    raise ValueError(f"broker speaks Fetch v{lo}..v{hi}, we v4..v11")
                return version
        raise ValueError("broker does not list Fetch")

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int = 8 << 20) -> tuple[int, bytes]:
        """One Fetch from ``offset``: (high watermark, the records bytes as the broker sent them)."""
        v = self.version
        body = struct.pack(">iiii", -1, 500, 1, max_bytes) + struct.pack(">b", 0)  # read_uncommitted
        if v >= 7:
            body += struct.pack(">ii", 0, -1)  # no fetch session
        body += struct.pack(">i", 1) + _string(topic) + struct.pack(">i", 1) + struct.pack(">i", partition)
        if v >= 9:
            body += struct.pack(">i", -1)  # current leader epoch: unknown
        body += struct.pack(">q", offset)
        if v >= 5:
            body += struct.pack(">q", -1)  # log start offset (followers only)
        body += struct.pack(">i", max_bytes)
        if v >= 7:
            body += struct.pack(">i", 0)  # no forgotten topics
        if v >= 11:
            body += _string("")  # rack id
        r = self._call(API_FETCH, v, body)
        r.take("i")  # throttle time
        if v >= 7:
            error, _session = r.take("hi")
            if error:
                raise ValueError(f"Fetch error {error}")
        assert r.take("i") == 1 and r.string() == topic and r.take("i") == 1
        got_partition, error, high_watermark = r.take("ihq")
        assert got_partition == partition
        if error:
            raise ValueError(f"Fetch error {error} for {topic}-{partition}")
        r.take("q")  # last stable offset
        if v >= 5:
            r.take("q")  # log start offset
        aborted = r.take("i")
        for _ in range(max(aborted, 0)):
            r.take("qq")
        if v >= 11:
            r.take("i")  # preferred read replica
        size = r.take("i")
        return high_watermark, (r.raw(size) if size > 0 else b"")

    def batches(self, topic: str, partition: int) -> list[bytes]:
        """Every record batch of the partition, in offset order, as stored."""
        out: list[bytes] = []
        offset, high_watermark = 0, None
        while high_watermark is None or offset < high_watermark:
            high_watermark, data = self.fetch(topic, partition, offset)
            pos = 0
            while len(data) - pos >= 12:  # a partial batch may end the response: fetch it again
                base_offset, length = struct.unpack_from(">qi", data, pos)
                end = pos + 12 + length
                if end > len(data):
                    break
                last_offset_delta = struct.unpack_from(">i", data, pos + 23)[0]
                out.append(data[pos:end])
                offset = base_offset + last_offset_delta + 1
                pos = end
            if pos == 0 and offset < high_watermark:
                raise AssertionError(f"no whole batch at offset {offset} of {topic}-{partition}")
        return out
