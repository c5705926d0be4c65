"""The Schema Registry fixture, a plugin of the root conftest so that the serialization tests
and the Spark tests share one registry.

* ``schema_registry`` (session): an Apicurio Registry
  (:class:`~sparkkafka_sink.testing.schema_registry.SchemaRegistry`, Confluent's API at
  ``schema_registry.url``, and over TLS at ``schema_registry.https_url`` with the ``pki``'s
  broker certificate: verify it with ``pki.ca_cert_path``), started the first time a test asks for it and stopped right after
  the last test of the run that uses it (``session_resources``); its log in the run's temporary
  directory.  Skipped, saying why, without java and mvn.  Storage is in memory and shared by
  the session: tests use subjects of their own (``registry_subject``).
* ``registry_subject`` (function): ``registry_subject(suffix="value") -> str``, a subject name
  no other test uses.
"""

from __future__ import annotations

import itertools
import re
import sys
import uuid
from collections.abc import Callable

import pytest
from session_resources import stop_after_last_use

from sparkkafka_sink.testing.schema_registry import SchemaRegistry, skip_unless_available


@pytest.fixture(scope="session")
def schema_registry(tmp_path_factory, pki):
    skip_unless_available()
    registry = SchemaRegistry(base_dir=tmp_path_factory.mktemp("schema-registry"),
                              tls=(pki.broker.chain_path, pki.broker.key_path)).start()
    print(f"\n[apicurio registry {registry.version}: {registry.url} and {registry.https_url} up in "
          f"{registry.startup_seconds:.1f} s]", file=sys.stderr)
    stop = stop_after_last_use("schema_registry", registry.stop,
                               "[apicurio registry stopped after the last test that uses it]")
    try:
        yield registry
    finally:
        stop()


@pytest.fixture
def registry_subject(request) -> Callable[..., str]:
    counter = itertools.count(1)

    def make(suffix: str = "value") -> str:
        stem = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name).strip("-")[-40:] or "t"
        return f"{stem}-{next(counter)}-{uuid.uuid4().hex[:6]}-{suffix}"

    return make
