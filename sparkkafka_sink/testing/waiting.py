"""``wait_until``: a test waits for an observed event, never for a guessed delay.

Here, in the package, rather than beside the tests: the jobs that tests run as scripts of their
own, and the Spark executors running those jobs' functions, import it too.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["wait_until"]

T = TypeVar("T")


def wait_until(what: str, predicate: Callable[[], T], timeout: float = 30.0, interval: float = 0.01) -> T:
    """Poll ``predicate`` every ``interval`` seconds until it returns something true, and return
    that; AssertionError naming ``what`` (and the last answer) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s waiting for {what} (last: {value!r})"
        time.sleep(interval)
