"""Which brokers this run tests against (shared by the root conftest and the fault tests), and
how a fixture runs an Apache Kafka cluster of its own (:func:`running_apache_kafka`).

Apache Kafka is the reference broker: from its Maven jars wherever ``java`` and ``mvn`` are on
PATH (every test that needs Kafka's own jars -- transactions, exactly-once, crashes, failover, the
oracle, the older brokers, the faults' ``apache`` cases -- runs then), else through testcontainers
when a Docker engine answers (those tests then skip, saying they need java and mvn).  tansu and
noida (PyPI) always run beside it.  ``KAFKA_BOOTSTRAP_SERVERS`` replaces all of them by one external broker;
``SPARKKAFKA_BROKERS=apache,tansu`` limits the kinds.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

import pytest

from sparkkafka_sink.testing.apache_kafka import ApacheKafka, java_and_maven_available
from sparkkafka_sink.testing.brokers import BROKER_KINDS


def _docker_answers() -> bool:
    """True when a Docker engine answers a ping within ~2 s (never raises)."""
    if os.environ.get("SPARKKAFKA_NO_DOCKER"):
        return False
    if not os.environ.get("DOCKER_HOST") and not os.path.exists("/var/run/docker.sock"):
        return False
    try:
        import docker

        client = docker.from_env(timeout=2)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # noqa: BLE001 - no Docker engine answers
        return False


def _apache_source() -> str | None:
    """Where Apache Kafka comes from here: "maven" (jars) wherever java and mvn are, else "docker"
    (testcontainers), else None."""
    if java_and_maven_available():
        return "maven"
    if _docker_answers():
        return "docker"
    return None


def _local_kinds() -> list[str]:
    kinds = (["apache"] if APACHE_SOURCE else []) + list(BROKER_KINDS)
    wanted = os.environ.get("SPARKKAFKA_BROKERS")
    if wanted:
        names = [k.strip() for k in wanted.split(",") if k.strip()]
        unknown = set(names) - {"apache", *BROKER_KINDS}
        if unknown:
            raise pytest.UsageError(f"SPARKKAFKA_BROKERS names unknown broker kinds {sorted(unknown)}")
        if "apache" in names and not APACHE_SOURCE:
            raise pytest.UsageError("SPARKKAFKA_BROKERS asks for apache, but neither Docker nor "
                                    "java+mvn is available here")
        kinds = [k for k in kinds if k in names]
    return kinds


#: "docker", "maven" or None (no Apache Kafka on this machine)
APACHE_SOURCE = _apache_source()
_LOCAL = _local_kinds()
#: the parametrization of the ``kafka`` fixture
KAFKA_KINDS = ["external"] if os.environ.get("KAFKA_BOOTSTRAP_SERVERS") else _LOCAL
#: brokers the fault tests start behind a FaultProxy: they need broker processes they control,
#: so an external broker does not replace them; their ``apache`` cases use the session's node
#: from Maven jars and skip, saying so, where only a container could run it
FAULT_KINDS = tuple(_LOCAL)


@contextlib.contextmanager
def running_apache_kafka(label: str = "", *, needs: str | None = None, **cluster) -> Iterator[ApacheKafka]:
    """``ApacheKafka(**cluster)`` from its Maven jars for a fixture: started, announced on stderr
    (what a slow session spent its time on; ``label`` tells the clusters apart), closed on exit.
    ``needs`` names it in the skip when the jars cannot run here (the ``kafka`` fixture may be
    a container then); None when the caller decided that already."""
    if needs is not None and APACHE_SOURCE != "maven":
        pytest.skip(f"{needs} needs java and mvn on PATH")
    if "apache" not in _LOCAL:
        pytest.skip(f"SPARKKAFKA_BROKERS={os.environ.get('SPARKKAFKA_BROKERS')} leaves Apache Kafka out")
    with ApacheKafka(**cluster) as kafka:
        count = len(kafka.nodes)
        listeners = f", listeners {', '.join(kafka.listener_names)}," if kafka.security is not None else ""
        print(f"\n[apache kafka {kafka.version}{label}: {count} node{'s' if count > 1 else ''}{listeners} "
              f"up in {kafka.startup_seconds:.1f} s]", file=sys.stderr)
        yield kafka
