"""SchemaRegistryClient's paths a real registry cannot be made to show: each test talks to a tiny
HTTP server on 127.0.0.1, a STAND-IN FOR WHAT APICURIO CANNOT BE MADE TO DO (fail with a 5xx on
demand, never answer, refuse credentials -- Apicurio's authentication needs an OpenID Connect
server --, check bearer tokens, ask for a client certificate without closing the session's
shared registry to every other client, redirect).  What a registry does answer, server TLS
included, is tested against the real Apicurio in tests/integration/test_schema_registry.py.
Also: the settings' checks and the subject name strategies."""

from __future__ import annotations

import base64
import json
import logging
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from sparkkafka_sink.errors import ConfigError
from sparkkafka_sink.serialization.registry import SchemaRegistryClient, SchemaRegistryError
from sparkkafka_sink.serialization.subjects import SubjectNameStrategy, subject_name_strategy
from sparkkafka_sink.testing.brokers import HOST

PASSWORD = "pa55:w0rd-SECRET"
TOKEN = "static-token-SECRET"
SCHEMA = '{"type":"string"}'
FAST = {"retries.wait.ms": 1, "retries.max.wait.ms": 5}


class StandInRegistry:
    """Answers each request with the next scripted ``(status, body, headers)`` (the last one
    again once the script runs out) and records what it was asked."""

    def __init__(self, *answers: tuple, tls: ssl.SSLContext | None = None):
        self.script = list(answers) or [(200, {"id": 1}, {})]
        self.requests: list[dict] = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                stand_in.requests.append({"method": self.command, "path": self.path,
                                          "headers": {k.lower(): v for k, v in self.headers.items()},
                                          "body": body})
                status, doc, headers = (stand_in.script.pop(0) if len(stand_in.script) > 1
                                        else stand_in.script[0])
                data = json.dumps(doc).encode() if doc is not None else b""
                self.send_response(status)
                self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = _answer

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address) -> None:
                pass                                        # failed TLS handshakes are the point

        self.server = Server((HOST, 0), Handler)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.scheme = "https" if tls is not None else "http"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"{self.scheme}://{HOST}:{self.server.server_address[1]}/apis/ccompat/v7"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def stand_in() -> Iterator:
    made: list[StandInRegistry] = []

    def make(*answers: tuple, tls: ssl.SSLContext | None = None) -> StandInRegistry:
        made.append(StandInRegistry(*answers, tls=tls))
        return made[-1]

    yield make
    for server in made:
        server.close()


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections (the kernel's backlog) and never answers: a hung registry."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        s.listen(8)
        yield s.getsockname()[1]


def dead_url() -> str:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return f"http://{HOST}:{s.getsockname()[1]}"


# -- retries ---------------------------------------------------------------------------------
def test_a_5xx_is_retried_and_the_retry_succeeds(stand_in, caplog):
    """Stand-in: Apicurio cannot be made to answer 503 on demand."""
    server = stand_in((503, {"error_code": 50003, "message": "busy"}, {}), (200, {"id": 7}, {}))
    client = SchemaRegistryClient({"url": server.url, **FAST})
    with caplog.at_level(logging.WARNING):
        assert client.register("t-value", SCHEMA) == 7
    assert [r["path"] for r in server.requests] == ["/apis/ccompat/v7/subjects/t-value/versions"] * 2
    assert "HTTP 503" in caplog.text and "retry 1 of 3" in caplog.text


def test_a_5xx_that_persists_fails_after_max_retries_and_says_so(stand_in):
    """Stand-in: Apicurio cannot be made to fail on demand."""
    server = stand_in((500, {"error_code": 50001, "message": "store error"}, {}))
    client = SchemaRegistryClient({"url": server.url, "max.retries": 2, **FAST})
    with pytest.raises(SchemaRegistryError) as e:
        client.latest_version("t-value")
    assert len(server.requests) == 3
    assert (e.value.status, e.value.error_code, e.value.registry_message) == (500, 50001, "store error")
    assert e.value.retriable and "failed 3 time(s)" in str(e.value) and "try again later" in str(e.value)


def test_a_4xx_is_final_at_once(stand_in):
    """Stand-in: one request, no retry, no next URL (the real 404s are in the integration test)."""
    server = stand_in((404, {"error_code": 40401, "message": "Subject not found"}, {}))
    second = stand_in((200, {"id": 1}, {}))
    client = SchemaRegistryClient({"url": f"{server.url},{second.url}", **FAST})
    with pytest.raises(SchemaRegistryError) as e:
        client.latest_version("t-value")
    assert (len(server.requests), len(second.requests)) == (1, 0)
    assert e.value.error_code == 40401 and not e.value.retriable


def test_a_url_still_failing_after_its_retries_hands_over_to_the_next(stand_in):
    """Stand-in: a failing first registry beside a healthy one."""
    failing = stand_in((503, None, {}))
    healthy = stand_in((200, {"id": 3, "subject": "t-value", "version": 1, "schema": SCHEMA}, {}))
    client = SchemaRegistryClient({"url": f"{failing.url},{healthy.url}", "max.retries": 1, **FAST})
    assert client.latest_version("t-value").schema_id == 3
    assert (len(failing.requests), len(healthy.requests)) == (2, 1)


def test_a_registry_that_never_answers_times_out_within_timeout_ms(silent_port):
    """Stand-in: a socket that accepts and stays silent (Apicurio always answers)."""
    client = SchemaRegistryClient({"url": f"http://{HOST}:{silent_port}", "timeout.ms": 300,
                                   "max.retries": 0})
    started = time.monotonic()
    with pytest.raises(SchemaRegistryError) as e:
        client.schema_by_id(1)
    elapsed = time.monotonic() - started
    assert 0.25 <= elapsed < 2.0, elapsed
    assert e.value.status is None and e.value.retriable
    assert "no registry answered within timeout.ms=300" in str(e.value)


def test_a_timeout_is_retried_like_a_lost_connection(silent_port):
    """Stand-in: the silent socket again; each attempt waits timeout (confluent's ``timeout``, s)."""
    client = SchemaRegistryClient({"url": f"http://{HOST}:{silent_port}", "timeout": 0.2, "max.retries": 1,
                                   **FAST})
    started = time.monotonic()
    with pytest.raises(SchemaRegistryError, match="up to 2 attempt"):
        client.schema_by_id(1)
    assert 0.35 <= time.monotonic() - started < 3.0


def test_every_url_unreachable_names_each_with_its_os_error():
    first, second = dead_url(), dead_url()
    client = SchemaRegistryClient({"url": f"{first},{second}", "max.retries": 0})
    with pytest.raises(SchemaRegistryError) as e:
        client.latest_version("t-value")
    text = str(e.value)
    assert "no registry could be reached" in text and "Check url" in text
    assert f"{first}: ConnectionRefusedError" in text and f"{second}: ConnectionRefusedError" in text
    assert e.value.status is None and e.value.retriable


def test_a_redirect_is_not_followed(stand_in):
    """Stand-in: a registry behind a redirecting proxy; our Authorization must not follow it."""
    server = stand_in((307, None, {"Location": "http://elsewhere.invalid/x"}))
    client = SchemaRegistryClient({"url": server.url, "basic.auth.user.info": f"alice:{PASSWORD}"})
    with pytest.raises(SchemaRegistryError) as e:
        client.schema_by_id(1)
    assert e.value.status == 307 and "elsewhere.invalid" in str(e.value) and "Set url" in str(e.value)
    assert len(server.requests) == 1


# -- authentication --------------------------------------------------------------------------
def test_401_names_the_setting_and_never_the_password(stand_in, caplog):
    """Stand-in: Apicurio's authentication needs an OpenID Connect server (Keycloak)."""
    server = stand_in((401, {"error_code": 401, "message": f"Unauthorized (got {PASSWORD})"}, {}))
    client = SchemaRegistryClient({"url": server.url, "basic.auth.user.info": f"alice:{PASSWORD}", **FAST})
    with caplog.at_level(logging.DEBUG), pytest.raises(SchemaRegistryError) as e:
        client.register("t-value", SCHEMA)
    text = str(e.value)
    assert e.value.status == 401 and not e.value.retriable and len(server.requests) == 1
    assert "refused our credentials" in text and "'alice'" in text and "basic.auth.user.info" in text
    assert PASSWORD not in text and PASSWORD not in repr(client) and PASSWORD not in caplog.text
    assert PASSWORD not in (e.value.registry_message or "")
    sent = server.requests[0]["headers"]["authorization"]
    assert sent == "Basic " + base64.b64encode(f"alice:{PASSWORD}".encode()).decode()


def test_credentials_in_the_url_become_basic_auth_and_leave_the_url(stand_in):
    """Stand-in: checks the header the registry receives."""
    server = stand_in((403, {"error_code": 40301, "message": "forbidden"}, {}))
    host_part = server.url.split("://", 1)[1]
    client = SchemaRegistryClient({"url": f"http://bob:{PASSWORD}@{host_part}",
                                   "basic.auth.credentials.source": "URL"})
    with pytest.raises(SchemaRegistryError) as e:
        client.latest_version("t-value")
    assert server.requests[0]["headers"]["authorization"] == \
        "Basic " + base64.b64encode(f"bob:{PASSWORD}".encode()).decode()
    assert e.value.status == 403 and "does not allow" in str(e.value) and "DeveloperWrite" in str(e.value)
    assert PASSWORD not in str(e.value) and PASSWORD not in repr(client) and e.value.url == \
        f"{server.url}/subjects/t-value/versions/latest"


def test_a_static_bearer_token_and_confluent_clouds_headers(stand_in):
    """Stand-in: checks the headers the registry receives."""
    server = stand_in((200, {"id": 5}, {}))
    client = SchemaRegistryClient({"url": server.url, "bearer.auth.credentials.source": "STATIC_TOKEN",
                                   "bearer.auth.token": TOKEN, "bearer.auth.logical.cluster": "lsrc-1",
                                   "bearer.auth.identity.pool.id": "pool-9"})
    assert client.register("t-value", SCHEMA, "JSON") == 5
    headers = server.requests[0]["headers"]
    assert headers["authorization"] == f"Bearer {TOKEN}"
    assert (headers["target-sr-cluster"], headers["confluent-identity-pool-id"]) == ("lsrc-1", "pool-9")
    assert json.loads(server.requests[0]["body"]) == {"schema": SCHEMA, "schemaType": "JSON"}
    assert TOKEN not in repr(client)


def test_oauthbearer_fetches_a_token_once_and_again_after_a_401(stand_in, token_endpoint):
    """Stand-in: a registry that checks bearer tokens (Apicurio would need Keycloak)."""
    server = stand_in((200, {"id": 1}, {}), (401, {"error_code": 401, "message": "expired"}, {}),
                      (200, {"schema": SCHEMA}, {}))
    client = SchemaRegistryClient({
        "url": server.url, "bearer.auth.credentials.source": "OAUTHBEARER",
        "bearer.auth.issuer.endpoint.url": token_endpoint.url, "bearer.auth.client.id": token_endpoint.client_id,
        "bearer.auth.client.secret": token_endpoint.client_secret, "bearer.auth.scope": "registry"})
    assert client.register("t-value", SCHEMA) == 1
    assert client.register("t-value", SCHEMA) == 1                       # cached: no request
    assert client.schema_by_id(9) == (SCHEMA, "AVRO")                      # 401, new token, retried
    assert token_endpoint.calls == 2
    sent = [r["headers"]["authorization"] for r in server.requests]
    assert sent == [f"Bearer {token_endpoint.tokens[0]}"] * 2 + [f"Bearer {token_endpoint.tokens[1]}"]
    assert token_endpoint.client_secret not in repr(client)


def test_a_refused_client_secret_says_which_settings_to_check(stand_in, token_endpoint):
    server = stand_in((200, {"id": 1}, {}))
    client = SchemaRegistryClient({
        "url": server.url, "bearer.auth.credentials.source": "OAUTHBEARER",
        "bearer.auth.issuer.endpoint.url": token_endpoint.url, "bearer.auth.client.id": token_endpoint.client_id,
        "bearer.auth.client.secret": "wrong-SECRET"})
    with pytest.raises(SchemaRegistryError) as e:
        client.register("t-value", SCHEMA)
    assert "no bearer token" in str(e.value) and "bearer.auth.client.secret" in str(e.value)
    assert "wrong-SECRET" not in str(e.value) and not server.requests


# -- TLS -------------------------------------------------------------------------------------
def _server_tls(pki, client_auth: bool = False) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(pki.broker.chain_path), str(pki.broker.key_path))
    if client_auth:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(str(pki.ca_cert_path))
    return ctx


