"""Session resources stopped after their last user, a plugin of the root conftest.

A session fixture holding something costly (a SparkContext, a JVM broker) registers it with
``stop_after_last_use(fixture_name, stop)``: ``stop`` runs right after the last test of the run
(in collection order) that uses the fixture, its fixtures torn down; not at the end of the
session, so nothing idles through the tests that come after (and the one SparkContext a process
may hold is free for the next).  When the run is split over processes (``parallel``), "last"
means last of the process's share.  A test that asks for such a fixture by name at run time
(``request.getfixturevalue``) declares it with ``@pytest.mark.uses("fixture")`` (on the test or
on a parameter), or the resource may be stopped before it runs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest
from parallel import distributed_share

#: fixture name -> the stop of its running resource
_running: dict[str, Callable[[], None]] = {}
#: (share, fixture name) -> node id of the last collected test of the share that uses it
_last_user: dict[tuple[str | None, str], str] = {}


def stop_after_last_use(fixture: str, stop: Callable[[], None], note: str | None = None) -> Callable[[], None]:
    """Run ``stop`` once, after the last test that uses ``fixture`` (then print ``note``), or
    when the returned function is called (the fixture's own teardown), whichever comes first."""

    def once(after_last_use: bool = False) -> None:
        if _running.get(fixture) is once:
            del _running[fixture]
            stop()
            if after_last_use and note:
                print(f"\n{note}", file=sys.stderr)

    _running[fixture] = once
    return once


def pytest_collection_finish(session):
    _last_user.clear()
    for item in session.items:
        declared = [name for mark in item.iter_markers("uses") for name in mark.args]
        for name in (*getattr(item, "fixturenames", ()), *declared):
            _last_user[distributed_share(item), name] = item.nodeid


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield
    share = distributed_share(item)
    for fixture, stop in list(_running.items()):
        if _last_user.get((share, fixture)) == item.nodeid:
            stop(after_last_use=True)
