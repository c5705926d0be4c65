"""Test material for TLS and SASL: a throw-away PKI, a local OAuth 2 token endpoint, and the
broker properties of the secured listeners of :class:`~sparkkafka_sink.testing.apache_kafka.ApacheKafka`.

* :class:`TestPki` writes, with the ``cryptography`` package, a test CA and the certificates the
  TLS tests need (a good broker certificate for ``127.0.0.1``/``localhost``, one for another
  host name only, an expired one, one from an unknown CA, a client certificate for mutual TLS)
  as PEM files, PKCS#12 stores and (with ``keytool``) a JKS truststore.
* :class:`TokenEndpoint` is an OAuth 2 client-credentials token endpoint on 127.0.0.1 issuing
  unsecured JWTs (``{"alg":"none"}``), which Kafka's default OAUTHBEARER validator
  (``OAuthBearerUnsecuredValidatorCallbackHandler``) accepts.
* :class:`BrokerSecurity` gives the extra listeners (``SSL``, ``MTLS``, ``BADHOST``, ``EXPIRED``,
  ``UNTRUSTED``, ``SASL_PLAINTEXT``, ``SASL_SSL``, ``REAUTH``) and their ``server.properties``
  keys, the SASL users (PLAIN in the listener's JAAS config, SCRAM added when KRaft storage is
  formatted) and :func:`librdkafka_config` client settings for confluent-kafka.

Use::

    pki = TestPki(tmp_dir)
    cluster = ApacheKafka(nodes=1, security=BrokerSecurity(pki)).start()
    cluster.bootstrap("SASL_SSL")        # "127.0.0.1:<port>"
    librdkafka_config(cluster, "SASL_SSL", "SCRAM-SHA-512")

Every listener except PLAINTEXT/CONTROLLER (inter-broker and controller traffic) is extra.
"""

from __future__ import annotations

import base64
import datetime as _dt
import ipaddress
import json
import shutil
import ssl
import subprocess
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

__all__ = [
    "TestPki", "CertKey", "TokenEndpoint", "unsecured_jwt", "BrokerSecurity", "Listener",
    "LISTENERS", "SASL_MECHANISMS", "SCRAM_MECHANISMS", "OAUTH_CLIENT_ID", "OAUTH_CLIENT_SECRET",
    "WRONG_PASSWORD", "librdkafka_config", "sasl_probe", "SaslProbeResult",
]

HOST = "127.0.0.1"

# ---------------------------------------------------------------------------------------------
# PKI
# ---------------------------------------------------------------------------------------------


@dataclass
class CertKey:
    """A certificate with its private key and the files they were written to.

    ``chain_path``: the leaf followed by its issuing CA (PEM); ``key_path``: the unencrypted
    PKCS#8 key (PEM); ``bundle_path``: key then chain in one file (a Kafka ``PEM`` keystore
    location, or Python's ``load_cert_chain(bundle_path)``).
    """

    name: str
    cert: object  # cryptography.x509.Certificate
    key: object   # a cryptography private key
    chain: list   # [leaf, issuer, ...] cryptography.x509.Certificate
    cert_path: Path    # the leaf alone
    chain_path: Path   # leaf + issuer
    key_path: Path     # PKCS#8, unencrypted
    bundle_path: Path  # key + leaf + issuer

    @property
    def cert_pem(self) -> str:
        return _cert_pem(self.cert)

    @property
    def chain_pem(self) -> str:
        return "".join(_cert_pem(c) for c in self.chain)

    @property
    def key_pem(self) -> str:
        return _key_pem(self.key)


def _cert_pem(cert) -> str:
    from cryptography.hazmat.primitives import serialization

    return cert.public_bytes(serialization.Encoding.PEM).decode()


def _key_pem(key, password: Optional[str] = None) -> str:
    from cryptography.hazmat.primitives import serialization

    enc = (serialization.BestAvailableEncryption(password.encode()) if password
           else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             enc).decode()


