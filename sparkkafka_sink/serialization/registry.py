"""SchemaRegistryClient: a small blocking client of the Confluent Schema Registry REST API.

The sink's driver registers (or looks up) a write's schemas before any data moves, so a wrong
schema or a refused credential fails the job with one clear message instead of every task.  Tested
with Apicurio Registry's Confluent-compatible API (``/apis/ccompat/v7``); Confluent's own registry,
Karapace and Redpanda speak the same API but are untested here.  Standard library only: ``urllib``
over a fresh ``ssl.SSLContext``.

Requests answered 408, 429 or 5xx, or not answered at all (refused, reset, timed out), are
retried on the same URL (``max.retries``, backoff from ``retries.wait.ms`` doubling up to
``retries.max.wait.ms``); then the next URL of ``url`` is tried.  Any other answer is final.
Every failure is one :class:`SchemaRegistryError` that says what happened and what to change.
Ids and registrations never change once made, so they are cached; nothing else is.
"""

from __future__ import annotations

import http.client
import json
import logging
import random
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from http.client import HTTPException
from typing import IO, Any, Literal

from sparkkafka_sink.errors import AuthenticationError, KafkaError, Message, Setting
from sparkkafka_sink.serialization.registry_settings import (
    Endpoint,
    RegistrySettings,
    listed_settings,
    strip_credentials,
)
from sparkkafka_sink.version import __version__

__all__ = ["SchemaRegistryClient", "SchemaRegistryError", "RegisteredSchema", "SchemaReference",
           "SchemaType", "CompatibilityLevel", "SCHEMA_TYPES", "COMPATIBILITY_LEVELS"]

log = logging.getLogger(__name__)

SchemaType = Literal["AVRO", "JSON", "PROTOBUF"]
SCHEMA_TYPES: tuple[SchemaType, ...] = ("AVRO", "JSON", "PROTOBUF")
CompatibilityLevel = Literal["NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE",
                             "FULL", "FULL_TRANSITIVE"]
COMPATIBILITY_LEVELS: tuple[CompatibilityLevel, ...] = (
    "NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")

#: the registry's own error codes (Confluent's API; Apicurio's ccompat API answers the same)
SUBJECT_NOT_FOUND = 40401
VERSION_NOT_FOUND = 40402
SCHEMA_NOT_FOUND = 40403
SUBJECT_SOFT_DELETED = 40404
SCHEMA_VERSION_SOFT_DELETED = 40406
INVALID_SCHEMA = 42201
INVALID_VERSION = 42202

#: answers worth asking again (as Confluent's clients: timeout, rate limit, server trouble)
RETRIABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
_ACCEPT = "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, application/json"
_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_MAX_SHOWN = 400

#: how a schema may change under each compatibility level (409's advice)
_EVOLUTION = {
    "BACKWARD": "readers using the new schema must read data written with the previous one: add fields "
                "only with a default, remove fields freely, do not change a field's type",
    "FORWARD": "readers using the previous schema must read data written with the new one: remove only "
               "fields that have a default, add fields freely, do not change a field's type",
    "FULL": "readers of either schema must read data of the other: add or remove only fields that have a "
            "default, do not change a field's type",
}


# -- what the registry holds ---------------------------------------------------------------
@dataclass(frozen=True)
class SchemaReference:
    """A schema another one refers to by ``name`` (Avro: the referenced type's full name)."""

    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class RegisteredSchema:
    """One version of a subject: the schema, its global id and its version under the subject."""

    schema_id: int
    subject: str
    version: int
    schema_text: str
    schema_type: SchemaType = "AVRO"
    references: tuple[SchemaReference, ...] = ()


class SchemaRegistryError(KafkaError):
    """The registry refused a request, or no registry answered.

    ``status`` is the HTTP status (None when nothing answered), ``error_code`` the registry's own
    code (40401 unknown subject, 40402 unknown version, 40403 unknown schema, 409 incompatible,
    42201 invalid schema, ...), ``registry_message`` its words and ``url`` the request's URL
    without credentials.  The text says what to change.  ``retriable``: the same request may
    succeed later (the registry was unreachable, slow or failing).
    """

    def __init__(self, message: str, *, status: int | None = None, error_code: int | None = None,
                 registry_message: str | None = None, url: str | None = None, retriable: bool = False):
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.registry_message = registry_message
        self.url = url
        self.retriable = retriable


