"""SASL mechanisms (PLAIN, SCRAM, OAUTHBEARER) and sasl.jaas.config parsing, without a broker."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re

import pytest

from sparkkafka_sink.errors import AuthenticationError, ConfigError
from sparkkafka_sink.network.sasl.jaas import parse_jaas
from sparkkafka_sink.network.sasl.oauthbearer import OAuthBearerClient
from sparkkafka_sink.network.sasl.plain import PlainClient
from sparkkafka_sink.network.sasl.scram import ScramClient, sasl_name

SECRET = "hunter2-S3CRET"


# -- PLAIN ---------------------------------------------------------------------------------
def test_plain_message_is_authzid_nul_user_nul_password():
    client = PlainClient("alice", "pä55")
    assert not client.complete
    assert client.first_message() == b"\0alice\0p\xc3\xa455"
    assert client.complete
    assert client.evaluate(b"") is None                       # the broker's empty success answer


def test_plain_rejects_unexpected_challenges_and_nul():
    client = PlainClient("alice", SECRET)
    with pytest.raises(AuthenticationError, match="before the first message"):
        client.evaluate(b"")
    client.first_message()
    with pytest.raises(AuthenticationError, match="unexpected 3-byte challenge") as e:
        client.evaluate(b"abc")
    assert SECRET not in str(e.value)
    with pytest.raises(ValueError, match="NUL"):
        PlainClient("al\0ice", "x")


# -- SCRAM ---------------------------------------------------------------------------------
def test_scram_sha256_rfc7677_example_byte_for_byte():
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.first_message() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    final = client.evaluate(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    assert final == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert not client.complete
    assert client.evaluate(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=") is None
    assert client.complete
    assert client.evaluate(b"") is None


class ScramServer:
    """The broker's side of RFC 5802, computed independently of the client under test."""

    def __init__(self, mechanism, password, *, iterations=4096, salt=b"NaCl-salt-16byte",
                 server_nonce="SeRvErNoNcE", knows_password=True):
        self.hash = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
        # an impostor that does not know the password derives different keys
        salted = hashlib.pbkdf2_hmac(self.hash, (password if knows_password else "guess").encode(),
                                     salt, iterations)
        self.client_key = hmac.new(salted, b"Client Key", self.hash).digest()
        self.stored_key = hashlib.new(self.hash, self.client_key).digest()
        self.server_key = hmac.new(salted, b"Server Key", self.hash).digest()
        self.salt, self.iterations, self.server_nonce = salt, iterations, server_nonce

    def first(self, client_first: bytes) -> bytes:
        text = client_first.decode()
        assert text.startswith("n,,")
        self.client_first_bare = text[3:]
        attrs = dict(kv.split("=", 1) for kv in self.client_first_bare.split(","))
        self.user, self.nonce = attrs["n"], attrs["r"] + self.server_nonce
        self.extensions = {k: v for k, v in attrs.items() if k not in ("n", "r")}
        self.server_first = (f"r={self.nonce},s={base64.b64encode(self.salt).decode()},"
                             f"i={self.iterations}")
        return self.server_first.encode()

    def final(self, client_final: bytes) -> bytes:
        text = client_final.decode()
        without_proof, proof_b64 = text.rsplit(",p=", 1)
        assert without_proof == f"c=biws,r={self.nonce}"
        auth = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
        signature = hmac.new(self.stored_key, auth, self.hash).digest()
        client_key = bytes(a ^ b for a, b in zip(base64.b64decode(proof_b64), signature, strict=True))
        if hashlib.new(self.hash, client_key).digest() != self.stored_key:
            return b"e=invalid-proof"
        return b"v=" + base64.b64encode(hmac.new(self.server_key, auth, self.hash).digest())


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256"])
def test_scram_full_exchange_against_a_server_computation(mechanism):
    server = ScramServer(mechanism, SECRET, iterations=5000)
    client = ScramClient(mechanism, "al,i=ce", SECRET)
    server_first = server.first(client.first_message())
    assert server.user == "al=2Ci=3Dce"
    assert client.evaluate(server.final(client.evaluate(server_first))) is None
    assert client.complete


def test_scram_nonces_are_random_and_printable():
    nonces = {ScramClient("SCRAM-SHA-256", "u", "p").first_message() for _ in range(20)}
    assert len(nonces) == 20
    for message in nonces:
        nonce = message.decode().split(",r=", 1)[1]
        assert len(nonce) >= 24 and re.fullmatch(r"[\x21-\x2b\x2d-\x7e]+", nonce)


def test_scram_wrong_server_signature_is_rejected():
    impostor = ScramServer("SCRAM-SHA-512", SECRET, knows_password=False)
    client = ScramClient("SCRAM-SHA-512", "alice", SECRET)
    final = client.evaluate(impostor.first(client.first_message()))
    forged = b"v=" + base64.b64encode(hmac.new(impostor.server_key, b"x", "sha512").digest())
    with pytest.raises(AuthenticationError) as e:
        client.evaluate(forged)
    message = str(e.value)
    assert "could not prove it knows the password" in message
    assert "SCRAM-SHA-512" in message and "'alice'" in message and SECRET not in message
    assert not client.complete
    del final