class TestPki:
    """A throw-away PKI written into ``directory`` (created if missing) at construction.

    Attributes (paths are :class:`pathlib.Path`; ``*_pem`` are ``str``):

    * ``ca`` (:class:`CertKey`, self-signed test CA), ``ca_cert_path``, ``ca_pem``
    * ``broker``: SAN ``IP:127.0.0.1, DNS:localhost``, signed by ``ca``
    * ``wrong_host``: SAN ``DNS:wrong-host.invalid`` only, signed by ``ca``
    * ``expired``: SAN ``IP:127.0.0.1, DNS:localhost``, signed by ``ca``, expired
      ``expired_days`` days ago
    * ``unknown_ca`` (a second, unrelated self-signed CA), ``unknown_ca_cert_path``, and
      ``untrusted``: SAN ``IP:127.0.0.1, DNS:localhost`` signed by ``unknown_ca``
    * ``client``: ``CN=client``, extended key usage clientAuth, signed by ``ca`` (mutual TLS);
      ``client_key_encrypted_path`` holds its key as encrypted PKCS#8 PEM with ``key_password``,
      ``client_bundle_encrypted_path`` that key plus the chain
    * ``truststore_p12_path``: PKCS#12 holding ``ca`` as a trusted certificate (Java's format,
      as ``keytool -importcert`` makes it), password ``store_password``
    * ``client_keystore_p12_path``: PKCS#12 with the client key, certificate and ``ca``,
      password ``store_password``
    * ``truststore_jks_path``: JKS truststore (``keytool -importcert``) with ``ca``, password
      ``store_password``; None when ``keytool`` is missing or ``jks=False``

    ``key_type`` is "rsa" (2048 bit, default) or "ec" (P-256).  The class is not a test
    (``__test__ = False``) despite its name.
    """

    __test__ = False

    def __init__(self, directory: Union[str, Path], *, key_type: str = "rsa",
                 key_password: str = "key-secret", store_password: str = "store-secret",
                 jks: bool = True, expired_days: int = 1):
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.serialization import pkcs12
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        if key_type not in ("rsa", "ec"):
            raise ValueError(f"key_type must be 'rsa' or 'ec', got {key_type!r}")
        self._x509, self._hashes, self._NameOID = x509, hashes, NameOID
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.key_type = key_type
        self.key_password = key_password
        self.store_password = store_password
        now = _dt.datetime.now(_dt.timezone.utc)
        self._now = now
        local = [x509.IPAddress(ipaddress.ip_address(HOST)), x509.DNSName("localhost")]
        server_eku = [ExtendedKeyUsageOID.SERVER_AUTH]
        client_eku = [ExtendedKeyUsageOID.CLIENT_AUTH]

        self.ca = self._make("ca", "sparkkafka test CA", None, is_ca=True)
        self.unknown_ca = self._make("unknown-ca", "sparkkafka unknown CA", None, is_ca=True)
        self.broker = self._make("broker", "127.0.0.1", self.ca, san=local, eku=server_eku)
        self.wrong_host = self._make("wrong-host", "wrong-host.invalid", self.ca,
                                     san=[x509.DNSName("wrong-host.invalid")], eku=server_eku)
        self.expired = self._make(
            "expired", "127.0.0.1", self.ca, san=local, eku=server_eku,
            not_before=now - _dt.timedelta(days=30 + expired_days),
            not_after=now - _dt.timedelta(days=expired_days))
        self.untrusted = self._make("untrusted", "127.0.0.1", self.unknown_ca, san=local,
                                    eku=server_eku)
        self.client = self._make("client", "client", self.ca, eku=client_eku)

        self.ca_cert_path = self.ca.cert_path
        self.ca_pem = self.ca.cert_pem
        self.unknown_ca_cert_path = self.unknown_ca.cert_path

        # encrypted PKCS#8 variant of the client key
        self.client_key_encrypted_path = self.dir / "client.key.encrypted.pem"
        self.client_key_encrypted_pem = _key_pem(self.client.key, key_password)
        self.client_key_encrypted_path.write_text(self.client_key_encrypted_pem)
        self.client_bundle_encrypted_path = self.dir / "client.bundle.encrypted.pem"
        self.client_bundle_encrypted_path.write_text(self.client_key_encrypted_pem
                                                     + self.client.chain_pem)

        # PKCS#12 stores
        enc = serialization.BestAvailableEncryption(store_password.encode())
        self.truststore_p12_path = self.dir / "truststore.p12"
        self.truststore_p12_path.write_bytes(pkcs12.serialize_java_truststore(
            [pkcs12.PKCS12Certificate(self.ca.cert, b"ca")], enc))
        self.client_keystore_p12_path = self.dir / "client.keystore.p12"
        self.client_keystore_p12_path.write_bytes(pkcs12.serialize_key_and_certificates(
            b"client", self.client.key, self.client.cert, [self.ca.cert], enc))

        self.truststore_jks_path: Optional[Path] = None
        if jks and shutil.which("keytool"):
            self.truststore_jks_path = self.dir / "truststore.jks"
            self._keytool_import(self.truststore_jks_path, "JKS")

    # -- internals ------------------------------------------------------------------------------
    def _new_key(self):
        from cryptography.hazmat.primitives.asymmetric import ec, rsa

        if self.key_type == "ec":
            return ec.generate_private_key(ec.SECP256R1())
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def _make(self, name: str, cn: str, issuer: Optional[CertKey], *, is_ca: bool = False,
              san: Optional[list] = None, eku: Optional[list] = None,
              not_before: Optional[_dt.datetime] = None,
              not_after: Optional[_dt.datetime] = None) -> CertKey:
        x509, hashes, NameOID = self._x509, self._hashes, self._NameOID
        key = self._new_key()
        subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "sparkkafka-sink tests"),
                             x509.NameAttribute(NameOID.COMMON_NAME, cn)])
        issuer_name = subject if issuer is None else issuer.cert.subject
        signing_key = key if issuer is None else issuer.key
        not_before = not_before or self._now - _dt.timedelta(hours=1)
        not_after = not_after or self._now + _dt.timedelta(days=3650 if is_ca else 825)
        b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer_name)
             .public_key(key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(not_before).not_valid_after(not_after)
             .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None if not is_ca else 0),
                            critical=True)
             .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                            critical=False))
        if is_ca:
            b = b.add_extension(x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                encipher_only=False, decipher_only=False), critical=True)
        else:
            b = b.add_extension(x509.KeyUsage(
                digital_signature=True, content_commitment=False,
                key_encipherment=self.key_type == "rsa", data_encipherment=False,
                key_agreement=False, key_cert_sign=False, crl_sign=False, encipher_only=False,
                decipher_only=False), critical=True)
            b = b.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                issuer.key.public_key()), critical=False)
        if san:
            b = b.add_extension(x509.SubjectAlternativeName(san), critical=False)
        if eku:
            b = b.add_extension(x509.ExtendedKeyUsage(eku), critical=False)
        cert = b.sign(signing_key, hashes.SHA256())
        chain = [cert] if issuer is None else [cert, *issuer.chain]
        ck = CertKey(name=name, cert=cert, key=key, chain=chain,
                     cert_path=self.dir / f"{name}.crt.pem",
                     chain_path=self.dir / f"{name}.chain.pem",
                     key_path=self.dir / f"{name}.key.pem",
                     bundle_path=self.dir / f"{name}.bundle.pem")
        ck.cert_path.write_text(ck.cert_pem)
        ck.chain_path.write_text(ck.chain_pem)
        ck.key_path.write_text(ck.key_pem)
        ck.key_path.chmod(0o600)
        ck.bundle_path.write_text(ck.key_pem + ck.chain_pem)
        ck.bundle_path.chmod(0o600)
        return ck

    def _keytool_import(self, path: Path, store_type: str) -> None:
        cmd = ["keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", str(self.ca_cert_path),
               "-keystore", str(path), "-storetype", store_type, "-storepass", self.store_password]
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"`{' '.join(cmd)}` failed ({proc.returncode}): "
                               f"{(proc.stdout + proc.stderr).strip()}")

    # -- conveniences for Python clients --------------------------------------------------------
    def client_ssl_context(self, *, client_cert: bool = False, check_hostname: bool = True,
                           ca: Optional[CertKey] = None) -> ssl.SSLContext:
        """A Python ``ssl.SSLContext`` trusting ``ca`` (default the test CA), optionally with
        the client certificate for mutual TLS."""
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH,
                                         cafile=str((ca or self.ca).cert_path))
        ctx.check_hostname = check_hostname
        if client_cert:
            ctx.load_cert_chain(str(self.client.chain_path), str(self.client.key_path))
        return ctx

    def __repr__(self) -> str:
        return f"<TestPki {self.key_type} {self.dir}>"


