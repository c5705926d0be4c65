"""Metadata: which topics we care about, when to refresh, and the current Cluster.

Refreshes happen periodically (``metadata.max.age.ms``), when a new topic is
first used, and when a produce error says a leader moved.  Threads blocked in
``send()`` on an unknown topic wait on ``await_update``; failed refreshes keep
their error so a timeout can say *why* (e.g. the bootstrap address refused).
"""

from __future__ import annotations

import threading
import time

from sparkkafka_sink.network.cluster import BrokerNode, Cluster, PartitionInfo
from sparkkafka_sink.protocol.error_codes import LeaderNotAvailableError, error_for_code
from sparkkafka_sink.protocol.messages import write_refused
from sparkkafka_sink.protocol.schema import ProtocolMessage


class Metadata:
    def __init__(self, bootstrap: list[tuple[str, int]], *, max_age_ms: int, refresh_backoff_ms: int,
                 max_idle_ms: int):
        self.bootstrap = list(bootstrap)
        self.cluster = Cluster.bootstrap(self.bootstrap)
        self.max_age_ms = max_age_ms
        self.refresh_backoff_ms = refresh_backoff_ms
        self.max_idle_ms = max_idle_ms
        self.version = 0
        self.last_refresh_ms = 0.0
        self.last_success_ms = 0.0
        self.last_error: BaseException | None = None
        self._need_update = True
        self._topics: dict[str, float] = {}
        self._cond = threading.Condition()

    # -- topics of interest ------------------------------------------------------------
    def add_topic(self, topic: str, now_ms: float) -> None:
        with self._cond:
            if topic not in self._topics:
                self._need_update = True
            self._topics[topic] = now_ms

    def touch(self, topic: str, now_ms: float) -> None:
        self._topics[topic] = now_ms

    def topics(self, now_ms: float) -> list[str]:
        with self._cond:
            for t, used in list(self._topics.items()):
                if now_ms - used > self.max_idle_ms:
                    del self._topics[t]
            return list(self._topics)

    # -- refresh policy ----------------------------------------------------------------
    def request_update(self) -> int:
        with self._cond:
            self._need_update = True
            return self.version

    @property
    def update_requested(self) -> bool:
        return self._need_update

    def time_to_next_update(self, now_ms: float) -> float:
        expiry = self.last_success_ms + self.max_age_ms
        due = 0.0 if self._need_update else max(expiry - now_ms, 0.0)
        backoff = max(self.last_refresh_ms + self.refresh_backoff_ms - now_ms, 0.0)
        return max(due, backoff)

    def update(self, response: ProtocolMessage, now_ms: float) -> None:
        """Install the cluster described by a MetadataResponse."""
        brokers = {b.node_id: BrokerNode(b.node_id, b.host, b.port, getattr(b, "rack", None))
                   for b in response.brokers}
        partitions: dict[str, dict[int, PartitionInfo]] = {}
        errors: dict[str, int] = {}
        refused: set[str] = set()
        old = self.cluster
        with self._cond:
            wanted = set(self._topics)
        for t in response.topics:
            if t.name not in wanted:
                # not asked for: a broker reading an empty list as "every topic" (tansu does, as
                # Metadata v0 did) must not make us hold, nor seem to know, the whole cluster
                continue
            if t.error_code:
                errors[t.name] = t.error_code
                # A transient topic error keeps what we knew, so sends do not stall.
                if t.name in old.partitions and isinstance(error_for_code(t.error_code), LeaderNotAvailableError):
                    partitions[t.name] = old.partitions[t.name]
                continue
            if write_refused(getattr(t, "topic_authorized_operations", None)):
                refused.add(t.name)
            partitions[t.name] = {
                p.partition_index: PartitionInfo(
                    t.name, p.partition_index,
                    p.leader_id if p.leader_id >= 0 and not p.error_code else None,
                    getattr(p, "leader_epoch", -1), p.error_code)
                for p in t.partitions
            }
        with self._cond:
            self.cluster = Cluster(brokers=brokers, partitions=partitions, topic_errors=errors,
                                   write_refused=frozenset(refused),
                                   cluster_id=getattr(response, "cluster_id", None),
                                   controller_id=getattr(response, "controller_id", -1))
            self.version += 1
            self.last_refresh_ms = self.last_success_ms = now_ms
            self.last_error = None
            self._need_update = any(t in errors or t not in partitions for t in self._topics)
            self._cond.notify_all()

    def failed_update(self, now_ms: float, error: BaseException) -> None:
        with self._cond:
            self.last_refresh_ms = now_ms
            self.last_error = error
            self._cond.notify_all()

    def await_update(self, last_version: int, timeout_s: float) -> bool:
        """Wait for a newer version (or a failed attempt); False on timeout."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            start_error = self.last_error
            while self.version <= last_version:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
                if self.last_error is not None and self.last_error is not start_error:
                    return True
            return True
