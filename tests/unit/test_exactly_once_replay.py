"""Whether a streaming micro-batch's commit is a replay (``exactly_once.replay``), judged on the
query's latest decision alone -- each case as a driver restart leaves it."""

from __future__ import annotations

import pytest

from sparkkafka_sink.exactly_once.decision import Decision
from sparkkafka_sink.exactly_once.ids import WriteId
from sparkkafka_sink.exactly_once.replay import Replay, judge_micro_batch

QUERY = "5f0c-query"


def write(batch: int, owner: str = "o1", run: str = "a") -> WriteId:
    return WriteId("p", owner, run, batch)


def decided(batch: int, owner: str = "o1", run: str = "a", query: str | None = QUERY) -> Decision:
    return Decision(write(batch, owner, run), (), query)


@pytest.mark.parametrize(("latest", "this", "batch_id", "query", "verdict"), [
    # a query's first micro-batch: nothing decided under its prefix
    (None, write(0), 0, QUERY, Replay.NEW),
    # the next micro-batch after a decided one, same run
    (decided(3), write(4), 4, QUERY, Replay.NEW),
    # the commit of a micro-batch asked again (the driver's own decision found)
    (decided(4), write(4), 4, QUERY, Replay.DECIDED),
    # a restarted driver (another owner, another run) runs again batch 4, which its predecessor decided
    (decided(4, "o1", "a"), write(4, "o2", "b"), 4, QUERY, Replay.REPLAY),
    # ... or an earlier one, the predecessor having gone further
    (decided(5, "o1", "a"), write(4, "o2", "b"), 4, QUERY, Replay.REPLAY),
    # the restarted driver's first batch past what was decided
    (decided(4, "o1", "a"), write(5, "o2", "b"), 5, QUERY, Replay.NEW),
    # a micro-batch no task wrote (no write of its own) that was decided before
    (decided(4), None, 4, QUERY, Replay.REPLAY),
    # a checkpoint location reused by a new query: its batch 0 is its own, not a replay of batch 7
    (decided(7, query="old-query"), write(0, "o2", "b"), 0, QUERY, Replay.OTHER_QUERY),
    # decisions without a query id (recorded before the id was kept) are taken as this query's
    (decided(7, query=None), write(0, "o2", "b"), 0, QUERY, Replay.REPLAY),
    # nor is Spark's id always known when asking: the decision is taken as this query's
    (decided(7), write(0, "o2", "b"), 0, None, Replay.REPLAY),
])
def test_a_micro_batch_is_judged_by_the_query_s_latest_decision(latest, this, batch_id, query, verdict):
    assert judge_micro_batch(latest, this, batch_id, query) is verdict