# ---------------------------------------------------------------------------------------------
# OAuth 2 token endpoint
# ---------------------------------------------------------------------------------------------

OAUTH_CLIENT_ID = "sparkkafka-client"
OAUTH_CLIENT_SECRET = "sparkkafka-client-secret"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def unsecured_jwt(sub: str, lifetime_s: float = 3600.0, scope: Union[str, Sequence[str], None] = "kafka",
                  *, now: Optional[float] = None, extra_claims: Optional[dict] = None) -> str:
    """An unsecured JWS (``{"alg":"none"}``, empty signature: ``header.payload.``) with claims
    ``sub``, ``iat``, ``exp = iat + lifetime_s`` and ``scope`` (omitted when None), the form
    Kafka's ``OAuthBearerUnsecuredValidatorCallbackHandler`` accepts.  ``iat``/``exp`` are
    whole seconds (NumericDate)."""
    now = time.time() if now is None else now
    claims = {"sub": sub, "iat": int(now), "exp": int(now + lifetime_s)}
    if scope is not None:
        claims["scope"] = scope if isinstance(scope, str) else list(scope)
    claims.update(extra_claims or {})
    header = _b64url(json.dumps({"alg": "none"}, separators=(",", ":")).encode())
    payload = _b64url(json.dumps(claims, separators=(",", ":")).encode())
    return f"{header}.{payload}."


