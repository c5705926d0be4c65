"""The FaultProxy's frame mutation hooks (added for the failure-semantics tests), byte-exact
against the framing-only fake server of test_harness."""

from __future__ import annotations

import socket
import struct

from .harness import METADATA, PRODUCE, FaultProxy
from .test_harness import FakeServer, _recv_exact, _request


def _connect(proxy):
    return socket.create_connection(("127.0.0.1", proxy.port), timeout=5)


class EchoServer(FakeServer):
    """Answers each request with its own bytes after the correlation id (so request mutations show)."""

    def _answer(self, req: bytes) -> bytes:
        return req


def test_mutate_next_response_replaces_matching_frames_and_fixes_the_size():
    server = FakeServer(bytes(range(20)))
    proxy = FaultProxy(0, "127.0.0.1", server.port)
    try:
        seen = []

        def fn(frame, api_key, version):
            seen.append((frame[:4], api_key, version))
            return frame[:4] + b"NEW"

        handle = proxy.mutate_next_response(fn, api_key=PRODUCE, times=2)
        with _connect(proxy) as s:
            s.sendall(_request(METADATA, 1))  # not a Produce: untouched
            assert _recv_exact(s, 28)[8:] == bytes(range(20))
            for corr in (2, 3):
                s.sendall(_request(PRODUCE, corr))
                assert _recv_exact(s, 11) == struct.pack(">ii", 7, corr) + b"NEW"
            s.sendall(_request(PRODUCE, 4))  # times=2: the third passes
            assert _recv_exact(s, 28)[8:] == bytes(range(20))
        assert handle.hits == 2 and handle.wait(0)
        assert seen == [(struct.pack(">i", 2), PRODUCE, 0), (struct.pack(">i", 3), PRODUCE, 0)]
        assert proxy.stats()["mutated"] == 2
    finally:
        proxy.close()
        server.close()


def test_mutate_next_request_changes_what_the_broker_receives():
    server = EchoServer(b"")
    proxy = FaultProxy(0, "127.0.0.1", server.port)
    try:
        with _connect(proxy) as s:
            s.sendall(_request(METADATA, 1)[:6])  # a header split across writes, before arming
            handle = proxy.mutate_next_request(lambda f, k, v: f.replace(b"c", b"Z"), api_key=PRODUCE)
            s.sendall(_request(METADATA, 1)[6:])
            req = _request(METADATA, 1)
            assert _recv_exact(s, 8 + len(req) - 4)[8:] == req[4:]  # untouched
            req = _request(PRODUCE, 2)
            for i in range(len(req)):  # byte by byte: the frame is collected before mutating
                s.sendall(req[i:i + 1])
            got = _recv_exact(s, 8 + len(req) - 4)
            assert got[8:] == req[4:].replace(b"c", b"Z")
            req = _request(PRODUCE, 3)
            s.sendall(req)
            assert _recv_exact(s, 8 + len(req) - 4)[8:] == req[4:]  # one-shot
        assert handle.hits == 1 and proxy.stats()["mutated_requests"] == 1
    finally:
        proxy.close()
        server.close()
