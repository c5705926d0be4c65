"""The exactly-once protocol searched, not only tried by example: tests/eos_model.py runs the
package's own commit, settle and fence code as every actor of a write -- driver, task attempts,
Spark's abort, the keeper, a misjudging next write -- under every interleaving up to a bound, with
lost answers, failed requests, listings that miss a transaction and coordinators timing
transactions out, checking after every step that nothing but a recorded decision's winners is
committed, and at the end that each write is visible whole or not at all and that every error
said what is true.

Here, bounded to about a minute: each of the three bugs issue 51 found by reading is put back and
found by the search, and the same bounds hold for the code as it is; every scenario is sampled at
random too.  Longer runs: ``python tests/eos_model.py`` (docs/delivery.md gives their counts)."""

from __future__ import annotations

import pytest
from eos_model import BUGS, SCENARIOS, bug_put_back, explore, quiet, sample

#: the search that finds each bug put back: its scenario and bounds (preemptions, faults)
SEARCH = {
    "deciding-late": ("slow tasks: the oldest transaction nearly timed out", 0, 0),
    "listing-trusted": ("two tasks, a driver, Spark's abort", 0, 2),
    "fenced-means-undecided": ("a next write misjudges the driver gone", 1, 1),
    "ender-leaves-epoch-0": ("the driver's close unanswered, a misjudging ender", 2, 0),
}
NAMED = {s.name: s for s in SCENARIOS}


@pytest.mark.parametrize("bug", BUGS)
def test_each_bug_put_back_is_found(bug):
    scenario, preemptions, faults = SEARCH[bug]
    with quiet(), bug_put_back(bug):
        out = explore(NAMED[scenario], preemptions, faults, budget_s=60)
    assert out.found, f"{bug}: {out.schedules} schedules of {scenario!r} found nothing"
    print(f"{bug}: found after {out.schedules} schedules: {out.found[0].error}")


@pytest.mark.parametrize("bug", BUGS)
def test_the_code_as_it_is_holds_where_each_bug_was_found(bug):
    scenario, preemptions, faults = SEARCH[bug]
    with quiet():
        out = explore(NAMED[scenario], preemptions, faults, budget_s=15, stop_at_first=False)
    assert not out.found, "\n\n".join(map(str, out.found[:2]))
    assert out.schedules > 100
    print(f"{bug}'s search: {out.schedules} schedules{', all within its bounds' if out.complete else ''}, none broken")


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_every_scenario_sampled(scenario):
    with quiet():
        out = sample(scenario, seed=51, schedules=400, preemptions=3, faults=2)
    assert not out.found, "\n\n".join(map(str, out.found[:2]))
