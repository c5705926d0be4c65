"""Offset ranges: how many records went to a topic-partition, and the first and last offsets.

The one place ranges are merged -- a bulk send's batches, a write task's sends, the tasks of a
Spark job -- so all three agree on what an unknown offset means (-1: acks=0, or a resend the
broker recognised as a duplicate): it counts records but widens no span.
"""

from __future__ import annotations

from collections.abc import Hashable


def merge_range(ranges: dict, key: Hashable, count: int, first: int, last: int) -> None:
    """Fold ``count`` records at offsets ``first..last`` into ``ranges[key] = [count, first, last]``."""
    entry = ranges.get(key)
    if entry is None:
        ranges[key] = [count, first, last]
        return
    entry[0] += count
    if first >= 0:
        entry[1] = first if entry[1] < 0 else min(entry[1], first)
    if last >= 0:
        entry[2] = max(entry[2], last)