class TokenEndpoint:
    """An OAuth 2 client-credentials token endpoint on 127.0.0.1 (``http.server``, one thread
    per request) issuing :func:`unsecured_jwt` tokens.

    ``POST <url>`` with ``grant_type=client_credentials`` and the client's id and secret in HTTP
    Basic auth (or ``client_id``/``client_secret`` form fields) answers
    ``{"access_token", "token_type": "bearer", "expires_in", "scope"}``; the token's ``sub`` is
    the client id, its lifetime ``lifetime_s`` and its scope the requested one (else
    ``default_scope``).  Wrong credentials get 401 ``{"error": "invalid_client"}``, another
    grant type 400 ``{"error": "unsupported_grant_type"}``.

    Mutable between requests: ``lifetime_s``, ``delay_s`` (sleep before answering),
    ``fail_next(n, status=503)``.  Observable: ``calls`` (token requests answered, failures
    included), ``tokens`` (issued tokens), ``requests`` (dicts: path, headers, form, status).
    ``pki`` serves HTTPS with ``pki.broker`` (the URL then starts with ``https://``).
    """

    def __init__(self, client_id: str = OAUTH_CLIENT_ID, client_secret: str = OAUTH_CLIENT_SECRET,
                 *, lifetime_s: float = 3600.0, default_scope: str = "kafka", path: str = "/token",
                 pki: Optional[TestPki] = None):
        self.client_id = client_id
        self.client_secret = client_secret
        self.lifetime_s = lifetime_s
        self.default_scope = default_scope
        self.path = path
        self.delay_s = 0.0
        self.pki = pki
        self.calls = 0
        self.tokens: List[str] = []
        self.requests: List[dict] = []
        self._fail: List[int] = []
        self._lock = threading.Lock()
        self._server: Optional[ThreadingHTTPServer] = None
        self._thread: Optional[threading.Thread] = None

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("TokenEndpoint not started")
        scheme = "https" if self.pki else "http"
        return f"{scheme}://{HOST}:{self._server.server_address[1]}{self.path}"

    def fail_next(self, n: int = 1, status: int = 503) -> None:
        """Answer the next ``n`` token requests with HTTP ``status`` (an OAuth error body)."""
        with self._lock:
            self._fail.extend([status] * n)

    def reset(self) -> None:
        """Forget counts, tokens and pending failures; restore ``delay_s`` to 0."""
        with self._lock:
            self.calls = 0
            self.tokens.clear()
            self.requests.clear()
            self._fail.clear()
            self.delay_s = 0.0

    def start(self) -> "TokenEndpoint":
        if self._server is not None:
            return self
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                self._send(405, {"error": "invalid_request", "error_description": "use POST"})

            def do_POST(self) -> None:
                endpoint._handle(self)

            def _send(self, status: int, body: dict, headers: Optional[dict] = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Cache-Control", "no-store")
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        server = ThreadingHTTPServer((HOST, 0), Handler)
        server.daemon_threads = True
        if self.pki is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(str(self.pki.broker.chain_path), str(self.pki.broker.key_path))
            server.socket = ctx.wrap_socket(server.socket, server_side=True)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="token-endpoint", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> "TokenEndpoint":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def _handle(self, h) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length).decode("utf-8", "replace") if length else ""
        form = {k: v[-1] for k, v in urllib.parse.parse_qs(raw, keep_blank_values=True).items()}
        record = {"path": h.path, "headers": dict(h.headers.items()), "form": form, "status": None}
        with self._lock:
            self.calls += 1
            self.requests.append(record)
            fail = self._fail.pop(0) if self._fail else None
            delay = self.delay_s
        if delay:
            time.sleep(delay)

        def send(status: int, body: dict, headers: Optional[dict] = None) -> None:
            record["status"] = status
            h._send(status, body, headers)

        if h.path.split("?")[0] != self.path:
            return send(404, {"error": "invalid_request", "error_description": f"no endpoint {h.path}"})
        if fail is not None:
            return send(fail, {"error": "temporarily_unavailable",
                               "error_description": f"told to fail (HTTP {fail})"})
        client_id, secret = form.get("client_id"), form.get("client_secret")
        auth = h.headers.get("Authorization", "")
        if auth[:6].lower() == "basic ":
            try:
                user, _, pw = base64.b64decode(auth[6:].strip()).decode("utf-8").partition(":")
                client_id, secret = urllib.parse.unquote_plus(user), urllib.parse.unquote_plus(pw)
            except (ValueError, UnicodeDecodeError):
                client_id = secret = None
        if client_id != self.client_id or secret != self.client_secret:
            return send(401, {"error": "invalid_client",
                              "error_description": "client authentication failed"},
                        {"WWW-Authenticate": 'Basic realm="sparkkafka-test"'})
        if form.get("grant_type") != "client_credentials":
            return send(400, {"error": "unsupported_grant_type",
                              "error_description": f"grant_type {form.get('grant_type')!r}"})
        scope = form.get("scope") or self.default_scope
        lifetime = self.lifetime_s
        token = unsecured_jwt(client_id, lifetime, scope)
        with self._lock:
            self.tokens.append(token)
        send(200, {"access_token": token, "token_type": "bearer", "expires_in": int(lifetime),
                   "scope": scope})


# ---------------------------------------------------------------------------------------------
# Broker listeners
# ---------------------------------------------------------------------------------------------

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SASL_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS, "OAUTHBEARER")
#: a password no user has
WRONG_PASSWORD = "not-the-password"


