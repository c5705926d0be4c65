"""Two test processes side by side (``pytest -n 2``, pytest-xdist): each takes a fixed share of
the suite.  A plugin of the root conftest.

The shares are fixed, not balanced test by test, because a process holds one SparkContext:
``tests/spark`` runs on ``spark`` (``local[2]``, one attempt per task) and the broker-fault
modules on ``retrying_spark`` (``local[2,4]``); a process that ran a test of each kind in turn
would restart Spark at every switch, or hand a test the other kind's session.  So every test is
marked ``xdist_group`` with its share and ``--dist loadgroup`` (pyproject's addopts) gives each
process one whole share, run in collection order; ``session_resources`` stops a resource after
its last user *within the share*.  Without ``-n`` the marks do nothing and one process runs all.

The shares are sized from ``--durations=0`` of a full run (README, "Where the full run's time
goes"): ``tests/spark`` and ``tests/security`` (606 s of test time) on one side; the broker
faults, failover, compatibility, oracle, producer integration and unit modules (586 s) on the
other.
"""

from __future__ import annotations

import os
from typing import Optional

import pytest

_TESTS = os.path.dirname(os.path.abspath(__file__))

#: directories and modules (relative to tests/) of the second share, the one that runs the
#: ``retrying_spark`` modules; everything else (``tests/spark``, ``tests/security``) is the first
BROKERS_SHARE = (
    "compat", "failover", "faults", "integration", "oracle", "transactions", "unit",
    "test_infra_brokers.py",
)


def share_of(item: pytest.Item) -> str:
    """The share (``xdist_group``) a test belongs to."""
    path = os.path.relpath(str(item.path), _TESTS)
    top = path.split(os.sep, 1)[0]
    return "brokers" if top in BROKERS_SHARE else "spark"


def distributed_share(item: pytest.Item) -> Optional[str]:
    """The share of a test run by a worker process that was given one whole share, else None
    (one process runs everything)."""
    config = item.config
    in_share = hasattr(config, "workerinput") and getattr(config.option, "loadgroup", False)
    return share_of(item) if in_share else None


@pytest.hookimpl(tryfirst=True)  # before xdist's worker names the tests after their group
def pytest_collection_modifyitems(config, items):
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        item.add_marker(pytest.mark.xdist_group(share_of(item)))
