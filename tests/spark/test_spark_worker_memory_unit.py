"""raise_malloc_thresholds (spark/task/worker_memory.py): a bulk call's large numpy temporaries stop
coming back as fresh pages in the write task's Python worker."""

import platform
import subprocess
import sys

import pytest

# A child process (the thresholds are process-wide): arrays of 1 MiB, one int64 per row of a
# 16 MiB call of 110-byte rows, several alive at once and then freed, as each call does.
CHILD = """
import resource, sys
import numpy as np
from sparkkafka_sink.spark.task.worker_memory import raise_malloc_thresholds
if sys.argv[1] == "raise":
    assert raise_malloc_thresholds() and raise_malloc_thresholds()  # once, then a no-op
x = np.arange(1 << 17, dtype=np.int64)
def one_call():
    a = x << 1
    b = a + x
    c = b * a
    return int(c[-1])
one_call()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    one_call()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, timeout=120, check=True)
    return int(out.stdout.strip())


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt thresholds are glibc's")
def test_raised_thresholds_keep_freed_arrays_in_the_heap():
    untouched, raised = _faults("leave"), _faults("raise")
    assert untouched > 50 * 256, untouched  # every call faults its 1 MiB arrays in afresh
    assert raised < untouched / 20, (raised, untouched)


# The write task raises them unless told not to (no rows: no producer, no broker needed).
TASK = """
import sys
from sparkkafka_sink.spark.task import worker_memory
from sparkkafka_sink.spark.options import parse_options
from sparkkafka_sink.spark.plan import ColumnLayout, WritePlan
from sparkkafka_sink.spark.task.task_info import TaskInfo
from sparkkafka_sink.spark.task.write_task import run_write_task
options = {"kafka.bootstrap.servers": "127.0.0.1:9", "topic": "t", "tuneAllocator": sys.argv[1]}
run_write_task(iter([]), WritePlan(parse_options(options), ColumnLayout("value")), None, TaskInfo(0, 0, 0, attempt_id=1))
print(worker_memory._applied)
"""


@pytest.mark.parametrize("option,applied", [("true", "True"), ("false", "None")])
def test_write_task_raises_them_unless_told_not_to(option, applied):
    if platform.libc_ver()[0] != "glibc" and applied == "True":
        applied = "False"
    out = subprocess.run([sys.executable, "-c", TASK, option], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == applied
