"""Two test processes side by side (``pytest -n 2``, pytest-xdist): each takes a fixed share of
the suite.  A plugin of the root conftest.

The shares are fixed, not balanced test by test, because a process holds one SparkContext:
``tests/spark`` runs on ``spark`` (``local[2]``, one attempt per task) and the broker-fault
modules on ``retrying_spark`` (``local[2,4]``); a process that ran a test of each kind in turn
would restart Spark at every switch, or hand a test the other kind's session.  So xdist's
default mode (``-n 2`` alone) is replaced by a scheduler whose work units are the shares: each
process runs one whole share in collection order, and ``session_resources`` stops a resource
after its last user *within the share*.  (xdist's own ``--dist loadgroup`` cannot do it under
pytest 9: it renames test ids through an attribute pytest no longer reads.)  Any other
``--dist`` mode the user asks for is left alone; without ``-n`` one process runs everything.

The shares: ``tests/spark``, ``tests/security`` and ``tests/docs`` on one side; the broker
faults, failover, compatibility, oracle, producer integration, transactions and unit modules on
the other, with the deployment test (``tests/deploy``: its own standalone cluster and
spark-submit, no SparkContext in this process).  ``--durations=0`` of a full run on 2026-12-07
gave them 1,172 s and 1,446 s of test time, yet evening them out (117 s of CPU-only unit tests
moved across) did not shorten the run (25:04 against 24:18): on two cores the suite is bound by
the CPU both processes and their brokers and JVMs share, not by the shares' balance.
"""

from __future__ import annotations

import pytest

#: directories and modules of tests/ in the second share, the one that runs the
#: ``retrying_spark`` modules; everything else (``tests/spark``, ``tests/security``, ``tests/docs``) is the first
BROKERS_SHARE = (
    "compat", "deploy", "failover", "faults", "integration", "oracle", "exactly_once", "unit",
    "test_infra_brokers.py",
)

#: set in each worker's ``workerinput`` when it runs one whole share
_IN_SHARE = "sparkkafka_share"


def share_of(nodeid: str) -> str:
    """The share a test belongs to, from its id (``tests/<dir or module>/...``)."""
    parts = nodeid.split("::", 1)[0].split("/")
    top = parts[1] if len(parts) > 1 and parts[0] == "tests" else parts[0]
    return "brokers" if top in BROKERS_SHARE else "spark"


def distributed_share(item: pytest.Item) -> str | None:
    """The share of a test run by a process that runs one whole share, else None (one process
    runs everything)."""
    workerinput = getattr(item.config, "workerinput", None)
    return share_of(item.nodeid) if workerinput and workerinput.get(_IN_SHARE) else None


#: the share this worker process runs, as its first test says
_my_share: str | None = None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """A worker of two or more given a test of another share fails it: the scheduler broke
    (e.g. xdist changed), and the test would get the other share's SparkSession."""
    global _my_share
    share = distributed_share(item)
    if share is None or item.config.workerinput.get("workercount", 1) < 2:
        return
    _my_share = _my_share or share
    if share != _my_share:
        pytest.fail(f"this process runs the {_my_share!r} share, not {item.nodeid} ({share!r}): "
                    f"tests/parallel.py's scheduler was not used", pytrace=False)


def _shares_wanted(config) -> bool:
    return config.getoption("dist", "no") == "load"  # what ``-n N`` alone means


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """Tell each worker it runs whole shares."""
    if _shares_wanted(node.config):
        node.workerinput[_IN_SHARE] = True


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if not _shares_wanted(config):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ShareScheduling(LoadScopeScheduling):
        """xdist's scope scheduling with the shares as scopes: with two workers, one share each."""

        def _split_scope(self, nodeid: str) -> str:
            return share_of(nodeid)

    return ShareScheduling(config, log)
