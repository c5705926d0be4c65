"""Put on the Spark worker's ``PYTHONPATH`` by tests/deploy: every Python process the worker's
executors start (Python's ``site`` imports this module at start-up) leaves a record of which
interpreter it is, where it runs and where ``sparkkafka_sink`` would be imported from.  That
covers the sink's own write tasks, which the job cannot check from inside: their Python is
chosen by Spark, not by the job."""

import importlib.util
import json
import os
import sys

_records = os.environ.get("SPARKKAFKA_PYTHON_PROBE")
if _records:
    try:
        _spec = importlib.util.find_spec("sparkkafka_sink")
    except (ImportError, ValueError):  # a broken path entry: record it as not found
        _spec = None
    with open(os.path.join(_records, f"{os.getpid()}.json"), "w") as _f:
        json.dump({"executable": sys.executable, "cwd": os.getcwd(), "argv": sys.orig_argv,
                   "package": _spec.origin if _spec is not None else None}, _f)
