"""OpenTelemetry made absent from every Python process started with this directory on
``PYTHONPATH`` (Spark's driver, its Python workers and planner processes): each import finder
answers "not found" for ``opentelemetry`` and its modules, as when the ``[otel]`` extra is not
installed.  Each time one of them is asked for is written to ``$OTEL_ABSENT_LOG`` (pid, name,
``look`` when it came through ``importlib.util.find_spec`` else ``import``, and the caller) for
``tests/spark/test_spark_observability.py`` to read."""

from __future__ import annotations

import os
import sys
import traceback

_LOG = os.environ.get("OTEL_ABSENT_LOG")


def _hidden(name: str) -> bool:
    return name == "opentelemetry" or name.startswith("opentelemetry.")


def _asked(name: str) -> None:
    if not _LOG:
        return
    frames = traceback.extract_stack()[:-2]  # (not this function nor the finder's)
    looked = any(f.name == "find_spec" and (f.filename == "<frozen importlib.util>"  # (frozen since 3.11)
                                            or f.filename.endswith(os.path.join("importlib", "util.py")))
                 for f in frames)
    caller = next((f"{f.filename}:{f.name}" for f in reversed(frames)
                   if not f.filename.startswith("<frozen") and os.sep + "importlib" + os.sep not in f.filename), "?")
    with open(_LOG, "a", encoding="utf-8") as out:
        out.write(f"{os.getpid()}\t{name}\t{'look' if looked else 'import'}\t{caller}\n")


class _Absent:
    """One of the interpreter's finders, blind to OpenTelemetry."""

    def __init__(self, finder: object, first: bool):
        self._finder = finder
        self._first = first  # (the first finder asked writes the line: one a question)

    def find_spec(self, name, path=None, target=None):
        if _hidden(name):
            if self._first:
                _asked(name)
            return None
        find = getattr(self._finder, "find_spec", None)
        return find(name, path, target) if find is not None else None

    def __getattr__(self, attr: str):
        return getattr(self._finder, attr)


if any(_hidden(name) for name in sys.modules):  # (a .pth file imported it before this ran)
    _asked("(imported before sitecustomize)")
sys.meta_path[:] = [_Absent(f, i == 0) for i, f in enumerate(sys.meta_path)]
