"""OAuth tokens: JWT reading, providers (a local OIDC endpoint, user callables, Kafka's unsecured
login) and TokenSource's background refresh -- waits are bounded and driven by events."""

from __future__ import annotations

import base64
import functools
import json
import re
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from sparkkafka_sink.errors import AuthenticationError, ConfigError
from sparkkafka_sink.oauth.bearer_token import OAuthBearerToken, TokenUnavailableError, coerce_token
from sparkkafka_sink.oauth.jwt import jwt_claims
from sparkkafka_sink.oauth.token_providers import (
    ClientCredentialsTokenProvider,
    UnsecuredTokenProvider,
    load_token_provider,
)
from sparkkafka_sink.oauth.token_source import TokenSource, refresh_at
from sparkkafka_sink.testing import waiting

SECRET = "s3cr+t/=&ü-SECRET"
FAR = 4102444800                                              # 2100-01-01, epoch seconds


def jwt(claims: dict, header: dict | None = None) -> str:
    def part(obj):
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")
    return f"{part(header or {'alg': 'RS256'})}.{part(claims)}.c2lnbmF0dXJl"


#: the refresher's timers here run for a second or so: a short bound, fine polls
wait_until = functools.partial(waiting.wait_until, timeout=5.0, interval=0.005)


@pytest.fixture(autouse=True)
def _no_proxies(monkeypatch):
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


# -- tokens and JWTs ---------------------------------------------------------------------------
def test_token_repr_never_shows_the_value():
    token = OAuthBearerToken("the-token-value", 123000, "alice", 100000)
    assert "the-token-value" not in repr(token) and "the-token-value" not in str(token)
    assert repr(token) == "OAuthBearerToken(principal='alice', expires_at_ms=123000, issued_at_ms=100000)"


def test_jwt_claims_decodes_without_verifying():
    assert jwt_claims(jwt({"sub": "alice", "exp": 5})) == {"sub": "alice", "exp": 5}


@pytest.mark.parametrize("token,error", [
    ("only.two", "expected header.payload.signature (3 parts separated by '.'), found 2 part(s)"),
    ("a.!!!!.c", "the payload is not base64url"),
    ("a." + base64.urlsafe_b64encode(b"not json").decode() + ".c", "the payload is not JSON"),
    ("a." + base64.urlsafe_b64encode(b"[1]").decode() + ".c", "not a JSON object"),
])
def test_jwt_claims_errors(token, error):
    with pytest.raises(ValueError, match=re.escape(error)) as e:
        jwt_claims(token)
    assert token not in str(e.value)


def test_provider_results_are_coerced():
    token = coerce_token(jwt({"sub": "alice", "exp": FAR, "iat": FAR - 60}), "p")
    assert (token.principal, token.expires_at_ms, token.issued_at_ms) == ("alice", FAR * 1000, (FAR - 60) * 1000)
    assert coerce_token(("opaque", FAR), "p").expires_at_ms == FAR * 1000
    assert coerce_token(("opaque", FAR * 1000), "p").expires_at_ms == FAR * 1000   # ms, as MSK's signer
    assert coerce_token((jwt({"sub": "bob"}), FAR), "p").principal == "bob"
    same = OAuthBearerToken("v", 1)
    assert coerce_token(same, "p") is same


@pytest.mark.parametrize("result,error", [
    (jwt({"sub": "alice"}), "p returned a JWT without an 'exp' claim"),
    ("not-a-jwt", "p returned a token we cannot read: not a JWT"),
    ("", "p returned an empty token"),
    (("tok", "tomorrow"), "expiry is a str, not epoch seconds"),
    (42, "p returned a int; expected a JWT str"),
])
def test_bad_provider_results(result, error):
    with pytest.raises(AuthenticationError, match=error):
        coerce_token(result, "p")


# -- Kafka's unsecured login -------------------------------------------------------------------
def test_unsecured_login_token_matches_kafkas_format():
    provider = UnsecuredTokenProvider({"unsecuredLoginStringClaim_sub": "alice",
                                       "unsecuredLoginLifetimeSeconds": "7",
                                       "unsecuredLoginListClaim_scope": "|read|write",
                                       "unsecuredLoginNumberClaim_level": "3"}, clock=lambda: 1000.25)
    token = provider()
    header, payload, signature = token.value.split(".")
    assert signature == ""
    assert json.loads(base64.urlsafe_b64decode(header + "==")) == {"alg": "none"}
    assert json.loads(base64.urlsafe_b64decode(payload + "==")) == {
        "exp": 1007.25, "iat": 1000.25, "sub": "alice", "scope": ["read", "write"], "level": 3.0}
    assert (token.principal, token.expires_at_ms, token.issued_at_ms) == ("alice", 1007250, 1000250)
    assert UnsecuredTokenProvider({"unsecuredLoginStringClaim_sub": "a"}).lifetime_s == 3600