@dataclass(frozen=True)
class Listener:
    """One extra listener: its name, security protocol, the certificate it presents (an
    attribute name of :class:`TestPki`) and whether it requires client certificates."""

    name: str
    protocol: str
    cert: Optional[str] = None
    client_auth: bool = False
    sasl: bool = False
    reauth: bool = False


#: every extra listener :class:`BrokerSecurity` can add, by name
LISTENERS: Dict[str, Listener] = {l.name: l for l in [
    Listener("SSL", "SSL", "broker"),                          # server auth only
    Listener("MTLS", "SSL", "broker", client_auth=True),       # ssl.client.auth=required
    Listener("BADHOST", "SSL", "wrong_host"),                  # cert for wrong-host.invalid only
    Listener("EXPIRED", "SSL", "expired"),                     # expired cert (signed by the CA)
    Listener("UNTRUSTED", "SSL", "untrusted"),                 # cert signed by the unknown CA
    Listener("SASL_PLAINTEXT", "SASL_PLAINTEXT", sasl=True),
    Listener("SASL_SSL", "SASL_SSL", "broker", sasl=True),
    Listener("REAUTH", "SASL_SSL", "broker", sasl=True, reauth=True),  # connections.max.reauth.ms
]}

_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
_UNSECURED_VALIDATOR = ("org.apache.kafka.common.security.oauthbearer.internals.unsecured."
                        "OAuthBearerUnsecuredValidatorCallbackHandler")


def _jaas_quote(value: str) -> str:
    if '"' in value or "\\" in value or "\n" in value:
        raise ValueError(f"JAAS option values here may not hold quotes, backslashes or newlines: {value!r}")
    return f'"{value}"'