# -- one request's outcome -----------------------------------------------------------------
@dataclass(frozen=True)
class _Answer:
    status: int
    body: bytes
    method: str
    url: str
    location: str | None = None


class _NoAnswer(Exception):
    """No HTTP answer: ``kind`` is "unreachable" (refused, reset, DNS), "timeout" or "tls"."""

    def __init__(self, kind: Literal["unreachable", "timeout", "tls"], detail: str):
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


@dataclass(frozen=True)
class _Operation:
    """What a request is for, to explain its failure in the caller's terms."""

    action: str                       # "register a schema under subject 'x'"
    kind: Literal["register", "lookup", "version", "by_id", "compatibility", "config"]
    subject: str | None = None
    version: int | str | None = None
    schema_id: int | None = None
    schema_type: str | None = None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """urllib would follow a redirect with our Authorization header, to any host: refuse."""

    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
                         headers: http.client.HTTPMessage, newurl: str) -> urllib.request.Request | None:
        return None



class SchemaRegistryClient:
    """A blocking client of the Confluent Schema Registry API, configured with
    confluent-kafka-python's ``SchemaRegistryClient`` keys (see ``registry_settings.REGISTRY_KEYS``):
    ``SchemaRegistryClient({"url": "https://registry:8081", "basic.auth.user.info": "u:p"})``.

    Thread-safe; there is nothing to close (each request opens its own connection).
    """

    def __init__(self, config: Mapping[str, Any]):
        self._settings = RegistrySettings(config)
        handlers: list[Any] = [_NoRedirect]
        if self._settings.ssl_context is not None:
            handlers.append(urllib.request.HTTPSHandler(context=self._settings.ssl_context))
        self._opener = urllib.request.build_opener(*handlers)
        self._lock = threading.Lock()
        self._ids: dict[tuple, int] = {}
        self._schemas: dict[int, tuple[str, SchemaType]] = {}

    @property
    def urls(self) -> tuple[str, ...]:
        """The registry URLs, in the order they are tried (without credentials)."""
        return tuple(e.url for e in self._settings.endpoints)

    def __repr__(self) -> str:
        return f"SchemaRegistryClient(url={', '.join(self.urls)!r}, auth={self._settings.auth_description!r})"

    # -- operations ---------------------------------------------------------------------------
    def register(self, subject: str, schema_text: str, schema_type: SchemaType = "AVRO",
                 references: Iterable[SchemaReference] = (), normalize: bool = False) -> int:
        """Register ``schema_text`` under ``subject`` (a no-op when it is already there) and
        return its global id: the id the wire format's 5-byte header carries."""
        refs = tuple(references)
        key = (subject, schema_text, schema_type, refs, normalize)
        with self._lock:
            if key in self._ids:
                return self._ids[key]
        op = _Operation(f"register the {schema_type} schema under subject {subject!r}", "register",
                        subject=subject, schema_type=schema_type)
        try:
            doc = self._send("POST", f"/subjects/{_quote(subject)}/versions", op,
                             _schema_body(schema_text, schema_type, refs), {"normalize": "true"} if normalize else None)
            schema_id = _field(doc, "id", int, op)
        except SchemaRegistryError as refused:
            # Several writers registering one new subject at once (the tasks of a write, say): a
            # registry may refuse all but the first with 409 (Apicurio: "artifact already
            # exists").  If the schema is there now, that is the answer; else the 409 stands.
            if refused.status != 409:
                raise
            try:
                schema_id = self.lookup(subject, schema_text, schema_type, refs, normalize).schema_id
            except SchemaRegistryError:
                raise refused from None
        with self._lock:
            self._ids[key] = schema_id
        return schema_id

    def lookup(self, subject: str, schema_text: str, schema_type: SchemaType = "AVRO",
               references: Iterable[SchemaReference] = (), normalize: bool = False) -> RegisteredSchema:
        """The version of ``subject`` that holds ``schema_text`` (without registering it)."""
        op = _Operation(f"find the {schema_type} schema under subject {subject!r}", "lookup",
                        subject=subject, schema_type=schema_type)
        doc = self._send("POST", f"/subjects/{_quote(subject)}", op,
                         _schema_body(schema_text, schema_type, tuple(references)),
                         {"normalize": "true"} if normalize else None)
        return _registered(doc, op, subject, schema_type)

    def latest_version(self, subject: str) -> RegisteredSchema:
        """The newest version registered under ``subject``."""
        op = _Operation(f"read the latest version of subject {subject!r}", "version", subject=subject,
                        version="latest")
        return _registered(self._send("GET", f"/subjects/{_quote(subject)}/versions/latest", op), op, subject)

    def version(self, subject: str, version: int) -> RegisteredSchema:
        """Version ``version`` (1, 2, ...) of ``subject``."""
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise ValueError(f"version must be a whole number >= 1, got {version!r} (latest_version() reads "
                             "the newest)")
        op = _Operation(f"read version {version} of subject {subject!r}", "version", subject=subject,
                        version=version)
        return _registered(self._send("GET", f"/subjects/{_quote(subject)}/versions/{version}", op), op, subject)

    def schema_by_id(self, schema_id: int) -> tuple[str, SchemaType]:
        """The schema text and type the global id ``schema_id`` names."""
        with self._lock:
            if schema_id in self._schemas:
                return self._schemas[schema_id]
        op = _Operation(f"read the schema with id {schema_id}", "by_id", schema_id=schema_id)
        doc = self._send("GET", f"/schemas/ids/{int(schema_id)}", op)
        found = (_field(doc, "schema", str, op), _schema_type(doc.get("schemaType"), op))
        with self._lock:
            self._schemas[schema_id] = found
        return found

    def is_compatible(self, subject: str, schema_text: str, schema_type: SchemaType = "AVRO",
                      references: Iterable[SchemaReference] = (),
                      version: int | Literal["latest"] = "latest") -> bool:
        """Whether ``schema_text`` may be registered under ``subject`` by its compatibility level
        (checked against ``version``).  True while the subject has no version yet."""
        op = _Operation(f"check the {schema_type} schema's compatibility with subject {subject!r}",
                        "compatibility", subject=subject, version=version, schema_type=schema_type)
        try:
            doc = self._send("POST", f"/compatibility/subjects/{_quote(subject)}/versions/{version}", op,
                             _schema_body(schema_text, schema_type, tuple(references)))
        except SchemaRegistryError as e:
            if version == "latest" and e.error_code in (SUBJECT_NOT_FOUND, VERSION_NOT_FOUND):
                return True                                   # nothing to be incompatible with
            raise
        return _field(doc, "is_compatible", bool, op)

    def compatibility(self, subject: str | None = None) -> CompatibilityLevel:
        """The compatibility level ``subject`` is checked with (its own, else the registry's),
        or the registry's default when ``subject`` is None."""
        path = f"/config/{_quote(subject)}" if subject is not None else "/config"
        op = _Operation("read the compatibility level" + (f" of subject {subject!r}" if subject else ""),
                        "config", subject=subject)
        doc = self._send("GET", path, op, query={"defaultToGlobal": "true"} if subject is not None else None)
        level = doc.get("compatibilityLevel", doc.get("compatibility")) if isinstance(doc, dict) else None
        if level not in COMPATIBILITY_LEVELS:
            raise self._malformed(op, f"compatibility level {level!r}")
        return level

    def set_compatibility(self, subject: str | None, level: CompatibilityLevel) -> None:
        """Set ``subject``'s compatibility level (the registry's default when ``subject`` is None)."""
        if level not in COMPATIBILITY_LEVELS:
            raise ValueError(f"level must be one of {', '.join(COMPATIBILITY_LEVELS)}, got {level!r}")
        path = f"/config/{_quote(subject)}" if subject is not None else "/config"
        op = _Operation(f"set the compatibility level {level}" + (f" of subject {subject!r}" if subject else ""),
                        "config", subject=subject)
        self._send("PUT", path, op, json.dumps({"compatibility": level}).encode())

    # -- requests ---------------------------------------------------------------------------
    def _send(self, method: str, path: str, op: _Operation, body: bytes | None = None,
              query: Mapping[str, str] | None = None) -> Any:
        """Ask each URL in turn; the decoded JSON of the first success, else the error."""
        suffix = path + (f"?{urllib.parse.urlencode(query)}" if query else "")
        tried: list[str] = []
        answer: _Answer | None = None
        failures: list[tuple[str, _NoAnswer]] = []
        endpoints = self._settings.endpoints
        for i, endpoint in enumerate(endpoints):
            outcome = self._ask(endpoint, method, endpoint.url + suffix, body, op)
            if isinstance(outcome, _NoAnswer):
                failures.append((endpoint.url, outcome))
                tried.append(Message("{}: {}", endpoint.url, outcome.detail))
                continue
            if outcome.status < 300:
                if not outcome.body.strip():
                    return None
                doc = _json_or_none(outcome.body)
                if doc is None:
                    raise self._malformed(op, f"no JSON ({outcome.method} {outcome.url})")
                return doc
            answer = outcome
            if outcome.status not in RETRIABLE_STATUSES or i == len(endpoints) - 1:
                break
            tried.append(f"{endpoint.url}: HTTP {outcome.status}")
        if answer is not None:
            raise self._refused(answer, op, tried)
        raise self._unreachable(failures, op)

    def _ask(self, endpoint: Endpoint, method: str, url: str, body: bytes | None,
             op: _Operation) -> _Answer | _NoAnswer:
        """One URL, retried while the outcome is worth retrying."""
        settings = self._settings
        outcome: _Answer | _NoAnswer | None = None
        fresh_token = False
        attempt = 0
        while True:
            headers = self._headers(endpoint, body is not None, op)
            try:
                outcome = self._attempt(method, url, body, headers)
            except _NoAnswer as e:
                outcome = e
            if isinstance(outcome, _Answer) and outcome.status == 401 and settings.auth_kind == "oauthbearer" \
                    and not fresh_token:
                settings.forget_token()                       # revoked or expired early: one new token
                fresh_token = True
                continue
            retry = (outcome.kind != "tls" if isinstance(outcome, _NoAnswer)
                     else outcome.status in RETRIABLE_STATUSES)
            if not retry or attempt >= settings.max_retries:
                return outcome
            wait_ms = _backoff_ms(attempt, settings.retries_wait_ms, settings.retries_max_wait_ms)
            what = outcome.detail if isinstance(outcome, _NoAnswer) else f"HTTP {outcome.status}"
            log.warning("Schema Registry %s %s: %s; retry %d of %d in %d ms", method, url, what, attempt + 1,
                        settings.max_retries, wait_ms)
            time.sleep(wait_ms / 1000)
            attempt += 1

    def _headers(self, endpoint: Endpoint, has_body: bool, op: _Operation) -> dict[str, str]:
        headers = {"Accept": _ACCEPT, "User-Agent": f"sparkkafka-sink/{__version__}",
                   **self._settings.extra_headers}
        if has_body:
            headers["Content-Type"] = _CONTENT_TYPE
        try:
            authorization = self._settings.authorization(endpoint)
        except AuthenticationError as e:
            # the token provider's text, scrubbed of our secrets: it names no registry setting
            raise SchemaRegistryError(Message(
                "Schema Registry: could not {}: no bearer token: {}. Check {}", op.action,
                self._settings.scrub(str(e)),
                listed_settings(("bearer.auth.issuer.endpoint.url", "bearer.auth.client.id",
                                 "bearer.auth.client.secret"), last=" and ")), retriable=e.retriable) from None
        if authorization:
            headers["Authorization"] = authorization
        return headers

    def _attempt(self, method: str, url: str, body: bytes | None, headers: Mapping[str, str]) -> _Answer:
        request = urllib.request.Request(url, data=body, method=method, headers=dict(headers))
        timeout_ms = round(self._settings.timeout_s * 1000)
        try:
            with self._opener.open(request, timeout=self._settings.timeout_s) as response:
                return _Answer(response.status, response.read(), method, url)
        except urllib.error.HTTPError as e:
            try:
                data = e.read()
            except (OSError, HTTPException):
                data = b""
            finally:
                e.close()
            location = e.headers.get("Location") if e.headers else None
            return _Answer(e.code, data, method, url, strip_credentials(location) if location else None)
        except urllib.error.URLError as e:
            raise _no_answer(e.reason, timeout_ms) from None
        except (OSError, HTTPException) as e:              # after connecting: timeouts, resets
            raise _no_answer(e, timeout_ms) from None

    # -- errors ---------------------------------------------------------------------------
    def _refused(self, answer: _Answer, op: _Operation, tried: list[str]) -> SchemaRegistryError:
        doc = _json_or_none(answer.body)
        code = doc.get("error_code") if isinstance(doc, dict) else None
        code = code if isinstance(code, int) and not isinstance(code, bool) else None
        said = doc.get("message") if isinstance(doc, dict) else None
        if not isinstance(said, str):
            said = answer.body.decode("utf-8", "replace").strip() or None
        said = self._settings.scrub(said[:_MAX_SHOWN]) if said else None
        problem, fix = self._explain(answer, code, op)
        parts: list[Any]
        facts, parts = "HTTP {}", [answer.status]          # one message: its template and parts, piece by piece
        if code is not None:
            facts, parts = facts + ", error_code {}", [*parts, code]
        if said:
            facts, parts = facts + ", registry: {!r}", [*parts, said]
        facts, parts = facts + "; {} {}", [*parts, answer.method, answer.url]
        if tried:
            facts, parts = facts + "; before that: {}", [*parts, _joined("; ", tried)]
        return SchemaRegistryError(Message("Schema Registry: could not {}: {}. {} [" + facts + "]", op.action,
                                           problem, fix, *parts),
                                   status=answer.status, error_code=code, registry_message=said, url=answer.url,
                                   retriable=answer.status in RETRIABLE_STATUSES)

    def _explain(self, answer: _Answer, code: int | None, op: _Operation) -> tuple[str, str]:
        """(what happened, what to change) for a final answer; a Message where it names a
        registry setting (the sink renders those as its options)."""
        status, settings, subject = answer.status, self._settings, op.subject
        if 300 <= status < 400:
            return (f"the registry redirects to {answer.location or '?'}",
                    Message("Set {} to the final address: requests (and credentials) are not sent to a redirect.",
                            _URL))
        if status == 401:
            return (Message("the registry refused our credentials ({})", settings.auth_description),
                    Message("Check {}.", settings.auth_settings))
        if status == 403 and settings.auth_kind == "none":
            return ("the registry refuses requests without credentials",
                    Message("Set {} (user:password) or {}.", Setting("basic.auth.user.info"),
                            Setting("bearer.auth.credentials.source")))
        if status == 403:
            return (Message("the registry accepted our credentials ({}) but does not allow this",
                            settings.auth_description),
                    Message("Grant that principal access to the subject (Confluent: a role binding such as "
                            "DeveloperWrite on Subject:{}; or the registry's ACLs), or use one that has it; on "
                            "Confluent Cloud check {} and {}.", subject or "*", Setting("bearer.auth.logical.cluster"),
                            Setting("bearer.auth.identity.pool.id")))
        if code == SUBJECT_NOT_FOUND:
            return (f"subject {subject!r} does not exist",
                    "Register the schema first (or enable auto-registration: auto.register.schemas=true), or "
                    "check the subject name and its strategy (TopicNameStrategy: <topic>-key / <topic>-value).")
        if code == VERSION_NOT_FOUND:
            return (f"subject {subject!r} has no version {op.version}",
                    f"List its versions (GET /subjects/{subject}/versions) and use one of them, or the latest.")
        if code == SCHEMA_NOT_FOUND and op.kind == "lookup":
            return (f"this schema is not registered under subject {subject!r}",
                    "Register it (or enable auto-registration: auto.register.schemas=true), or use the schema "
                    "the subject holds (its latest version).")
        if code == SCHEMA_NOT_FOUND:
            return (f"the registry has no schema with id {op.schema_id}",
                    Message("The id comes from another registry or its schema was deleted: check {}.", _URL))
        if code in (SUBJECT_SOFT_DELETED, SCHEMA_VERSION_SOFT_DELETED):
            return (f"subject {subject!r} (or this version) was deleted",
                    "Register the schema again, or undelete it in the registry.")
        if status == 409:
            level = self._level_of(subject)
            advice = _EVOLUTION.get((level or "").replace("_TRANSITIVE", ""))
            if advice and level and level.endswith("_TRANSITIVE"):
                advice += "; checked against every earlier version"
            checked = f" (compatibility {level})" if level else ""
            return (f"the schema is incompatible with the versions under subject {subject!r}{checked}",
                    (f"Evolve it compatibly ({advice})" if advice else "Evolve it compatibly")
                    + ", write to a new subject, or change the subject's level (PUT /config/<subject>) if "
                    "every reader can follow.")
        if code == INVALID_SCHEMA or (status == 422 and code in (None, 422)
                             and op.kind in ("register", "lookup", "compatibility")):
            return (f"the registry rejects the {op.schema_type} schema as invalid",
                    f"Fix the schema text; is it really {op.schema_type} (schema_type)?")
        if code == INVALID_VERSION:
            return (f"{op.version!r} is not a valid version", "Use a version number >= 1 or 'latest'.")
        if status == 422:
            return "the registry rejects the request as invalid", "Check the values sent."
        if status == 429:
            return ("the registry keeps refusing requests as too many (rate limited)",
                    Message("Raise {} or {}, or ask less often.", Setting("max.retries"),
                            Setting("retries.max.wait.ms")))
        if status >= 500 or status == 408:
            return ("the registry failed to answer the request",
                    f"It failed {settings.max_retries + 1} time(s) per URL: try again later; the registry's own "
                    "log says why.")
        return f"the registry answered HTTP {status}", Message("Check {}: {}", _URL, _IS_IT_THE_API)

    def _level_of(self, subject: str | None) -> str | None:
        """The subject's compatibility level for a 409's message; None when that fails too."""
        try:
            return self.compatibility(subject)
        except SchemaRegistryError:
            return None

    def _unreachable(self, failures: list[tuple[str, _NoAnswer]], op: _Operation) -> SchemaRegistryError:
        kinds = {f.kind for _, f in failures}
        attempts = self._settings.max_retries + 1
        each = _joined("; ", [Message("{}: {}", url, f.detail) for url, f in failures])
        problem: str
        if kinds == {"tls"}:
            problem = "the TLS handshake failed"
            fix = Message("Set {} to the CA that signed the registry's certificate (and check the host name in {} "
                          "matches it); with mutual TLS set {} and {}.", Setting("ssl.ca.location"), _URL,
                          Setting("ssl.certificate.location"), Setting("ssl.key.location"))
        elif kinds == {"timeout"}:
            problem = Message("no registry answered within {}={}", Setting("timeout.ms"),
                              round(self._settings.timeout_s * 1000))
            fix = Message("Check the registry's health and load, or raise {}.", Setting("timeout.ms"))
        else:
            problem = "no registry could be reached"
            fix = Message("Check {} (host, port, http or https) and that the registry runs and is reachable from "
                          "here (firewalls, proxies).", _URL)
        return SchemaRegistryError(Message(
            "Schema Registry: could not {}: {}. {} [tried {} URL(s), up to {} attempt(s) each: {}]", op.action,
            problem, fix, len(failures), attempts, each),
            url=failures[-1][0] if failures else None, retriable=kinds != {"tls"})

    def _malformed(self, op: _Operation, what: str) -> SchemaRegistryError:
        return SchemaRegistryError(Message("Schema Registry: could not {}: the answer holds {}, not what the "
                                           "Schema Registry API defines. Check {}: {}", op.action, what, _URL,
                                           _IS_IT_THE_API))