def test_an_https_stand_in_verified_with_ssl_ca_location(stand_in, pki):
    """Stand-in: the setup the mutual-TLS test builds on (Apicurio's TLS: the integration test)."""
    server = stand_in((200, {"schema": SCHEMA, "schemaType": "JSON"}, {}), tls=_server_tls(pki))
    client = SchemaRegistryClient({"url": server.url, "ssl.ca.location": str(pki.ca_cert_path)})
    assert client.schema_by_id(4) == (SCHEMA, "JSON")


def test_an_unknown_ca_is_not_retried(stand_in, pki):
    """Stand-in: counts requests (none gets through) where Apicurio cannot."""
    server = stand_in((200, {"id": 1}, {}), tls=_server_tls(pki))
    client = SchemaRegistryClient({"url": server.url, "ssl.ca.location": str(pki.unknown_ca_cert_path),
                                   **FAST})
    with pytest.raises(SchemaRegistryError) as e:
        client.schema_by_id(4)
    text = str(e.value)
    assert "TLS handshake failed" in text and "ssl.ca.location" in text and "did not verify" in text
    assert "up to 4 attempt" in text and not e.value.retriable and not server.requests


def test_mutual_tls_with_an_encrypted_key(stand_in, pki):
    """Stand-in: a registry that requires our certificate (the shared Apicurio stays open)."""
    server = stand_in((200, {"schema": SCHEMA}, {}), tls=_server_tls(pki, client_auth=True))
    config = {"url": server.url, "ssl.ca.location": str(pki.ca_cert_path),
              "ssl.certificate.location": str(pki.client.chain_path),
              "ssl.key.location": str(pki.client_key_encrypted_path), "ssl.key.password": pki.key_password}
    client = SchemaRegistryClient(config)
    assert client.schema_by_id(1) == (SCHEMA, "AVRO") and pki.key_password not in repr(client)
    with pytest.raises(ConfigError, match="ssl.key.password") as e:
        SchemaRegistryClient({**config, "ssl.key.password": "wrong-SECRET"})
    assert "wrong-SECRET" not in str(e.value)
    with pytest.raises(ConfigError, match="encrypted: set ssl.key.password"):
        SchemaRegistryClient({k: v for k, v in config.items() if k != "ssl.key.password"})