@dataclass
class BrokerSecurity:
    """The secured listeners of every node of an :class:`ApacheKafka` cluster
    (``ApacheKafka(..., security=BrokerSecurity(pki))``).

    ``listeners``: names from :data:`LISTENERS` (default all).  Users (``name -> password``):
    ``plain_users`` live in the PLAIN JAAS config of each SASL listener; ``scram_users`` per
    mechanism are added to the cluster metadata when storage is formatted
    (``StorageTool format --add-scram``).  OAUTHBEARER takes any unsecured JWT
    (``{"alg":"none"}``) with ``sub`` and a future ``exp``; ``oauth_required_scope`` makes the
    validator require a scope.  ``reauth_ms`` is ``connections.max.reauth.ms`` of the
    ``REAUTH`` listener (other listeners: 0, no re-authentication).

    ``authorizer`` turns on Kafka's ``StandardAuthorizer`` (ACLs kept in the KRaft metadata):
    ``User:ANONYMOUS`` (the PLAINTEXT and CONTROLLER listeners, so inter-broker traffic and test
    set-up) is a super user, and a resource without ACLs stays open to everyone
    (``allow.everyone.if.no.acl.found``), so only the topics a test puts ACLs on are restricted.

    Default users: ``alice``/``alice-secret`` for PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512;
    ``carol``/``carol-secret`` PLAIN only; ``bob``/``bob-secret`` SCRAM-SHA-512 only (8192
    iterations); :data:`WRONG_PASSWORD` is nobody's password.
    """

    pki: TestPki
    listeners: Sequence[str] = tuple(LISTENERS)
    reauth_ms: int = 3000
    plain_users: Dict[str, str] = field(default_factory=lambda: {
        "alice": "alice-secret", "carol": "carol-secret"})
    scram_users: Dict[str, Dict[str, str]] = field(default_factory=lambda: {
        "SCRAM-SHA-256": {"alice": "alice-secret"},
        "SCRAM-SHA-512": {"alice": "alice-secret", "bob": "bob-secret"}})
    scram_iterations: Dict[Tuple[str, str], int] = field(default_factory=lambda: {
        ("SCRAM-SHA-512", "bob"): 8192})
    oauth_required_scope: Optional[str] = None
    #: the user tests log in as by default, per mechanism
    default_user: str = "alice"
    wrong_password: str = WRONG_PASSWORD
    authorizer: bool = False

    def __post_init__(self) -> None:
        unknown = [n for n in self.listeners if n not in LISTENERS]
        if unknown:
            raise ValueError(f"unknown listeners {unknown}; known: {list(LISTENERS)}")
        self.listeners = tuple(self.listeners)

    # -- what ApacheKafka asks ------------------------------------------------------------------
    @property
    def protocols(self) -> Dict[str, str]:
        """``{listener name: security protocol}``, in listener order."""
        return {n: LISTENERS[n].protocol for n in self.listeners}

    def broker_properties(self) -> Dict[str, str]:
        """``server.properties`` keys for the extra listeners (not ``listeners``,
        ``advertised.listeners`` or ``listener.security.protocol.map``: the cluster writes those)."""
        props: Dict[str, str] = {}
        if self.authorizer:
            props["authorizer.class.name"] = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
            props["super.users"] = "User:ANONYMOUS"
            props["allow.everyone.if.no.acl.found"] = "true"
        for name in self.listeners:
            spec = LISTENERS[name]
            p = f"listener.name.{name.lower()}."
            if spec.cert:
                ck: CertKey = getattr(self.pki, spec.cert)
                props[p + "ssl.keystore.type"] = "PEM"
                props[p + "ssl.keystore.location"] = str(ck.bundle_path)
                props[p + "ssl.truststore.type"] = "PEM"
                props[p + "ssl.truststore.location"] = str(self.pki.ca_cert_path)
                props[p + "ssl.client.auth"] = "required" if spec.client_auth else "none"
            if spec.sasl:
                props[p + "sasl.enabled.mechanisms"] = ",".join(SASL_MECHANISMS)
                users = " ".join(f"user_{u}={_jaas_quote(pw)}" for u, pw in self.plain_users.items())
                props[p + "plain.sasl.jaas.config"] = f"{_PLAIN_MODULE} required {users};"
                for mech in SCRAM_MECHANISMS:
                    props[p + f"{mech.lower()}.sasl.jaas.config"] = f"{_SCRAM_MODULE} required;"
                oauth_opts = ['unsecuredLoginStringClaim_sub="broker"',
                              'unsecuredValidatorAllowableClockSkewMs="1000"']
                if self.oauth_required_scope:
                    oauth_opts.append(
                        f"unsecuredValidatorRequiredScope={_jaas_quote(self.oauth_required_scope)}")
                props[p + "oauthbearer.sasl.jaas.config"] = (
                    f"{_OAUTH_MODULE} required {' '.join(oauth_opts)};")
                props[p + "oauthbearer.sasl.server.callback.handler.class"] = _UNSECURED_VALIDATOR
                if spec.reauth:
                    props[p + "connections.max.reauth.ms"] = str(self.reauth_ms)
        return props

    def format_args(self) -> List[str]:
        """Extra ``kafka.tools.StorageTool format`` arguments: the SCRAM credentials."""
        if not any(LISTENERS[n].sasl for n in self.listeners):
            return []
        args: List[str] = []
        for mech, users in self.scram_users.items():
            for user, pw in users.items():
                for ch in ',[]="':
                    if ch in user or ch in pw:
                        raise ValueError(f"SCRAM user {user!r}: names and passwords may not hold {ch!r} here")
                iters = self.scram_iterations.get((mech, user))
                it = f",iterations={iters}" if iters else ""
                args += ["--add-scram", f"{mech}=[name={user}{it},password={pw}]"]
        return args

    # -- credentials ----------------------------------------------------------------------------
    def users(self, mechanism: str) -> Dict[str, str]:
        """``{name: password}`` of the users of a SASL mechanism (OAUTHBEARER: none, any
        unsecured token's ``sub`` is accepted)."""
        mechanism = mechanism.upper()
        if mechanism == "PLAIN":
            return dict(self.plain_users)
        if mechanism in SCRAM_MECHANISMS:
            return dict(self.scram_users.get(mechanism, {}))
        if mechanism == "OAUTHBEARER":
            return {}
        raise ValueError(f"unknown SASL mechanism {mechanism!r}")

    def credentials(self, mechanism: str, user: Optional[str] = None) -> Tuple[str, str]:
        """``(user, password)`` for ``mechanism`` (default user :attr:`default_user`)."""
        user = user or self.default_user
        users = self.users(mechanism)
        if user not in users:
            raise KeyError(f"no {mechanism} user {user!r} (have {sorted(users)})")
        return user, users[user]


# ---------------------------------------------------------------------------------------------
# confluent-kafka (librdkafka) client settings
# ---------------------------------------------------------------------------------------------


