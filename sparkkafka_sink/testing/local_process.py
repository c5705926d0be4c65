"""What the local processes this package starts (brokers, Apache Kafka's nodes, the registry)
share: the tail of their logs for an error, and the command line's foreground run."""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
from pathlib import Path
from typing import Callable, Optional, Union

__all__ = ["file_tail", "serve_in_foreground"]

_COLOURS = re.compile(r"\x1b\[[0-9;]*m")  # tansu colours its log


def file_tail(path: Union[str, Path], lines: int = 40, name: str = "log", max_bytes: int = 32768) -> str:
    """The last ``lines`` lines of the file (read from its last ``max_bytes``), without terminal
    colours; ``<no {name}: why>`` when it cannot be read."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - max_bytes))
            data = f.read().decode("utf-8", "replace")
    except OSError as e:
        return f"<no {name}: {e}>"
    return "\n".join(_COLOURS.sub("", data).splitlines()[-lines:])


def serve_in_foreground(address: str, banner: str, exited: Callable[[], Optional[str]], stop: Callable[[], None],
                        first: Optional[Callable[[], None]] = None) -> int:
    """Run ``first`` (if given), print ``address`` (stdout: for scripts) and ``banner`` (stderr),
    then wait for Ctrl-C or SIGTERM: 0, or 1 with what ``exited()`` says once the process exits
    by itself (``exited()`` is None while it runs).  ``stop()`` at the end in every case."""
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    try:
        if first is not None:
            first()
        print(address, flush=True)
        print(banner, file=sys.stderr, flush=True)
        while not done.wait(0.5):
            why = exited()
            if why is not None:
                print(why, file=sys.stderr)
                return 1
    finally:
        stop()
    return 0
