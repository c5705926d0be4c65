"""A handful of the chaos harness's schedules (tests/chaos.py) against the session's Apache Kafka:
real Spark drivers killed with their commit's requests held in flight, recovered by the keeper
and by the operator's command, every write read back by confluent-kafka whole or absent, none
twice, every recorded decision completed, nothing left open -- and the harness shown to find a
bug put back into the package (an ender that aborts a decided write's winners), in the same
schedule that passes without it.  Hundreds of schedules: ``python tests/chaos.py --schedules N``."""

from __future__ import annotations

import pytest
from chaos import Cluster, Schedule, run_schedule

pytestmark = [pytest.mark.broker, pytest.mark.transactions, pytest.mark.spark, pytest.mark.slow]

#: the driver killed with the decision's own EndTxn in flight, its keeper ending the write; the
#: driver killed between the decision and its winners' commits, the command completing the write
SEEDS = (1, 64)


@pytest.fixture(scope="module")
def cluster(apache_kafka):
    found = Cluster(existing=apache_kafka)
    try:
        yield found
    finally:
        found.close()


@pytest.mark.parametrize("seed", SEEDS)
def test_a_schedule_of_the_chaos_harness(cluster, tmp_path, seed):
    out = run_schedule(cluster, Schedule.draw(seed), tmp_path)
    assert not out.violations, f"{out.schedule}\n" + "\n".join(out.notes + out.violations)


def test_the_harness_finds_a_bug_put_back(cluster, tmp_path):
    """An ender that aborts the recorded winners of a decided write (here the command, after the
    driver was killed between its decision and its commits): the write is left partly visible,
    or a decision uncompleted -- and the harness says so."""
    out = run_schedule(cluster, Schedule.draw(64), tmp_path, put_back="ender-aborts-decided")
    assert any("partly visible" in v or "not committed" in v for v in out.violations), \
        f"{out.schedule}: the bug put back was not found\n" + "\n".join(out.notes + out.violations)
