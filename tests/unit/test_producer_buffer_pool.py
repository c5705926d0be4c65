"""BufferPool: bounded memory, FIFO waiters, max.block.ms honoured."""

import threading
import time

import pytest

from sparkkafka_sink.errors import BufferExhaustedError, RecordTooLargeError
from sparkkafka_sink.producer.buffer_pool import BufferPool


def test_allocate_and_free():
    pool = BufferPool(1000)
    pool.allocate(600, 0)
    assert pool.available_memory == 400
    pool.deallocate(600)
    assert pool.available_memory == 1000


def test_blocks_up_to_max_block_then_raises_clearly():
    pool = BufferPool(1000)
    pool.allocate(900, 0)
    t = time.monotonic()
    with pytest.raises(BufferExhaustedError, match=r"Failed to allocate 200 bytes within .* 150 ms \(max.block.ms\)"):
        pool.allocate(200, 150)
    assert 0.14 <= time.monotonic() - t < 2


def test_waiter_is_released_by_deallocate():
    pool = BufferPool(1000)
    pool.allocate(1000, 0)
    done = threading.Event()

    def waiter():
        pool.allocate(500, 5000)
        done.set()

    th = threading.Thread(target=waiter)
    th.start()
    time.sleep(0.05)
    assert not done.is_set() and pool.queued == 1
    pool.deallocate(500)
    assert done.wait(2)
    th.join()


def test_larger_than_pool_fails_at_once():
    with pytest.raises(RecordTooLargeError, match="buffer.memory is only 100 bytes"):
        BufferPool(100).allocate(101, 10_000)
