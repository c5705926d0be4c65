"""What a secured Apache Kafka node is told: the extra listeners (``SSL``, ``MTLS``,
``BADHOST``, ``EXPIRED``, ``UNTRUSTED``, ``SASL_PLAINTEXT``, ``SASL_SSL``, ``REAUTH``) with their
``server.properties`` keys, the SASL users (PLAIN in the listener's JAAS config, SCRAM added when
KRaft storage is formatted) and the authorizer.  Every listener except PLAINTEXT/CONTROLLER
(inter-broker and controller traffic) is extra."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sparkkafka_sink.testing.brokers import HOST
from sparkkafka_sink.testing.security.pki import CertKey, TestPki

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
    cert: str | None = None
    client_auth: bool = False
    sasl: bool = False
    reauth: bool = False
    #: a listener of a test's own (``BrokerSecurity(custom=...)``): its SASL mechanisms and its
    #: ``listener.name.<name>.`` keys (JAAS and callback handlers), instead of the users' ones
    mechanisms: tuple[str, ...] = ()
    properties: tuple[tuple[str, str], ...] = ()
    #: the host it is advertised as (Kerberos: ``localhost``, the host in the service principal)
    host: str | None = None


#: every extra listener :class:`BrokerSecurity` can add, by name
LISTENERS: dict[str, Listener] = {l.name: l for l in [
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
    plain_users: dict[str, str] = field(default_factory=lambda: {
        "alice": "alice-secret", "carol": "carol-secret"})
    scram_users: dict[str, dict[str, str]] = field(default_factory=lambda: {
        "SCRAM-SHA-256": {"alice": "alice-secret"},
        "SCRAM-SHA-512": {"alice": "alice-secret", "bob": "bob-secret"}})
    scram_iterations: dict[tuple[str, str], int] = field(default_factory=lambda: {
        ("SCRAM-SHA-512", "bob"): 8192})
    oauth_required_scope: str | None = None
    #: listeners of the test's own beside those of :data:`LISTENERS` (their own mechanisms and keys)
    custom: Sequence[Listener] = ()
    #: the user tests log in as by default, per mechanism
    default_user: str = "alice"
    wrong_password: str = WRONG_PASSWORD
    authorizer: bool = False

    def __post_init__(self) -> None:
        unknown = [n for n in self.listeners if n not in LISTENERS]
        if unknown:
            raise ValueError(f"unknown listeners {unknown}; known: {list(LISTENERS)}")
        self.custom = tuple(self.custom)
        self.listeners = tuple(self.listeners) + tuple(c.name for c in self.custom)

    def advertised_host(self, name: str) -> str:
        return self._spec(name).host or HOST

    def _spec(self, name: str) -> Listener:
        return next((c for c in self.custom if c.name == name), None) or LISTENERS[name]

    # -- what ApacheKafka asks ------------------------------------------------------------------
    @property
    def protocols(self) -> dict[str, str]:
        """``{listener name: security protocol}``, in listener order."""
        return {n: self._spec(n).protocol for n in self.listeners}

    def broker_properties(self) -> dict[str, str]:
        """``server.properties`` keys for the extra listeners (not ``listeners``,
        ``advertised.listeners`` or ``listener.security.protocol.map``: the cluster writes those)."""
        props: dict[str, str] = {}
        if self.authorizer:
            props["authorizer.class.name"] = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
            props["super.users"] = "User:ANONYMOUS"
            props["allow.everyone.if.no.acl.found"] = "true"
        for name in self.listeners:
            spec = self._spec(name)
            p = f"listener.name.{name.lower()}."
            if spec.cert:
                ck: CertKey = getattr(self.pki, spec.cert)
                props[p + "ssl.keystore.type"] = "PEM"
                props[p + "ssl.keystore.location"] = str(ck.bundle_path)
                props[p + "ssl.truststore.type"] = "PEM"
                props[p + "ssl.truststore.location"] = str(self.pki.ca_cert_path)
                props[p + "ssl.client.auth"] = "required" if spec.client_auth else "none"
            if spec.mechanisms:
                props[p + "sasl.enabled.mechanisms"] = ",".join(spec.mechanisms)
                props.update({p + k: v for k, v in spec.properties})
            elif spec.sasl:
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

    def format_args(self) -> list[str]:
        """Extra ``kafka.tools.StorageTool format`` arguments: the SCRAM credentials."""
        if not any(self._spec(n).sasl and not self._spec(n).mechanisms for n in self.listeners):
            return []
        args: list[str] = []
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
    def users(self, mechanism: str) -> dict[str, str]:
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

    def credentials(self, mechanism: str, user: str | None = None) -> tuple[str, str]:
        """``(user, password)`` for ``mechanism`` (default user :attr:`default_user`)."""
        user = user or self.default_user
        users = self.users(mechanism)
        if user not in users:
            raise KeyError(f"no {mechanism} user {user!r} (have {sorted(users)})")
        return user, users[user]
