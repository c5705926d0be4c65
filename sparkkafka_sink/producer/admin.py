"""BlockingAdmin: short blocking requests to a cluster, with the producer's configuration.

The producer's Sender is asynchronous; the Spark driver needs a few one-off questions answered
before or after the tasks run -- does the cluster answer, may we write to this topic, end this
transaction -- each within a deadline.  A ``NetworkClient`` of its own (``network_stack``, as
the producer's, security included), polled by the calling thread until the answer arrives;
``run`` drives the producer's own control-request handlers (``producer.control_requests``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from sparkkafka_sink.errors import KafkaConnectionError, KafkaTimeoutError, again
from sparkkafka_sink.network.client import now_ms
from sparkkafka_sink.producer.config import ProducerConfig
from sparkkafka_sink.producer.control_requests import ControlRequest, Coordinators, Outcome, TopicMetadata
from sparkkafka_sink.producer.network_stack import network_stack
from sparkkafka_sink.protocol.schema import ProtocolMessage

_Admin = TypeVar("_Admin", bound="BlockingAdmin")


class BlockingAdmin:
    """One-off requests to the cluster of ``config`` (a producer configuration)."""

    def __init__(self, config: Mapping[str, Any], role: str = "admin"):
        c = ProducerConfig(config).updated({ProducerConfig.transactional_id.key.name: None})
        self.config = c
        self.retry_backoff_s = c.retry_backoff_ms / 1000
        self._network = network_stack(c, f"{c.client_id}-{role}", max_in_flight=5, allow_auto_topic_creation=False)
        self.metadata, self.client = self._network.metadata, self._network.client
        self.coordinators = Coordinators()

    def close(self) -> None:
        self._network.close()

    def __enter__(self: _Admin) -> _Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- one request ---------------------------------------------------------------------------
    def call(self, node: int | None, request: ProtocolMessage, deadline: float, max_version: int | None = None) -> ProtocolMessage:
        """Send ``request`` to ``node`` (None: any broker) and wait for its answer.

        A named node (a coordinator) that cannot be reached, that the metadata no longer names
        (it left the cluster after the caller chose it), or whose connection drops before the
        answer, raises ``KafkaConnectionError``: the caller asks who coordinates now."""
        answer: list = []
        sent = False
        while True:
            now = now_ms()
            self._raise_fatal()
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
                elif node is not None and not self.client.knows(node):  # nothing will connect to it
                    self.metadata.request_update()  # (a coordinator a stale metadata lacks: asked again after it)
                    raise KafkaConnectionError(f"{type(request).__name__}: node {node} is no longer in the "
                                               "cluster's metadata")
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

    def _ask(self, node: int | None, handler: ControlRequest, deadline: float) -> Outcome:
        """The handler's verdict on its request's answer from ``node``, or on there being none."""
        try:
            return handler.handle(self.call(node, handler.build(), deadline, handler.max_version))
        except KafkaConnectionError as e:
            return handler.no_answer(e)

    def run(self, handler: ControlRequest, deadline: float) -> Any:
        """Drive a control request to its end, as the producer's Sender would -- coordinator
        looked up first (and again when it moved), refusals retried under the handlers' one
        policy -- within ``deadline``; its ``result``, or the error it failed with."""
        while True:
            key = handler.coordinator_key
            if key is not None and self.coordinators.node(key) is None:
                self.brokers(deadline)
                self.run(self.coordinators.lookup(key), deadline)
            target = self.coordinators.node(key) if key is not None else None
            outcome = self._ask(target, handler, deadline)
            if outcome is Outcome.DONE:
                return handler.result
            if outcome is Outcome.FATAL:
                raise handler.failure
            if outcome is Outcome.FIND_COORDINATOR and key is not None:
                self.coordinators.forget(key)
            self.backoff(handler.error, deadline)

    def run_on_every_broker(self, question: Callable[[], ControlRequest], deadline: float) -> list:
        """Ask every broker a question only it can answer for itself (``question()`` makes a
        handler; e.g. ListTransactions: each broker knows the transactions it coordinates); the
        results, one per broker.  When any answer calls for a retry under the handlers' one
        policy, or none came (a broker down or still loading), every broker is asked again after
        ``retry.backoff.ms``, once fresh metadata names the brokers there are now."""
        fresh = False
        while True:
            asked = [(node, question()) for node in self.brokers(deadline, fresh)]
            for node, handler in asked:
                outcome = self._ask(node, handler, deadline)
                if outcome is Outcome.FATAL:
                    raise handler.failure
                if outcome is not Outcome.DONE:
                    self.backoff(handler.error, deadline)
                    fresh = True
                    break
            else:
                return [handler.result for _, handler in asked]

    def brokers(self, deadline: float, fresh: bool = False) -> list[int]:
        """The brokers in the metadata (``fresh``: from an answer newer than this call)."""
        version = self.metadata.request_update()
        while self.metadata.cluster.is_bootstrap or (fresh and self.metadata.version <= version):
            self._raise_fatal()
            self._raise_if_nothing_listens()
            if time.monotonic() > deadline:
                servers = ",".join(f"{h}:{p}" for h, p in self.config.bootstrap_servers)
                raise KafkaTimeoutError(f"no metadata from {servers}: {self._why_not()}")
            self.client.poll(50, now_ms())
        return sorted(self.metadata.cluster.brokers)

    def _raise_if_nothing_listens(self) -> None:
        """Every bootstrap address refused the connection: an answer, not silence -- nothing
        listens there, so waiting out the deadline would only delay the same verdict."""
        if not self.metadata.cluster.is_bootstrap:
            return
        addresses = [f"{h}:{p}" for h, p in self.config.bootstrap_servers]
        errors = [self.client.connect_errors.get(a) for a in addresses]
        if all(isinstance(e, KafkaConnectionError) and e.refused for e in errors):
            raise KafkaConnectionError(f"nothing listens at {','.join(addresses)}: every address refused the "
                                       f"connection ({'; '.join(str(e) for e in errors)})", refused=True)

    def _raise_fatal(self) -> None:
        if self.client.fatal_error is not None:  # authentication, certificate
            raise again(self.client.fatal_error)

    def _why_not(self) -> str:
        """The last thing that went wrong, for a timeout's message."""
        errors = [str(e) for e in self.client.connect_errors.values()]
        last = self.metadata.last_error
        return "; ".join(errors) or (str(last) if last else "no answer")

    def backoff(self, error: BaseException | None, deadline: float) -> None:
        """Wait ``retry.backoff.ms`` before asking again, unless that passes the deadline."""
        if time.monotonic() + self.retry_backoff_s > deadline:
            raise KafkaTimeoutError(f"gave up retrying: {error}")
        time.sleep(self.retry_backoff_s)

    # -- topics ----------------------------------------------------------------------------------
    def check_topics_writable(self, topics: Iterable[str], deadline: float,
                              allow_auto_create: bool = False) -> dict[str, int]:
        """``{topic: partitions}`` once every topic exists (or was just auto-created, when
        ``allow_auto_create``) and is not refused to this principal for writing; otherwise
        ``TopicCheckError`` naming the topic and what is wrong (``control_requests.TopicMetadata``)."""
        self.brokers(deadline)
        return self.run(TopicMetadata(topics, allow_auto_create), deadline)
