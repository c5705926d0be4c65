"""Who owns a write: the driver's process (its JVM), named by a token in every id of its writes.

The token is a digest of the host, the JVM's pid and its start time, so a reused pid on the
same host is another owner.  The JVM is found as the nearest ``java`` process above the calling
one (Spark's Python workers are its descendants); where none is found (not Linux), the calling
process's parent stands for it (Spark's worker daemon, which ends with the JVM).
"""

from __future__ import annotations

import hashlib
import os
import socket
from pathlib import Path

from sparkkafka_sink.exactly_once.ids import OWNER_DIGITS

__all__ = ["Process", "stat", "driver_process", "driver_token", "alive"]

#: (pid, start time in clock ticks; 0 where unknown)
Process = tuple[int, int]


def stat(pid: int) -> tuple[str, int, int] | None:
    """(command name, parent pid, start time in clock ticks) of ``pid`` on Linux, else None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name, rest = text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2:].split()
    return name, int(rest[1]), int(rest[19])


def driver_process() -> Process:
    """The driver's JVM: the nearest ``java`` above this process, else this process's parent."""
    pid = os.getpid()
    while pid > 1:
        found = stat(pid)
        if found is None:
            break
        if found[0] == "java":
            return pid, found[2]
        pid = found[1]
    parent = os.getppid()
    found = stat(parent)
    return parent, found[2] if found else 0


def driver_token(process: Process | None = None) -> str:
    """The owner's name in its write ids: its host, its JVM's pid and start time."""
    pid, start = process or driver_process()
    return hashlib.sha1(f"{socket.gethostname()}:{pid}:{start}".encode()).hexdigest()[:OWNER_DIGITS]


def alive(process: Process) -> bool:
    """The process lives, and is the one that started then (not a reused pid)."""
    pid, start = process
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    found = stat(pid)
    return found is None or start == 0 or found[2] == start