def test_unsecured_login_refuses_computed_claims():
    with pytest.raises(ConfigError, match="option 'unsecuredLoginNumberClaim_exp': the 'exp' claim cannot be set"):
        UnsecuredTokenProvider({"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginNumberClaim_exp": "1"})


# -- load_token_provider -----------------------------------------------------------------------
def test_load_token_provider_from_module_function(tmp_path, monkeypatch):
    (tmp_path / "my_tokens_mod.py").write_text(
        "class Holder:\n    @staticmethod\n    def get():\n        return ('tok', 4102444800)\n"
        "def get_token():\n    return ('tok', 4102444800)\nNOT_CALLABLE = 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert load_token_provider("my_tokens_mod:get_token")() == ("tok", FAR)
    assert load_token_provider(" my_tokens_mod:Holder.get ")() == ("tok", FAR)
    fn = lambda: "x"  # noqa: E731
    assert load_token_provider(fn) is fn
    for spec, error in [
        ("my_tokens_mod:missing", "module 'my_tokens_mod' has no attribute 'missing'"),
        ("my_tokens_mod:NOT_CALLABLE", "'my_tokens_mod:NOT_CALLABLE' is a int, not a callable"),
        ("my_tokens_mod.get_token", "is not 'module:function'"),
        ("no_such_mod_abc:f", "cannot import module 'no_such_mod_abc'"),
        (3, "expected a callable or a 'module:function' string, got int"),
    ]:
        with pytest.raises(ConfigError, match=error) as e:
            load_token_provider(spec)
        assert "'sasl.oauthbearer.token.provider'" in str(e.value)


# -- the client-credentials grant against a local endpoint ------------------------------------
class TokenEndpoint:
    """A scripted OIDC token endpoint: answers[i] is (status, body dict/str, headers)."""

    def __init__(self):
        self.answers: list[tuple[int, object, dict]] = []
        self.requests: list[tuple[str, dict, str]] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
                endpoint.requests.append((self.path, dict(self.headers), body))
                status, payload, headers = endpoint.answers.pop(0) if endpoint.answers else (500, "empty script", {})
                data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/oauth2/token"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint():
    e = TokenEndpoint()
    yield e
    e.close()


def provider_for(endpoint, **kw):
    kw.setdefault("retry_backoff_ms", 10)
    kw.setdefault("retry_backoff_max_ms", 2000)
    return ClientCredentialsTokenProvider(endpoint.url, "my client", SECRET, **kw)


def test_client_credentials_request_and_expires_in(endpoint):
    access = jwt({"sub": "svc-account", "exp": FAR, "iat": 1})
    endpoint.answers.append((200, {"access_token": access, "token_type": "Bearer", "expires_in": 300}, {}))
    before = time.time()
    token = provider_for(endpoint, scope="kafka write")()
    path, headers, body = endpoint.requests[0]
    assert path == "/oauth2/token"
    expected = base64.b64encode(f"my+client:{urllib.parse.quote_plus(SECRET)}".encode()).decode()
    assert headers["Authorization"] == f"Basic {expected}"
    assert headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert headers["Accept"] == "application/json"
    assert urllib.parse.parse_qs(body) == {"grant_type": ["client_credentials"], "scope": ["kafka write"]}
    assert token.value == access and token.principal == "svc-account"
    assert before + 300 <= token.expires_at_ms / 1000 <= time.time() + 300   # expires_in wins over exp
    assert SECRET not in repr(token)


def test_client_credentials_without_scope_uses_the_jwt_exp(endpoint):
    endpoint.answers.append((200, {"access_token": jwt({"exp": FAR})}, {}))
    token = provider_for(endpoint)()
    assert endpoint.requests[0][2] == "grant_type=client_credentials"
    assert token.expires_at_ms == FAR * 1000 and token.principal == "my client"


def test_client_credentials_401_fails_fast_without_the_secret(endpoint):
    endpoint.answers.append((401, {"error": "invalid_client", "error_description": "Bad secret " + SECRET}, {}))
    with pytest.raises(AuthenticationError) as e:
        provider_for(endpoint)()
    message = str(e.value)
    assert message == (f"token endpoint {endpoint.url} (client 'my client') rejected the request: HTTP 401 "
                       "(invalid_client: Bad secret ***)")
    assert not e.value.retriable and len(endpoint.requests) == 1


def test_client_credentials_retries_503_then_succeeds(endpoint):
    endpoint.answers += [(503, "busy", {}), (429, "slow down", {}),
                         (200, {"access_token": "opaque", "expires_in": "60"}, {})]
    token = provider_for(endpoint)()
    assert token.value == "opaque" and len(endpoint.requests) == 3


def test_client_credentials_gives_up_after_the_retry_window(endpoint):
    endpoint.answers += [(503, {"error": "temporarily_unavailable"}, {})] * 20
    with pytest.raises(TokenUnavailableError) as e:
        provider_for(endpoint, retry_backoff_max_ms=150)()
    assert e.value.retriable
    assert "HTTP 503 (temporarily_unavailable)" in str(e.value)
    assert 2 <= len(endpoint.requests) < 20


def test_client_credentials_connection_refused_is_retried():
    closed = TokenEndpoint()
    closed.close()
    provider = ClientCredentialsTokenProvider(closed.url, "c", SECRET, retry_backoff_ms=10, retry_backoff_max_ms=100)
    with pytest.raises(TokenUnavailableError, match=r"attempt\(s\).*cannot connect") as e:
        provider()
    assert SECRET not in str(e.value)


def test_client_credentials_bad_answers(endpoint):
    endpoint.answers += [(200, {"id_token": "x", "expires_in": 5}, {}),
                         (200, {"access_token": "opaque"}, {}),
                         (200, "<html>", {}),
                         (302, "", {"Location": "https://elsewhere.example/token?secret=1"})]
    provider = provider_for(endpoint)
    with pytest.raises(AuthenticationError, match=r"answered without an access_token \(fields: expires_in, id_token\)"):
        provider()
    with pytest.raises(AuthenticationError, match="without expires_in and the token has no 'exp' claim"):
        provider()
    with pytest.raises(AuthenticationError, match="not JSON"):
        provider()
    with pytest.raises(AuthenticationError, match="HTTP 302 .*https://elsewhere.example/token\\)") as e:
        provider()
    assert "secret=1" not in str(e.value) and len(endpoint.requests) == 4


def test_client_credentials_config_errors():
    with pytest.raises(ConfigError, match="'sasl.oauthbearer.client.secret': it is empty"):
        ClientCredentialsTokenProvider("https://idp/token", "c", "  ")
    with pytest.raises(ConfigError, match="is not an http\\(s\\) URL"):
        ClientCredentialsTokenProvider("idp/token", "c", SECRET)


# -- TokenSource -------------------------------------------------------------------------------
def test_refresh_at_schedule():
    token = OAuthBearerToken("v", expires_at_ms=1_100_000, issued_at_ms=1_000_000)
    assert refresh_at(token, fetched_at_s=1000, refresh_window_factor=0.8) == 1080
    assert refresh_at(token, 1000, 0.8, jitter=0.05) == pytest.approx(1085)
    assert refresh_at(token, 1000, 0.98, jitter=0.05) == pytest.approx(1098)   # no jitter past expiry
    # iat in our future (clock skew): count from the fetch
    assert refresh_at(OAuthBearerToken("v", 1_100_000, issued_at_ms=1_050_000), 1000, 0.5) == 1050
    # an IdP's cached token, mostly used up: not sooner than a minute (or half what is left)
    cached = OAuthBearerToken("v", expires_at_ms=4_600_000, issued_at_ms=1_000_000)
    assert refresh_at(cached, fetched_at_s=4000, refresh_window_factor=0.8) == 4060
    short = OAuthBearerToken("v", expires_at_ms=4_010_000, issued_at_ms=1_000_000)
    assert refresh_at(short, fetched_at_s=4000, refresh_window_factor=0.8) == 4005


def test_token_source_validates_the_factor():
    with pytest.raises(ConfigError, match=r"'sasl.login.refresh.window.factor': expected a number from 0.5 to 1"):
        TokenSource(lambda: "x", refresh_window_factor=0.3)


class ShortLivedTokens:
    """Tokens living ``lifetime_s``; ``fail`` lists the call numbers (1-based) that raise, and
    call number ``gated`` waits for ``gate`` first (so a test sees the state before it)."""

    def __init__(self, lifetime_s, fail=(), gated=None):
        self.lifetime_s, self.fail, self.gated = lifetime_s, set(fail), gated
        self.gate = threading.Event()
        self.calls = 0

    def __call__(self):
        self.calls += 1
        if self.calls in self.fail:
            raise ConnectionError(f"IdP down (call {self.calls})")
        if self.calls == self.gated:
            assert self.gate.wait(5)
        return (f"token-{self.calls}", time.time() + self.lifetime_s)


def test_token_source_refreshes_in_the_background():
    provider = ShortLivedTokens(lifetime_s=1.2)
    source = TokenSource(provider, refresh_window_factor=0.5, jitter=0)
    try:
        first = source.current()
        assert first.value == "token-1" and source.fetches == 1 and source.refreshes == 0
        assert source.current() is first                       # no fetch on the network thread
        assert source.wait_for_refreshes(2, timeout=5)         # ~0.6 s each
        assert int(source.current().value.split("-")[1]) >= 3
    finally:
        source.close()
    assert not source._thread.is_alive()
    assert provider.calls == source.fetches == source.refreshes + 1


def test_token_source_retries_a_failed_refresh_while_the_old_token_is_valid():
    provider = ShortLivedTokens(lifetime_s=2.0, fail={2, 3}, gated=4)
    source = TokenSource(provider, refresh_window_factor=0.5, jitter=0)
    try:
        assert source.current().value == "token-1"
        wait_until("two failed refreshes", lambda: source.refresh_failures == 2)  # ~1 s, then 0.1 s backoff
        assert source.current().value == "token-1"             # still valid: still served
        assert "IdP down (call 3)" in str(source.last_error)
        provider.gate.set()
        assert source.wait_for_refreshes(1, timeout=5)
        assert source.current().value == "token-4" and source.last_error is None
    finally:
        source.close()


def test_token_source_first_fetch_errors_reach_the_caller():
    def rejected():
        raise AuthenticationError("token endpoint said invalid_client")

    source = TokenSource(rejected)
    with pytest.raises(AuthenticationError, match="invalid_client"):
        source.current()
    source = TokenSource(ShortLivedTokens(1.0, fail={1}), description="my provider")
    with pytest.raises(TokenUnavailableError, match="the my provider failed: ConnectionError: IdP down"):
        source.current()
    source = TokenSource(lambda: ("expired", time.time() - 5))
    with pytest.raises(AuthenticationError, match="returned a token that expired"):
        source.current()


def test_token_source_expired_token_with_failing_refresh():
    now = [1000.0]
    provider = ShortLivedTokens(lifetime_s=0, fail={2, 3, 4, 5, 6, 7, 8, 9, 10})
    provider_tokens = iter([OAuthBearerToken("tok", 1010_000, "tok-sub")])

    def fake():
        provider()
        return next(provider_tokens)

    source = TokenSource(fake, clock=lambda: now[0], jitter=0)
    try:
        assert source.current().value == "tok"
        now[0] = 1011.0                                        # past expiry
        with pytest.raises(TokenUnavailableError, match="'tok-sub' from .* expired and no new one could be fetched"):
            source.current()                                   # (" yet", unless the refresher already failed)
        source.refresh_now()
        wait_until("a failed refresh", lambda: source.refresh_failures >= 1)
        with pytest.raises(TokenUnavailableError, match=r"could be fetched: .*IdP down \(call \d+\)") as e:
            source.current()
        assert e.value.retriable
    finally:
        source.close()


def test_token_source_first_fetch_happens_once_for_concurrent_callers():
    release = threading.Event()
    calls = []

    def slow():
        calls.append(1)
        release.wait(5)
        return ("tok", time.time() + 60)

    source = TokenSource(slow)
    results = []
    threads = [threading.Thread(target=lambda: results.append(source.current())) for _ in range(4)]
    for t in threads:
        t.start()
    wait_until("one call to the provider", lambda: len(calls) == 1)
    release.set()
    for t in threads:
        t.join(5)
    try:
        assert len(calls) == 1 and len(results) == 4 and len({id(r) for r in results}) == 1
    finally:
        source.close()


def test_token_source_refresh_now_and_close():
    provider = ShortLivedTokens(lifetime_s=3600)
    source = TokenSource(provider)
    source.current()
    source.refresh_now()
    assert source.wait_for_refreshes(1, timeout=5) and source.current().value == "token-2"
    source.close()
    assert not source._thread.is_alive()
    with pytest.raises(AuthenticationError, match="closed"):
        TokenSource(provider).close() or _closed_current(provider)


def _closed_current(provider):
    source = TokenSource(provider)
    source.close()
    source.current()