def librdkafka_config(cluster, listener: str, mechanism: Optional[str] = None, *,
                      user: Optional[str] = None, password: Optional[str] = None,
                      client_cert: Optional[bool] = None, verify_hostname: bool = True,
                      ca: Optional[Union[str, Path]] = None,
                      token_endpoint: Optional[TokenEndpoint] = None,
                      oauth_principal: Optional[str] = None, **extra) -> Dict[str, object]:
    """confluent-kafka settings to reach ``cluster`` (an :class:`ApacheKafka` with
    ``security``) on ``listener``.

    TLS listeners trust the test CA (or ``ca``, a PEM path) and verify the host name unless
    ``verify_hostname=False``; ``client_cert`` (default: True on ``MTLS``) adds the client
    certificate.  SASL listeners need ``mechanism``: PLAIN/SCRAM log in as ``user`` (default
    the security's default user) with its password (or ``password``); OAUTHBEARER fetches tokens
    from ``token_endpoint`` (``sasl.oauthbearer.method=oidc``) when given, else uses
    librdkafka's built-in unsecured JWT with principal ``oauth_principal`` (default "alice").
    ``extra`` settings are added last (they override): pass dotted names through a dict,
    ``librdkafka_config(c, "SSL", **{"client.id": "x"})``.
    """
    security: BrokerSecurity = cluster.security
    if security is None:
        raise ValueError("the cluster has no security (ApacheKafka(..., security=BrokerSecurity(...)))")
    if listener not in LISTENERS and listener != "PLAINTEXT":
        raise ValueError(f"unknown listener {listener!r}")
    spec = LISTENERS.get(listener)
    protocol = spec.protocol if spec else "PLAINTEXT"
    conf: Dict[str, object] = {"bootstrap.servers": cluster.bootstrap(listener),
                               "security.protocol": protocol.lower()}
    if protocol in ("SSL", "SASL_SSL"):
        conf["ssl.ca.location"] = str(ca or security.pki.ca_cert_path)
        conf["ssl.endpoint.identification.algorithm"] = "https" if verify_hostname else "none"
        if client_cert is None:
            client_cert = bool(spec and spec.client_auth)
        if client_cert:
            conf["ssl.certificate.location"] = str(security.pki.client.chain_path)
            conf["ssl.key.location"] = str(security.pki.client.key_path)
    if protocol.startswith("SASL"):
        if mechanism is None:
            raise ValueError(f"listener {listener} needs a SASL mechanism ({', '.join(SASL_MECHANISMS)})")
        mechanism = mechanism.upper()
        conf["sasl.mechanism"] = mechanism
        if mechanism == "OAUTHBEARER":
            if token_endpoint is not None:
                conf.update({"sasl.oauthbearer.method": "oidc",
                             "sasl.oauthbearer.client.id": token_endpoint.client_id,
                             "sasl.oauthbearer.client.secret": token_endpoint.client_secret,
                             "sasl.oauthbearer.token.endpoint.url": token_endpoint.url,
                             "sasl.oauthbearer.scope": token_endpoint.default_scope})
            else:
                conf["enable.sasl.oauthbearer.unsecure.jwt"] = True
                conf["sasl.oauthbearer.config"] = f"principal={oauth_principal or 'alice'} scope=kafka"
        else:
            name = user or security.default_user
            if password is None:
                password = security.credentials(mechanism, name)[1]
            conf["sasl.username"] = name
            conf["sasl.password"] = password
    elif mechanism is not None:
        raise ValueError(f"listener {listener} ({protocol}) has no SASL")
    conf.update(extra)
    return conf


# ---------------------------------------------------------------------------------------------
# Raw SASL probe: SaslHandshake v1 + one SaslAuthenticate v1 over a blocking socket (PLAIN or
# OAUTHBEARER, the single-round mechanisms), hand-encoded so that checking the fixture does not
# depend on the client code under test.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SaslProbeResult:
    """What the broker answered: ``handshake_error`` (SaslHandshake), ``mechanisms`` it
    offers, and from SaslAuthenticate (None when the handshake failed) ``error_code`` (0 ok,
    58 SASL_AUTHENTICATION_FAILED), ``error_message``, ``session_lifetime_ms`` (0: no
    re-authentication required) and ``challenge``."""

    handshake_error: int
    mechanisms: Tuple[str, ...]
    error_code: Optional[int] = None
    error_message: Optional[str] = None
    session_lifetime_ms: Optional[int] = None
    #: the server's first SaslAuthenticate bytes (OAUTHBEARER: the error JSON of a refused token)
    challenge: Optional[str] = None
    #: with ``hold_s``: whether the connection still answered after the hold
    alive_after_hold: Optional[bool] = None