# -- helpers ----------------------------------------------------------------------------------
#: the registry setting most messages send the reader to
_URL = Setting("url")
_IS_IT_THE_API = "is it a Schema Registry's API (Apicurio: .../apis/ccompat/v7)?"


def _joined(separator: str, items: list[Any]) -> Message:
    """``items`` joined by ``separator``, as one message (the settings items name stay data)."""
    return Message(separator.join(["{}"] * len(items)), *items)


def _quote(subject: str) -> str:
    if not isinstance(subject, str) or not subject:
        raise ValueError(f"a subject must be a non-empty str, got {subject!r}")
    return urllib.parse.quote(subject, safe="")


def _schema_body(schema_text: str, schema_type: str, references: tuple[SchemaReference, ...]) -> bytes:
    if not isinstance(schema_text, str) or not schema_text.strip():
        raise ValueError("schema_text must be the schema's non-empty text")
    if schema_type not in SCHEMA_TYPES:
        raise ValueError(f"schema_type must be one of {', '.join(SCHEMA_TYPES)}, got {schema_type!r}")
    body: dict[str, Any] = {"schema": schema_text}
    if schema_type != "AVRO":                           # Confluent's registry: absent means AVRO
        body["schemaType"] = schema_type
    if references:
        body["references"] = [r.to_json() for r in references]
    return json.dumps(body).encode("utf-8")


