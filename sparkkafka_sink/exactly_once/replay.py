"""Whether a streaming micro-batch's commit is a replay: Spark's own rule, judged on what Kafka holds.

A streaming query writes one micro-batch after another, each an exactly-once write of its own,
and its latest decision is kept in the decisions topic under the query's prefix.  After a driver
restart Spark runs again the micro-batches it had not marked done in its checkpoint -- some of
which a driver before it had decided (and maybe committed) already.  What the driver's commit does
then follows from three facts only -- the query's latest decision, this micro-batch's write, the
query asking -- so it is judged here, apart from Spark and from Kafka's requests, and tested
so (``tests/unit/test_exactly_once_replay.py``).
"""

from __future__ import annotations

import enum

from sparkkafka_sink.exactly_once.decision import Decision
from sparkkafka_sink.exactly_once.ids import WriteId

__all__ = ["Replay", "judge_micro_batch"]


class Replay(enum.Enum):
    #: nothing decided for it yet: commit it
    NEW = "new"
    #: this very write was decided already (its commit asked again): end it as recorded
    DECIDED = "decided"
    #: an earlier run decided this micro-batch (or a later one): a replay -- end what was decided,
    #: abort this one, write nothing twice
    REPLAY = "replay"
    #: the decisions under the prefix are another query's (a checkpoint location reused by a new
    #: query, Spark's id of it new): this micro-batch is the new query's own
    OTHER_QUERY = "other query"


def judge_micro_batch(latest: Decision | None, write: WriteId | None, batch_id: int, query: str | None) -> Replay:
    """What micro-batch ``batch_id`` (its write ``write``: None when no task of it wrote; of the
    query ``query``: Spark's id, None where unknown) is, given the latest decision recorded under
    its query's prefix."""
    if latest is None:
        return Replay.NEW
    if write is not None and latest.write == write:
        return Replay.DECIDED
    if query is not None and latest.query is not None and latest.query != query:
        return Replay.OTHER_QUERY
    if latest.write.batch is not None and latest.write.batch >= batch_id:
        return Replay.REPLAY
    return Replay.NEW
