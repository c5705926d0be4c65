"""Put on ``PYTHONPATH`` by ``tests/chaos.py --put-back BUG``: every Python process of the job --
its driver's, the Spark Python workers that run the sink's commit and tasks, its keeper -- starts
with the bug ``$SPARKKAFKA_PUT_BACK`` put back into the package, so the chaos harness can show it
finds what it is meant to find.

``ender-aborts-decided``: whoever ends a write for its driver (the keeper, the next write, the
command) aborts the recorded winners instead of committing them -- a write whose driver died
between two of its commits is left partly visible."""

import os

_bug = os.environ.get("SPARKKAFKA_PUT_BACK")
if _bug == "ender-aborts-decided":
    from sparkkafka_sink.exactly_once import settle as _settle

    _plan = _settle.plan

    def _aborting_plan(write, listed, winners, described):
        ending = _plan(write, listed, winners, described)
        return _settle.Ending((), tuple(sorted({*ending.fence, *(w.transactional_id for w in ending.commit)})),
                              ending.committed, ending.aborted, ending.unknown)

    _settle.plan = _aborting_plan
elif _bug:
    raise SystemExit(f"SPARKKAFKA_PUT_BACK={_bug}: no such bug")