def _backoff_ms(attempt: int, wait_ms: int, max_wait_ms: int) -> int:
    """Exponential backoff with Kafka's +-20% jitter, never above ``max_wait_ms``."""
    term = min(wait_ms * 2 ** attempt, max_wait_ms)
    return int(min(term * random.uniform(0.8, 1.2), max_wait_ms))


def _no_answer(reason: object, timeout_ms: int) -> _NoAnswer:
    if isinstance(reason, ssl.SSLCertVerificationError):
        return _NoAnswer("tls", f"the registry's certificate did not verify ({reason.verify_message})")
    if isinstance(reason, ssl.SSLError):
        text = str(reason.reason or reason)
        if "WRONG_VERSION_NUMBER" in text or "RECORD_LAYER_FAILURE" in text:
            return _NoAnswer("tls", f"TLS failed ({text}): is it an http:// registry?")
        return _NoAnswer("tls", f"TLS failed ({text})")
    if isinstance(reason, TimeoutError):
        return _NoAnswer("timeout", Message("no answer within {} ms ({})", timeout_ms, Setting("timeout.ms")))
    if isinstance(reason, (OSError, HTTPException)):
        return _NoAnswer("unreachable", f"{type(reason).__name__}: {reason}")
    return _NoAnswer("unreachable", str(reason))