def test_plain_http_to_a_tls_registry_and_tls_to_a_plain_one(stand_in, pki):
    tls = stand_in((200, {"id": 1}, {}), tls=_server_tls(pki))
    plain = stand_in((200, {"id": 1}, {}))
    with pytest.raises(SchemaRegistryError):
        SchemaRegistryClient({"url": tls.url.replace("https:", "http:"), "max.retries": 0}).schema_by_id(1)
    with pytest.raises(SchemaRegistryError, match="is it an http:// registry"):
        SchemaRegistryClient({"url": plain.url.replace("http:", "https:"), "max.retries": 0}).schema_by_id(1)


# -- settings ---------------------------------------------------------------------------------
@pytest.mark.parametrize("config, expected", [
    ({"url": "http://r", "basic.auth.user.infos": f"a:{PASSWORD}"}, "Did you mean 'basic.auth.user.info'"),
    ({"url": "http://r", "max.retry": 1}, "Did you mean 'max.retries'"),
    ({"url": "http://r", "proxy": "http://p"}, "not supported"),
    ({}, "Missing configuration 'url'"),
    ({"url": "ftp://r"}, "not an http:// or https:// URL"),
    ({"url": "http://r", "ssl.ca.location": "/x"}, "no url is https://"),
    ({"url": "https://r", "ssl.key.location": "/x"}, "need ssl.certificate.location"),
    ({"url": "https://r", "ssl.ca.location": "/does/not/exist"}, "Cannot load ssl.ca.location"),
    ({"url": "http://r", "basic.auth.user.info": "nopassword"}, "expected user:password"),
    ({"url": "http://r", "basic.auth.credentials.source": "SASL_INHERIT"}, "USER_INFO, URL"),
    ({"url": "http://r", "basic.auth.credentials.source": "URL"}, "no url carries credentials"),
    ({"url": "http://u:p@r", "basic.auth.user.info": f"a:{PASSWORD}"}, "url carries credentials too"),
    ({"url": "http://r", "bearer.auth.token": TOKEN}, "bearer.auth.credentials.source is not"),
    ({"url": "http://r", "bearer.auth.credentials.source": "CUSTOM"}, "STATIC_TOKEN, OAUTHBEARER"),
    ({"url": "http://r", "bearer.auth.credentials.source": "STATIC_TOKEN"}, "needs bearer.auth.token"),
    ({"url": "http://r", "bearer.auth.credentials.source": "OAUTHBEARER"}, "needs bearer.auth.issuer"),
    ({"url": "http://r", "bearer.auth.credentials.source": "STATIC_TOKEN", "bearer.auth.token": TOKEN,
      "basic.auth.user.info": f"a:{PASSWORD}"}, "keep one"),
    ({"url": "http://r", "timeout": 1, "timeout.ms": 1000}, "not both"),
    ({"url": "http://r", "timeout.ms": "soon"}, "expected a whole number"),
    ({"url": "http://r", "max.retries": -1}, "a whole number, at least 0"),
    ({"url": "http://r", "retries.wait.ms": 500, "retries.max.wait.ms": 100}, "below retries.wait.ms"),
])
def test_settings_are_checked_when_the_client_is_built(config, expected):
    with pytest.raises(ConfigError, match=expected.replace("(", r"\(").replace(")", r"\)")) as e:
        SchemaRegistryClient(config)
    secrets = [config[k] for k in ("basic.auth.user.info", "bearer.auth.token") if k in config]
    assert not [s for s in secrets if s in str(e.value)]
    assert "u:p@" not in str(e.value)