def test_scram_wrong_password_gets_the_brokers_error():
    server = ScramServer("SCRAM-SHA-256", "the-real-password")
    client = ScramClient("SCRAM-SHA-256", "alice", SECRET)
    final = client.evaluate(server.first(client.first_message()))
    with pytest.raises(AuthenticationError, match="the broker answered error 'invalid-proof'") as e:
        client.evaluate(server.final(final))
    assert SECRET not in str(e.value)


def test_scram_refuses_fewer_than_4096_iterations():
    server = ScramServer("SCRAM-SHA-256", SECRET, iterations=4095)
    client = ScramClient("SCRAM-SHA-256", "alice", SECRET)
    with pytest.raises(AuthenticationError, match="4095 iterations, less than the minimum 4096"):
        client.evaluate(server.first(client.first_message()))


@pytest.mark.parametrize("server_first,error", [
    (b"r=someone-elses-nonce,s=QUJD,i=4096", "does not start with the client nonce"),
    (b"m=ext,r=NONCEsrv,s=QUJD,i=4096", "mandatory SCRAM extension"),
    (b"r=NONCEsrv,s=not base64,i=4096", "malformed server-first"),
    (b"r=NONCEsrv,s=QUJD", "malformed server-first"),
    (b"\xff\xfe", "not UTF-8"),
])
def test_scram_bad_server_first(server_first, error):
    client = ScramClient("SCRAM-SHA-256", "alice", SECRET, nonce="NONCE")
    client.first_message()
    with pytest.raises(AuthenticationError, match=error):
        client.evaluate(server_first)


def test_scram_malformed_server_final():
    server = ScramServer("SCRAM-SHA-256", SECRET)
    client = ScramClient("SCRAM-SHA-256", "alice", SECRET)
    client.evaluate(server.first(client.first_message()))
    with pytest.raises(AuthenticationError, match="malformed server-final"):
        client.evaluate(b"x=1")


def test_scram_token_auth_extension_and_saslname_escaping():
    assert sasl_name("a=b,c") == "a=3Db=2Cc"
    client = ScramClient("SCRAM-SHA-256", "tokenid", "hmac", token_auth=True, nonce="abc")
    assert client.first_message() == b"n,,n=tokenid,r=abc,tokenauth=true"
    server = ScramServer("SCRAM-SHA-256", "hmac")
    client = ScramClient("SCRAM-SHA-256", "tokenid", "hmac", token_auth=True)
    server_first = server.first(client.first_message())
    assert server.extensions == {"tokenauth": "true"}
    assert client.evaluate(server.final(client.evaluate(server_first))) is None


def test_scram_rejects_unknown_mechanism_and_bad_nonce():
    with pytest.raises(ValueError, match="not a SCRAM mechanism"):
        ScramClient("SCRAM-SHA-1", "u", "p")
    with pytest.raises(ValueError, match="nonce"):
        ScramClient("SCRAM-SHA-256", "u", "p", nonce="a,b")


# -- OAUTHBEARER ---------------------------------------------------------------------------
TOKEN = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9."


def test_oauthbearer_first_message_with_extensions():
    client = OAuthBearerClient(TOKEN, {"logicalCluster": "lkc-123", "identityPoolId": "pool-x y"},
                               principal="alice")
    assert client.first_message() == (
        b"n,,\x01auth=Bearer " + TOKEN.encode()
        + b"\x01logicalCluster=lkc-123\x01identityPoolId=pool-x y\x01\x01")
    assert OAuthBearerClient(TOKEN).first_message() == b"n,,\x01auth=Bearer " + TOKEN.encode() + b"\x01\x01"


def test_oauthbearer_success_is_an_empty_challenge():
    client = OAuthBearerClient(TOKEN, principal="alice")
    client.first_message()
    assert client.evaluate(b"") is None
    assert client.complete and client.failure_detail() is None


def test_oauthbearer_error_challenge_is_answered_with_0x01_and_kept():
    client = OAuthBearerClient(TOKEN, principal="alice")
    client.first_message()
    error = b'{"status":"invalid_token","scope":"kafka"}'
    assert client.evaluate(error) == b"\x01"
    assert not client.complete
    assert client.failure_detail() == error.decode()
    assert client.error == {"status": "invalid_token", "scope": "kafka"}
    with pytest.raises(AuthenticationError, match="invalid_token") as e:
        client.evaluate(b"more")
    assert TOKEN not in str(e.value)


