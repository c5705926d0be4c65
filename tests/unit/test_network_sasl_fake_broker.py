"""The SASL state machine of the network client against the scriptable fake broker: the set-up
timeout covers authentication, a session the broker limits is renewed on the same connection
while a Produce request is still in flight (its answer arrives first and is kept), and a
refused password is final (no reconnect loop).  Real brokers: tests/security."""

from __future__ import annotations

import threading
import time

import pytest
from fake_broker import DEFAULT_API_VERSIONS, PRODUCE, Behavior, FakeBroker

from sparkkafka_sink.errors import AuthenticationError, KafkaTimeoutError
from sparkkafka_sink.protocol import messages
from sparkkafka_sink.protocol.api import ApiKey

SASL_HANDSHAKE, SASL_AUTHENTICATE = int(ApiKey.SASL_HANDSHAKE), int(ApiKey.SASL_AUTHENTICATE)
SASL_FAILED = 58


def sasl_broker(cluster, *, session_lifetime_ms: int = 0, password: bytes = b"pw") -> FakeBroker:
    """A fake broker speaking SASL/PLAIN (user ``u``): sessions of ``session_lifetime_ms``."""
    versions = dict(DEFAULT_API_VERSIONS)
    versions.update({SASL_HANDSHAKE: (0, 1), SASL_AUTHENTICATE: (0, 2)})
    broker = FakeBroker(cluster, api_versions=versions)

    def handshake(b, rec):
        body = messages.SaslHandshakeResponse(error_code=0, mechanisms=["PLAIN"])
        return rec.version, messages.encode_body(body, rec.version)

    def authenticate(b, rec):
        ok = bytes(rec.body.auth_bytes) == b"\0u\0" + password
        body = messages.SaslAuthenticateResponse(
            error_code=0 if ok else SASL_FAILED, error_message=None if ok else "Invalid username or password",
            auth_bytes=b"", session_lifetime_ms=session_lifetime_ms if ok else 0)
        return rec.version, messages.encode_body(body, rec.version)

    broker.handlers[SASL_HANDSHAKE] = handshake
    broker.handlers[SASL_AUTHENTICATE] = authenticate
    cluster.add_topic("t", 1, broker.node_id)
    return broker


PLAIN = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "u"}


def test_connection_setup_timeout_covers_authentication(cluster, make_producer):
    broker = sasl_broker(cluster)
    broker.default_behavior[SASL_HANDSHAKE] = Behavior(drop=True)
    p = make_producer(broker, {**PLAIN, "sasl.password": "pw"}, socket_connection_setup_timeout_ms=200,
                      socket_connection_setup_timeout_max_ms=400, reconnect_backoff_ms=10, max_block_ms=1500)
    with pytest.raises(KafkaTimeoutError, match="stuck in authenticating"):
        p.send("t", b"x", partition=0).get(5)
    assert len({r.conn_id for r in broker.requests_of(SASL_HANDSHAKE)}) >= 2, "the stalled set-up was not retried"
    broker.close()


def test_session_renewed_on_the_same_connection_with_a_request_in_flight(cluster, make_producer):
    broker = sasl_broker(cluster, session_lifetime_ms=1500)
    gate = threading.Event()
    p = make_producer(broker, {**PLAIN, "sasl.password": "pw"})
    try:
        assert p.send("t", b"first", partition=0).get(5).offset == 0
        broker.script(PRODUCE, Behavior(gate=gate))  # the next Produce answer waits for the gate
        held = p.send("t", b"held", partition=0)
        # observed: the Produce request is at the broker, and the client renews its session
        # behind it (the renewal comes at 85-95 % of 1.5 s)
        assert broker.wait_for(lambda: len(broker.requests_of(SASL_HANDSHAKE)) >= 3, timeout=10), \
            "no re-authentication while a Produce request was in flight"
        gate.set()
        assert held.get(5).offset == 1
        assert p.send("t", b"after", partition=0).get(5).offset == 2
        handshakes = broker.requests_of(SASL_HANDSHAKE)
        produce = broker.requests_of(PRODUCE)
        data_conn = produce[-1].conn_id
        assert {r.conn_id for r in produce} == {data_conn}, "a Produce request went over a new connection"
        renewals = [r for r in handshakes if r.conn_id == data_conn]
        assert len(renewals) >= 2 and renewals[1].time > produce[1].time
        assert p._client.reauthentications >= 1
    finally:
        gate.set()
        broker.close()


def test_refused_password_is_final_without_a_reconnect_loop(cluster, make_producer):
    broker = sasl_broker(cluster)
    p = make_producer(broker, {**PLAIN, "sasl.password": "wrong-secret"}, reconnect_backoff_ms=1)
    start = time.monotonic()
    with pytest.raises(AuthenticationError) as info:
        p.send("t", b"x", partition=0).get(5)
    assert time.monotonic() - start < 2
    text = str(info.value)
    assert "PLAIN authentication of 'u'" in text and broker.address in text and "wrong-secret" not in text
    # final: the client will not connect anywhere again, whatever the backoff says
    assert all(not p._client._can_connect(node, float("inf")) for node in (-1, broker.node_id))
    assert len(broker.requests_of(SASL_AUTHENTICATE)) == 1
    with pytest.raises(AuthenticationError):
        p.send("t", b"y", partition=0)
    broker.close()
