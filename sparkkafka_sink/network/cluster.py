"""Cluster: an immutable snapshot of brokers, topics and partition leaders.

Readers (``send()`` on user threads, the Sender) take the current snapshot
without locking; a metadata response replaces it as a whole.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field


@dataclass(frozen=True)
class BrokerNode:
    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int | None
    leader_epoch: int = -1
    error_code: int = 0


@dataclass(frozen=True)
class Cluster:
    brokers: dict[int, BrokerNode] = field(default_factory=dict)
    partitions: dict[str, dict[int, PartitionInfo]] = field(default_factory=dict)
    topic_errors: dict[str, int] = field(default_factory=dict)
    #: topics this principal may describe but not write (their authorized operations say so)
    write_refused: frozenset[str] = frozenset()
    cluster_id: str | None = None
    controller_id: int = -1

    @classmethod
    def bootstrap(cls, addresses: list[tuple[str, int]]) -> Cluster:
        """Bootstrap nodes get negative ids until real metadata names the brokers."""
        return cls(brokers={-(i + 1): BrokerNode(-(i + 1), h, p) for i, (h, p) in enumerate(addresses)})

    @property
    def is_bootstrap(self) -> bool:
        return all(n < 0 for n in self.brokers)

    def leader_for(self, topic: str, partition: int) -> int | None:
        return self.leaders.get((topic, partition))

    @functools.cached_property
    def leaders(self) -> dict[tuple[str, int], int]:
        """(topic, partition) -> its leader, for partitions whose leader is a known broker: the
        Sender looks every queued partition up on every loop, so once per metadata version."""
        return {(topic, p): info.leader for topic, parts in self.partitions.items() for p, info in parts.items()
                if info.leader is not None and info.leader >= 0 and info.leader in self.brokers}

    @functools.cached_property
    def leader_nodes(self) -> frozenset[int]:
        """The brokers leading a partition (``leaders``' values)."""
        return frozenset(self.leaders.values())

    def partitions_for(self, topic: str) -> list[int] | None:
        parts = self.partitions.get(topic)
        return sorted(parts) if parts else None

    def partition_count(self, topic: str) -> int:
        parts = self.partitions.get(topic)
        return len(parts) if parts else 0

    def available_partitions(self, topic: str) -> list[int]:
        parts = self.partitions.get(topic) or {}
        return [p for p, info in parts.items() if info.leader is not None and info.leader in self.brokers]

    def broker(self, node_id: int) -> BrokerNode | None:
        return self.brokers.get(node_id)
