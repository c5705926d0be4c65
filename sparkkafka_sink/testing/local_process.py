"""What the local processes this package starts (brokers, Apache Kafka's nodes, the registry)
share: starting one that dies with us and logs to a file, stopping it by its PID, the atexit
safety net, the tail of its log for an error, and the command line's foreground run."""

from __future__ import annotations

import atexit
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

__all__ = ["Leftovers", "die_with_parent_fn", "file_tail", "serve_in_foreground", "spawn_logged", "terminate"]

_Item = TypeVar("_Item")

_COLOURS = re.compile(r"\x1b\[[0-9;]*m")  # tansu colours its log


class Leftovers(Generic[_Item]):
    """The atexit safety net: a crashed test run must not leave brokers or a registry holding
    ports (nor a cluster its JVMs and files).  Things are ``add``-ed when they start and
    ``discard``-ed when they stop; at exit ``cleanup`` runs on those still here, errors ignored."""

    def __init__(self, cleanup: Callable[[_Item], object]):
        self._items: set[_Item] = set()
        self._lock = threading.Lock()
        self._cleanup = cleanup
        atexit.register(self._clean_up_all)

    def add(self, item: _Item) -> None:
        with self._lock:
            self._items.add(item)

    def discard(self, item: _Item) -> None:
        with self._lock:
            self._items.discard(item)

    def _clean_up_all(self) -> None:
        with self._lock:
            items = list(self._items)
        for item in items:
            try:
                self._cleanup(item)
            except Exception:  # noqa: BLE001 - cleanup is best effort
                pass


def die_with_parent_fn() -> Callable[[], None] | None:
    """Linux: SIGKILL the child when we die without running atexit (e.g. killed by SIGTERM).

    PR_SET_PDEATHSIG fires when the *thread* that forked exits, so it is only used when
    starting from the main thread.
    """
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def fn() -> None:
        prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # parent already gone between fork and prctl
            os._exit(1)

    return fn


def spawn_logged(command: list[str], log_path: str | Path, cwd: str | Path,
                 env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start ``command`` in a session of its own, its output appended to ``log_path`` after a
    line naming it; it dies with this process (``die_with_parent_fn``)."""
    with open(log_path, "ab") as log:
        log.write(f"=== {time.strftime('%H:%M:%S')} starting: {' '.join(command)}\n".encode())
        log.flush()
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                cwd=str(cwd), env=env, start_new_session=True, preexec_fn=die_with_parent_fn())


def terminate(proc: subprocess.Popen[bytes], grace: float | None) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds (None: SIGKILL at once); returns once the
    process is gone."""
    if proc.poll() is not None:
        proc.wait()
        return
    try:
        if grace is not None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    except ProcessLookupError:
        proc.wait()


def file_tail(path: str | Path, lines: int = 40, name: str = "log", max_bytes: int = 32768) -> str:
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


def serve_in_foreground(address: str, banner: str, exited: Callable[[], str | None], stop: Callable[[], None],
                        first: Callable[[], None] | None = None) -> int:
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