def _kstr(s: Optional[str]) -> bytes:
    import struct

    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def sasl_probe(host: str, port: int, mechanism: str, *, user: Optional[str] = None,
               password: Optional[str] = None, token: Optional[str] = None,
               ssl_context: Optional[ssl.SSLContext] = None, server_hostname: Optional[str] = None,
               timeout: float = 5.0, hold_s: Optional[float] = None) -> SaslProbeResult:
    """Authenticate once with PLAIN (``user``/``password``) or OAUTHBEARER (``token``) and
    return the broker's answers.  ``ssl_context`` for SASL_SSL listeners.  With ``hold_s``,
    a successful authentication is followed, ``hold_s`` seconds later, by an ApiVersions
    request on the same connection: ``alive_after_hold`` says whether it was answered (a
    broker closes a connection whose session expired without re-authentication)."""
    import socket
    import struct

    from sparkkafka_sink.testing.brokers import _recv_exact as recv_exact

    mechanism = mechanism.upper()
    if mechanism == "PLAIN":
        auth = b"\0" + (user or "").encode() + b"\0" + (password or "").encode()
    elif mechanism == "OAUTHBEARER":
        auth = b"n,,\x01auth=Bearer " + (token or "").encode() + b"\x01\x01"
    else:
        raise ValueError(f"sasl_probe does PLAIN and OAUTHBEARER, not {mechanism}")

    def call(sock, api_key: int, version: int, cid: int, body: bytes) -> bytes:
        req = struct.pack(">hhi", api_key, version, cid) + _kstr("sparkkafka-sasl-probe") + body
        sock.sendall(struct.pack(">i", len(req)) + req)
        (size,) = struct.unpack(">i", recv_exact(sock, 4))
        payload = recv_exact(sock, size)
        (got,) = struct.unpack_from(">i", payload, 0)
        if got != cid:
            raise ConnectionError(f"correlation id mismatch: sent {cid}, got {got}")
        return payload[4:]

    raw = socket.create_connection((host, port), timeout=timeout)
    sock = raw
    try:
        if ssl_context is not None:
            sock = ssl_context.wrap_socket(raw, server_hostname=server_hostname or host)
        sock.settimeout(timeout)
        r = call(sock, 17, 1, 1, _kstr(mechanism))  # SaslHandshake v1
        (herr, n), off = struct.unpack_from(">hi", r, 0), 6
        mechs = []
        for _ in range(max(n, 0)):
            (ln,) = struct.unpack_from(">h", r, off)
            mechs.append(r[off + 2:off + 2 + ln].decode())
            off += 2 + ln
        if herr != 0:
            return SaslProbeResult(herr, tuple(mechs))
        def authenticate(cid: int, data: bytes):
            r = call(sock, 36, 1, cid, struct.pack(">i", len(data)) + data)  # SaslAuthenticate v1
            (err, mlen), off = struct.unpack_from(">hh", r, 0), 4
            msg = None
            if mlen >= 0:
                msg, off = r[off:off + mlen].decode("utf-8", "replace"), off + mlen
            (blen,) = struct.unpack_from(">i", r, off)
            server_bytes = r[off + 4:off + 4 + max(blen, 0)]
            off += 4 + max(blen, 0)
            (lifetime,) = struct.unpack_from(">q", r, off)
            return err, msg, server_bytes, lifetime

        try:
            err, msg, server_bytes, lifetime = authenticate(2, auth)
            challenge = server_bytes.decode("utf-8", "replace") or None
            if err == 0 and mechanism == "OAUTHBEARER" and server_bytes:
                # RFC 7628: a refused token comes back as an error challenge with error code 0;
                # the client answers %x01 and the server then fails the authentication
                err, msg, _, lifetime = authenticate(3, b"\x01")
        except ConnectionError as e:
            return SaslProbeResult(herr, tuple(mechs), error_code=-1, error_message=str(e))
        alive = None
        if hold_s is not None and err == 0:
            time.sleep(hold_s)
            try:
                call(sock, 18, 0, 4, b"")  # ApiVersions v0
                alive = True
            except (ConnectionError, OSError):
                alive = False
        return SaslProbeResult(herr, tuple(mechs), err, msg, lifetime, challenge, alive)
    finally:
        sock.close()


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m sparkkafka_sink.testing.security [--dir DIR]``: one secured Apache Kafka node
    in the foreground; prints its listeners, the PKI's files and the users."""
    import argparse
    import logging
    import signal
    import sys
    import tempfile

    from sparkkafka_sink.testing.apache_kafka import ApacheKafka

    p = argparse.ArgumentParser(prog="python -m sparkkafka_sink.testing.security",
                                description="Run one Apache Kafka node with TLS and SASL listeners.")
    p.add_argument("--dir", help="where the PKI is written (default: a new temporary directory)")
    p.add_argument("--reauth-ms", type=int, default=3000)
    args = p.parse_args(list(argv) if argv is not None else None)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    pki = TestPki(args.dir or tempfile.mkdtemp(prefix="sparkkafka-pki-"))
    security = BrokerSecurity(pki, reauth_ms=args.reauth_ms)
    with TokenEndpoint() as endpoint:
        cluster = ApacheKafka(1, security=security).start()
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        try:
            for name in cluster.listener_names:
                proto = LISTENERS[name].protocol if name in LISTENERS else "PLAINTEXT"
                print(f"{name:15} {proto:15} {cluster.bootstrap(name)}")
            print(f"# CA {pki.ca_cert_path}; client cert {pki.client.chain_path}, key "
                  f"{pki.client.key_path}; PKI in {pki.dir}", file=sys.stderr)
            for mech in SASL_MECHANISMS[:-1]:
                print(f"# {mech}: {security.users(mech)}", file=sys.stderr)
            print(f"# OAUTHBEARER: any unsecured JWT; token endpoint {endpoint.url} "
                  f"({endpoint.client_id} / {endpoint.client_secret}); Ctrl-C stops",
                  file=sys.stderr, flush=True)
            while not stop.wait(0.5):
                if not all(n.running for n in cluster.nodes):
                    print("# the node exited:\n" + cluster.nodes[0].log_tail(), file=sys.stderr)
                    return 1
        finally:
            cluster.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