def test_string_values_as_spark_options_give_them():
    client = SchemaRegistryClient({"url": "http://r:8081/ , http://s:8081", "max.retries": "0",
                                   "timeout.ms": "1500", "retries.wait.ms": "10"})
    assert client.urls == ("http://r:8081", "http://s:8081")


# -- subject name strategies -------------------------------------------------------------------
@pytest.mark.parametrize("name, expected", [
    (None, "TopicNameStrategy"), ("", "TopicNameStrategy"), ("TopicNameStrategy", "TopicNameStrategy"),
    ("io.confluent.kafka.serializers.subject.RecordNameStrategy", "RecordNameStrategy"),
    ("io.confluent.kafka.serializers.subject.TopicRecordNameStrategy", "TopicRecordNameStrategy"),
    ("topicrecordnamestrategy", "TopicRecordNameStrategy"),
    ("record_subject_name_strategy", "RecordNameStrategy"),
])
def test_strategy_names(name, expected):
    assert subject_name_strategy(name).name == expected


def test_an_unknown_strategy_names_the_accepted_ones():
    with pytest.raises(ConfigError, match="value.subject.name.strategy: expected one of TopicNameStrategy, "
                                          "RecordNameStrategy, TopicRecordNameStrategy"):
        subject_name_strategy("TopicStrategy", "value.subject.name.strategy")