@pytest.mark.parametrize("extensions,error", [
    ({"auth": "x"}, "'auth' is reserved"),
    ({"bad_name": "x"}, "extension name 'bad_name' is invalid"),
    ({"ok": "tab\tok but \x01 no"}, "the value of extension 'ok' is invalid"),
    ({"ok": ""}, "the value of extension 'ok' is invalid"),
])
def test_oauthbearer_extension_validation(extensions, error):
    with pytest.raises(ConfigError, match=error) as e:
        OAuthBearerClient(TOKEN, extensions)
    assert "\x01 no" not in str(e.value)                       # values are not shown


def test_oauthbearer_refuses_a_token_that_would_break_the_message():
    client = OAuthBearerClient("abc def\x01auth=x")
    with pytest.raises(AuthenticationError, match="not a valid bearer token") as e:
        client.first_message()
    assert "abc def" not in str(e.value)


# -- sasl.jaas.config ------------------------------------------------------------------------
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


def test_jaas_typical_config():
    jaas = parse_jaas(f'{PLAIN_MODULE} required username="alice" password="{SECRET}";')
    assert jaas.login_module == PLAIN_MODULE and jaas.flag == "required"
    assert dict(jaas.options) == {"username": "alice", "password": SECRET}
    assert jaas.module_name == "PlainLoginModule"
    assert SECRET not in repr(jaas) and SECRET not in str(jaas)


def test_jaas_quotes_escapes_comments_and_words():
    text = (f"/* leading comment */ {PLAIN_MODULE}  OPTIONAL // a line comment\n"
            "  username=alice.b-c_d$e\n"
            "  quoted=\"a \\\"b\\\" \\\\ \\n \\t \\101 \\q \\\\\\\"\"\n"
            "  single='x\"y' empty=\"\" /* inline */ shaded=kafkashaded.org.Module\n"
            "  ;  // trailing")
    jaas = parse_jaas(text)
    assert jaas.flag == "optional"
    assert dict(jaas.options) == {"username": "alice.b-c_d$e", "quoted": 'a "b" \\ \n \t A q \\"',
                                  "single": 'x"y', "empty": "", "shaded": "kafkashaded.org.Module"}


def test_jaas_adjacent_quotes_are_two_tokens_as_in_java():
    # 'it''s' is the value 'it' followed by a quoted token 's' -- StreamTokenizer has no '' escape
    with pytest.raises(ConfigError, match="value not specified for option 's'"):
        parse_jaas(f"{PLAIN_MODULE} required password='it''s';")


def test_jaas_lone_slash_is_a_line_comment_that_can_swallow_the_next_line():
    # StreamTokenizer consumes the character after '/' before skipping to the end of the line
    jaas = parse_jaas(f'{PLAIN_MODULE} required a="1" / note\n b="2" /\n c="3"\n d="4";')
    assert dict(jaas.options) == {"a": "1", "b": "2", "d": "4"}


def test_jaas_several_options_last_wins_and_non_ascii():
    jaas = parse_jaas(f'{PLAIN_MODULE} Required a="1" b=žluť a="2" c="€";')
    assert dict(jaas.options) == {"a": "2", "b": "žluť", "c": "€"}


@pytest.mark.parametrize("text,error", [
    ("", "no login module given"),
    ("  // only a comment", "no login module given"),
    (PLAIN_MODULE, "no control flag"),
    (f"{PLAIN_MODULE} mandatory username=\"u\";", "invalid control flag 'mandatory'"),
    (f'{PLAIN_MODULE} required username="u" password="{SECRET}"', "not terminated by a semicolon"),
    (f'{PLAIN_MODULE} required password "{SECRET}";', "value not specified for option 'password'"),
    (f"{PLAIN_MODULE} required password={SECRET[7:]};", "value not specified for option 'password'"),
    (f"{PLAIN_MODULE} required password=-{SECRET};", "value not specified for option 'password'"),
    (f'{PLAIN_MODULE} required password="{SECRET}\n";', "not closed before the end of the line"),
    (f'{PLAIN_MODULE} required password="{SECRET}', "not closed before the end of the line"),
    (f'{PLAIN_MODULE} required password="{SECRET}" ={SECRET};', "expected an option name or ';'"),
    (f'{PLAIN_MODULE} required u="{SECRET}"; {PLAIN_MODULE} required u="v";', "2 login modules given"),
    (f'{PLAIN_MODULE} required u="{SECRET}" /* open comment', "not terminated by a semicolon"),
])
def test_jaas_errors_name_the_key_and_never_a_value(text, error):
    with pytest.raises(ConfigError) as e:
        parse_jaas(text)
    message = str(e.value)
    assert "'sasl.jaas.config'" in message
    assert error in message
    for part in (SECRET, SECRET[7:], SECRET[:7]):
        assert part not in message


def test_jaas_rejects_non_strings():
    with pytest.raises(ConfigError, match="expected a string"):
        parse_jaas(None)  # type: ignore[arg-type]


def test_scram_user_names_are_utf8():
    server = ScramServer("SCRAM-SHA-256", "p")
    client = ScramClient("SCRAM-SHA-256", "žluť", "p")
    server.first(client.first_message())
    assert server.user == "žluť"
