"""BlockingAdmin: short blocking requests to a cluster, with the producer's configuration.

The producer's Sender is asynchronous; the Spark driver needs a few one-off questions answered
before or after the tasks run -- does the cluster answer, may we write to this topic, end this
transaction -- each within a deadline.  A ``NetworkClient`` of its own (security included),
polled by the calling thread until the answer arrives.
"""

from __future__ import annotations

import time
from typing import Any, Iterable, Mapping

from sparkkafka_sink.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from sparkkafka_sink.network.client import NetworkClient, now_ms
from sparkkafka_sink.network.metadata import Metadata, write_refused
from sparkkafka_sink.network.sasl import sasl_settings
from sparkkafka_sink.network.ssl_context import build_ssl_context
from sparkkafka_sink.producer.config import ProducerConfig
from sparkkafka_sink.protocol import messages
from sparkkafka_sink.protocol.errors import error_for_code

#: errors worth asking again for within the deadline (besides every retriable one)
_RETRY_NAMES = ("NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS",
                "CONCURRENT_TRANSACTIONS", "REQUEST_TIMED_OUT", "NETWORK_EXCEPTION")


class TopicCheckError(KafkaError):
    """A topic the write needs cannot be written: missing, or not authorized."""


class BlockingAdmin:
    """One-off requests to the cluster of ``config`` (a producer configuration)."""

    def __init__(self, config: Mapping[str, Any], role: str = "admin"):
        c = ProducerConfig({k: v for k, v in dict(config).items() if k != "transactional.id"})
        self.config = c
        self.retry_backoff_s = c["retry.backoff.ms"] / 1000
        self._sasl = sasl_settings(c)
        if self._sasl is not None:
            self._sasl.prepare()
        self.metadata = Metadata(c["bootstrap.servers"], max_age_ms=c["metadata.max.age.ms"],
                                 refresh_backoff_ms=c["retry.backoff.ms"], max_idle_ms=c["metadata.max.idle.ms"])
        self.client = NetworkClient(
            self.metadata, client_id=f"{c['client.id']}-{role}", request_timeout_ms=c["request.timeout.ms"],
            max_in_flight=5, reconnect_backoff_ms=c["reconnect.backoff.ms"],
            reconnect_backoff_max_ms=c["reconnect.backoff.max.ms"],
            connection_setup_timeout_ms=c["socket.connection.setup.timeout.ms"],
            connection_setup_timeout_max_ms=c["socket.connection.setup.timeout.max.ms"],
            allow_auto_topic_creation=False, ssl_context=build_ssl_context(c), sasl=self._sasl)

    def close(self) -> None:
        self.client.close()
        if self._sasl is not None:
            self._sasl.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- one request ---------------------------------------------------------------------------
    def call(self, node: int | None, request: Any, deadline: float, max_version: int | None = None) -> Any:
        """Send ``request`` to ``node`` (None: any broker) and wait for its answer.

        A named node (a coordinator) that cannot be reached, or whose connection drops before
        the answer, raises ``KafkaConnectionError``: the caller asks who coordinates now."""
        answer: list = []
        sent = False
        while True:
            now = now_ms()
            if self.client.fatal_error is not None:
                raise type(self.client.fatal_error)(str(self.client.fatal_error))
            if time.monotonic() > deadline:
                last = self.metadata.last_error
                raise KafkaTimeoutError(f"{type(request).__name__} got no answer in time"
                                        + (f"; last error: {last}" if last else ""))
            if not sent:
                target = node if node is not None else self.client.least_loaded_node(now)
                if target is not None and self.client.ready(target, now):
                    self.client.send(target, request, answer.append, now, max_version=max_version)
                    sent = True
                elif node is not None and self.client.connection_failures(node):
                    raise KafkaConnectionError(f"{type(request).__name__}: node {node} cannot be reached")
            self.client.poll(50, now)
            if answer:
                resp = answer[0]
                if resp.response is None:
                    if node is not None:
                        raise KafkaConnectionError(f"{type(request).__name__}: connection to node {node} lost "
                                                   f"before the answer ({resp.error})")
                    answer.clear()
                    sent = False  # the connection went: ask again
                    time.sleep(self.retry_backoff_s)
                    continue
                return resp.response

    def brokers(self, deadline: float, fresh: bool = False) -> list[int]:
        """The brokers in the metadata (``fresh``: from an answer newer than this call)."""
        version = self.metadata.request_update()
        while self.metadata.cluster.is_bootstrap or (fresh and self.metadata.version <= version):
            if self.client.fatal_error is not None:
                raise type(self.client.fatal_error)(str(self.client.fatal_error))
            if time.monotonic() > deadline:
                servers = ",".join(f"{h}:{p}" for h, p in self.config["bootstrap.servers"])
                raise KafkaTimeoutError(f"no metadata from {servers}: {self._why_not()}")
            self.client.poll(50, now_ms())
        return sorted(self.metadata.cluster.brokers)

    def _why_not(self) -> str:
        """The last thing that went wrong, for a timeout's message."""
        errors = [str(e) for e in self.client.connect_errors.values()]
        last = self.metadata.last_error
        return "; ".join(errors) or (str(last) if last else "no answer")

    def _backoff_or_raise(self, error: BaseException, deadline: float) -> None:
        if getattr(error, "name", "") not in _RETRY_NAMES and not getattr(error, "retriable", False):
            raise error
        if time.monotonic() + self.retry_backoff_s > deadline:
            raise KafkaTimeoutError(f"gave up retrying: {error}")
        time.sleep(self.retry_backoff_s)

    # -- topics ----------------------------------------------------------------------------------
    def check_topics_writable(self, topics: Iterable[str], deadline: float,
                              allow_auto_create: bool = False) -> dict[str, int]:
        """``{topic: partitions}`` once every topic exists (or was just auto-created, when
        ``allow_auto_create``) and is not refused to this principal for writing; otherwise
        ``TopicCheckError`` naming the topic and what is wrong."""
        names = sorted(set(topics))
        self.brokers(deadline)
        request = messages.metadata_request(names, allow_auto_topic_creation=allow_auto_create)
        request.include_topic_authorized_operations = True
        while True:
            body = self.call(None, request, deadline)
            pending, found = [], {}
            for t in body.topics:
                error = error_for_code(t.error_code, f"topic {t.name!r}") if t.error_code else None
                if error is None and not t.partitions:
                    error = error_for_code(5, f"topic {t.name!r}")  # LEADER_NOT_AVAILABLE: still being created
                if error is None:
                    if write_refused(getattr(t, "topic_authorized_operations", None)):
                        raise TopicCheckError(f"not authorized to write to topic {t.name!r} (the principal "
                                              "may describe it but has no WRITE permission)")
                    found[t.name] = len(t.partitions)
                elif error.name == "UNKNOWN_TOPIC_OR_PARTITION":
                    raise TopicCheckError(
                        f"topic {t.name!r} does not exist" + (
                            " and the brokers do not create topics on demand (auto.create.topics.enable=false)"
                            if allow_auto_create else " (kafka.allow.auto.create.topics is false)"))
                elif error.name == "TOPIC_AUTHORIZATION_FAILED":
                    raise TopicCheckError(f"not authorized to access topic {t.name!r} (TOPIC_AUTHORIZATION_FAILED)")
                elif error.name == "INVALID_TOPIC_EXCEPTION":
                    raise TopicCheckError(f"{t.name!r} is not a valid topic name")
                else:
                    pending.append(error)
            if not pending:
                return found
            self._backoff_or_raise(pending[0], deadline)
