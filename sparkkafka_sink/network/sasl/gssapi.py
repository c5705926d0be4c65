"""SASL GSSAPI (Kerberos V5, RFC 4752), as Kafka's brokers and Java's client speak it, over
MIT's (or Heimdal's) GSS-API library through python-gssapi (the ``[gssapi]`` extra).

The client initiates a security context with the broker's service principal
``<sasl.kerberos.service.name>@<the host dialled>`` and exchanges tokens until it is established;
the broker then offers its security layers (4 bytes, wrapped); the client answers, wrapped, that
it takes none (Kafka uses none) and names no authorization id, as Java's client does.

Credentials (:class:`KerberosLogin`), as Java's ``Krb5LoginModule`` options say: a keytab
(``useKeyTab``, ``keyTab``, ``principal``: MIT's library gets and renews the tickets from it, in a
memory cache of this process), or a ticket cache (``useTicketCache``, ``ticketCache``, else
``KRB5CCNAME`` or the default cache) someone keeps fresh with ``kinit``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sparkkafka_sink.errors import AuthenticationError, ConfigError, Message, Setting
from sparkkafka_sink.network.sasl.client import SaslClient
from sparkkafka_sink.network.sasl.jaas import JaasConfig
from sparkkafka_sink.network.sasl.reading import JAAS, MECHANISM, SERVICE_NAME, text

log = logging.getLogger(__name__)
#: Java's Krb5LoginModule options read here, and those that change nothing (MIT's library renews
#: keytab tickets itself; nothing prompts; its debug output is Java's)
KRB5_OPTIONS = ("useKeyTab", "keyTab", "principal", "useTicketCache", "ticketCache", "serviceName")
KRB5_NOTED = ("storeKey", "renewTGT", "doNotPrompt", "debug", "isInitiator", "refreshKrb5Config", "useFirstPass",
              "tryFirstPass", "storePass", "clearPass")

#: RFC 4752: the security layer "none"
_NO_SECURITY_LAYER = 1
EXTRA = ("pip install 'sparkkafka-sink[gssapi]' (python-gssapi builds against the Kerberos development "
         "files: Debian/Ubuntu libkrb5-dev, RHEL/Fedora krb5-devel, and a C compiler)")


def gssapi_module() -> Any:
    try:
        import gssapi
    except ImportError as e:
        raise ConfigError(Message("{} GSSAPI (Kerberos) needs python-gssapi: {} ({})", Setting("sasl.mechanism"),
                                  EXTRA, e)) from None
    return gssapi


def _reason(error: Exception) -> str:
    """What the GSS-API library says, in one line."""
    text = getattr(error, "gen_message", None)
    if callable(text):
        try:
            return " ".join(str(text()).split())
        except Exception:  # noqa: BLE001 - the plain str() below then
            pass
    return " ".join(str(error).split())


@dataclass(frozen=True)
class KerberosLogin:
    """Where the client's Kerberos credentials come from (Java's ``Krb5LoginModule`` options)."""

    keytab: str | None = None
    principal: str | None = None
    ticket_cache: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)
    _held: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def description(self) -> str:
        if self.keytab:
            return f"Kerberos principal {self.principal} (keytab {self.keytab})"
        who = f"Kerberos principal {self.principal}" if self.principal else "the Kerberos ticket"
        return f"{who} of the ticket cache {self.ticket_cache or '(default)'}"

    def credentials(self) -> Any:
        """Initiator credentials; an AuthenticationError naming Kerberos when there are none
        (an unknown principal, an expired ticket, an unreadable keytab)."""
        gssapi = gssapi_module()
        with self._lock:
            try:
                name = (gssapi.Name(self.principal, gssapi.NameType.kerberos_principal)
                        if self.principal else None)
                if self.keytab:
                    store = {"client_keytab": self.keytab, "ccache": f"MEMORY:sparkkafka-{id(self)}"}
                    creds = gssapi.Credentials(name=name, usage="initiate", store=store)
                elif self.ticket_cache:
                    creds = gssapi.Credentials(name=name, usage="initiate", store={"ccache": self.ticket_cache})
                else:
                    creds = gssapi.Credentials(name=name, usage="initiate")
                if creds.lifetime is not None and creds.lifetime <= 0:
                    raise AuthenticationError(f"Kerberos: the credentials of {self.description} have expired")
                return creds
            except AuthenticationError:
                raise
            except gssapi.exceptions.GSSError as e:
                raise AuthenticationError(f"Kerberos: no credentials for {self.description}: {_reason(e)}") from None


class GssapiClient(SaslClient):
    """One GSSAPI exchange with the broker whose service principal is ``service@host``."""

    mechanism = "GSSAPI"

    def __init__(self, service: str, host: str, login: KerberosLogin):
        gssapi = gssapi_module()
        self._gssapi = gssapi
        self.target = f"{service}@{host}"
        self.login = login
        self._context = gssapi.SecurityContext(name=gssapi.Name(self.target, gssapi.NameType.hostbased_service),
                                               usage="initiate", creds=login.credentials(),
                                               flags=[gssapi.RequirementFlag.mutual_authentication])
        self._layers_answered = False

    def _step(self, token: bytes | None) -> bytes:
        try:
            return self._context.step(token) or b""
        except self._gssapi.exceptions.GSSError as e:
            raise AuthenticationError(f"Kerberos: the security context with {self.target} failed: "
                                      f"{_reason(e)}") from None

    def first_message(self) -> bytes:
        return self._step(None)

    def evaluate(self, challenge: bytes) -> bytes | None:
        if self.complete:
            if challenge:
                raise AuthenticationError("GSSAPI: the broker sent more after the exchange was complete")
            return None
        if not self._context.complete:
            return self._step(challenge)
        # the broker's security-layer offer: 1 byte of layers, 3 of its largest message
        try:
            offer = self._context.unwrap(challenge).message
        except self._gssapi.exceptions.GSSError as e:
            raise AuthenticationError(f"Kerberos: the broker's security-layer offer did not unwrap: "
                                      f"{_reason(e)}") from None
        if len(offer) != 4 or not offer[0] & _NO_SECURITY_LAYER:
            raise AuthenticationError("GSSAPI: the broker offers no 'no security layer' option, which Kafka uses")
        self.complete = True
        return self._context.wrap(bytes([_NO_SECURITY_LAYER, 0, 0, 0]), False).message


def _flag_option(options: Mapping[str, str], name: str) -> bool:
    value = options.get(name, "false").strip().lower()
    if value not in ("true", "false"):
        raise ConfigError(Message("Invalid configuration {!r}: Krb5LoginModule option '{}' must be true or false",
                                  Setting(JAAS), name))
    return value == "true"


def kerberos_settings(config: Mapping[str, Any], jaas: JaasConfig | None) -> tuple[str, KerberosLogin]:
    """The brokers' service name and the client's login, as Java's ``Krb5LoginModule`` options
    and ``sasl.kerberos.service.name`` say."""
    gssapi_module()  # the extra is there, or the error names it
    options = dict(jaas.options) if jaas is not None else {}
    service = text(config, SERVICE_NAME) or options.get("serviceName")
    if not service:
        raise ConfigError(Message("{} GSSAPI needs {!r}: the brokers' Kerberos service name (their principals are "
                                  "<service>/<host>@REALM; usually kafka)", Setting(MECHANISM), Setting(SERVICE_NAME)))
    unknown = sorted(k for k in options if k not in KRB5_OPTIONS and k not in KRB5_NOTED)
    if unknown:
        log.warning("%s: ignoring unknown Krb5LoginModule options %s", JAAS, ", ".join(unknown))
    use_keytab, use_cache = _flag_option(options, "useKeyTab"), _flag_option(options, "useTicketCache")
    principal = options.get("principal") or None
    if use_keytab:
        keytab = options.get("keyTab")
        if not keytab or not principal:
            raise ConfigError(Message("Invalid configuration {!r}: Krb5LoginModule with useKeyTab=true needs keyTab "
                                      "and principal", Setting(JAAS)))
        return service, KerberosLogin(keytab=keytab, principal=principal)
    if jaas is not None and not use_cache:
        raise ConfigError(Message("Invalid configuration {!r}: Krb5LoginModule needs useKeyTab=true (with keyTab and "
                                  "principal) or useTicketCache=true; nothing here can prompt for a password",
                                  Setting(JAAS)))
    return service, KerberosLogin(principal=principal, ticket_cache=options.get("ticketCache") or None)
