"""A write task's Python worker: glibc's malloc thresholds, raised for the bulk path's large
temporaries.

A ``send_batch`` call of 16 MiB of 110-byte rows (the sink's ``coalesceBytes``) works on a
dozen numpy arrays of ~1 MB each (one int64 per row: lengths, offset deltas, varint words).
glibc serves an allocation above its mmap threshold with a fresh mapping and trims freed memory
at the heap's top beyond its trim threshold; its dynamic thresholds (128 KiB at start, raised to
the largest mapping freed) do not keep up with this pattern, so every call's arrays come back
as fresh pages, which the kernel faults in and zeroes one by one.  Measured on one write task
(2M rows of 10 + 100 B, 64 partitions): ~45,000 minor faults and 0.17-0.37 s of system CPU
before, ~7,000 and 0.05-0.10 s after; 8-14 % more rows per second.

Raising both thresholds keeps freed memory in the heap for the next call: the process's peak
memory is unchanged, it is only not handed back between calls (at most ``trim_threshold`` of
it).  Process-wide, so the producer never does it by itself: the write task does it in the
Python worker it runs in, unless the option ``tuneAllocator`` is false.
"""

from __future__ import annotations

import ctypes
import platform
import threading

#: mallopt parameters (glibc's malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3

#: an allocation below this comes from the heap (glibc caps it at 32 MiB on 64-bit)
MMAP_THRESHOLD = 16 << 20
#: free memory the heap keeps at its top before giving it back
TRIM_THRESHOLD = 32 << 20

_lock = threading.Lock()
_applied: bool | None = None


def raise_malloc_thresholds() -> bool:
    """Raise glibc's mmap and trim thresholds for this process, once; True if they are raised
    (False where the C library is not glibc: nothing to do)."""
    global _applied
    with _lock:
        if _applied is None:
            _applied = _mallopt({M_MMAP_THRESHOLD: MMAP_THRESHOLD, M_TRIM_THRESHOLD: TRIM_THRESHOLD})
        return _applied


def _mallopt(settings: dict[int, int]) -> bool:
    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return all(mallopt(param, value) == 1 for param, value in settings.items())