def test_subjects_of_each_strategy():
    assert SubjectNameStrategy("TopicNameStrategy").subject("orders", is_key=True) == "orders-key"
    assert SubjectNameStrategy("TopicNameStrategy").subject("orders", False, "a.B") == "orders-value"
    assert SubjectNameStrategy("RecordNameStrategy").subject("orders", False, "a.B") == "a.B"
    assert SubjectNameStrategy("TopicRecordNameStrategy").subject("orders", True, "a.B") == "orders-a.B"
    with pytest.raises(ConfigError, match="RecordNameStrategy names the subject after the value schema's record"):
        SubjectNameStrategy("RecordNameStrategy").subject("orders", False, None)


def test_the_sinks_option_display_hides_registry_secrets():
    """The registry's secrets under their Spark option names (``schema.registry.*``)."""
    from sparkkafka_sink.redaction import REDACTED, redact

    shown = redact({"schema.registry.basic.auth.user.info": f"alice:{PASSWORD}",
                    "schema.registry.bearer.auth.token": TOKEN, "schema.registry.bearer.auth.client.secret": "x",
                    "schema.registry.ssl.key.password": "y",
                    "schema.registry.url": f"https://alice:{PASSWORD}@r1:8081,https://r2:8081"})
    assert PASSWORD not in str(shown) and TOKEN not in str(shown)
    assert shown["schema.registry.url"] == f"https://{REDACTED}@r1:8081,https://r2:8081"
    assert set(shown.values()) - {shown["schema.registry.url"]} == {REDACTED}