def _json(body: bytes) -> Any:
    return json.loads(body.decode("utf-8"))


def _json_or_none(body: bytes) -> Any:
    try:
        return _json(body)
    except (ValueError, UnicodeDecodeError):
        return None


def _field(doc: Any, name: str, kind: type, op: _Operation) -> Any:
    value = doc.get(name) if isinstance(doc, dict) else None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise SchemaRegistryError(Message("Schema Registry: could not {}: the answer has no {!r} ({}). Check {}: {}",
                                          op.action, name, type(value).__name__, _URL, _IS_IT_THE_API))
    return value


def _schema_type(value: Any, op: _Operation, default: SchemaType = "AVRO") -> SchemaType:
    if value is None:
        return default
    if value not in SCHEMA_TYPES:
        raise SchemaRegistryError(f"Schema Registry: could not {op.action}: unknown schemaType {value!r}")
    return value


def _registered(doc: Any, op: _Operation, subject: str, asked_type: SchemaType = "AVRO") -> RegisteredSchema:
    refs = doc.get("references") if isinstance(doc, dict) else None
    references = tuple(SchemaReference(str(r.get("name")), str(r.get("subject")), int(r.get("version") or 0))
                       for r in (refs or ()) if isinstance(r, dict))
    return RegisteredSchema(
        schema_id=_field(doc, "id", int, op),
        subject=doc.get("subject") if isinstance(doc.get("subject"), str) else subject,
        version=_field(doc, "version", int, op),
        schema_text=_field(doc, "schema", str, op),
        # a lookup's answer may leave the type out (Apicurio does for JSON): it is the one asked with
        schema_type=_schema_type(doc.get("schemaType"), op, asked_type),
        references=references)
