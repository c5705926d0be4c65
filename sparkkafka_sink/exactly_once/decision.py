"""A write's decision: the exact transactions its driver commits, as recorded in Kafka.

The driver records it once, before its first commit, in the decisions topic
(``decision_log``), in a transaction under the write's decision id; whoever ends the write
other than its driver reads it there.  It names each winner by its transactional id, producer id
and epoch (and whether it began under transactions v2, which decides its EndTxn version): all
another process needs to commit it.  The partitions are not kept (the record stays small: a
write of a thousand tasks is some 30 KB of JSON before compression).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from sparkkafka_sink.errors import KafkaError
from sparkkafka_sink.exactly_once.ids import WriteId, parse
from sparkkafka_sink.producer.handover import PreparedTransaction

__all__ = ["Decision", "DecisionFormatError"]

_VERSION = 1


class DecisionFormatError(KafkaError):
    """A record of the decisions topic that is not a decision this package wrote."""


@dataclass(frozen=True)
class Decision:
    """Commit exactly ``winners`` of ``write``; everything else of it is aborted.  ``query``: a
    streaming write's query, by Spark's id of it (a checkpoint location reused by a new query
    gets a new one: its micro-batches are then not taken for replays of the old query's)."""

    write: WriteId
    winners: tuple[PreparedTransaction, ...]
    query: str | None = None

    @property
    def winner_ids(self) -> frozenset[str]:
        return frozenset(w.transactional_id for w in self.winners)

    def to_bytes(self) -> bytes:
        stem = self.write.name + "-"
        rows = []
        for w in self.winners:
            if not w.transactional_id.startswith(stem):
                raise ValueError(f"{w.transactional_id!r} is not a transaction of the write {self.write.name!r}")
            rows.append([w.transactional_id[len(stem):], w.producer_id, w.producer_epoch, int(w.transaction_v2)])
        record: dict = {"v": _VERSION, "write": self.write.name, "winners": rows}
        if self.query is not None:
            record["q"] = self.query
        return json.dumps(record, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Decision:
        try:
            d = json.loads(data)
            write = parse(d["write"])
            if d["v"] != _VERSION or write is None:
                raise ValueError(f"version {d['v']!r}, write {d['write']!r}")
            winners = tuple(PreparedTransaction(f"{write.name}-{suffix}", int(pid), int(epoch), (), bool(v2))
                            for suffix, pid, epoch, v2 in d["winners"])
            query = d.get("q")
        except (ValueError, KeyError, TypeError) as e:
            raise DecisionFormatError(f"not a decision record of pyprod-kafka: {e}") from None
        return cls(write, winners, str(query) if query is not None else None)
