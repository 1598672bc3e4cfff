"""The planning workers (api/sandbox.py) on real worker processes: a call past its deadline or whose client left
has its worker killed and replaced, a call past the memory limit ends in OverMemory (the worker replaced), an
error comes back as itself, and the heavy slots refuse a second expensive call while one runs."""

import operator
import threading
import time

import pytest

from api.sandbox import Busy, Deadline, OverMemory, Pool
from planner.errors import UnknownName
from planner.model import catalog


@pytest.fixture
def pool():
    p = Pool(processes=1, memory_mib=512, heavy=1)
    p.start()
    yield p
    p.stop()


def pid(pool: Pool) -> int:
    (w,) = pool._all
    return w.proc.pid


def test_a_call_comes_back_with_its_value_or_its_error(pool):
    assert pool.run(operator.add, (2, 3), deadline_s=30) == 5
    with pytest.raises(ValueError, match="invalid literal"):
        pool.run(int, ("x",), deadline_s=30)
    with pytest.raises(UnknownName, match="not a bundled model") as e:  # the core's error keeps its field
        pool.run(catalog.load_model, ("no-such-model",), deadline_s=30)
    assert e.value.field == "model"


def test_past_its_deadline_the_worker_is_killed_and_replaced(pool):
    pool.run(operator.add, (1, 1), deadline_s=30)
    first = pid(pool)
    t0 = time.monotonic()
    with pytest.raises(Deadline):
        pool.run(time.sleep, (60,), deadline_s=1)
    assert time.monotonic() - t0 < 3
    assert pid(pool) != first
    assert pool.run(operator.add, (2, 2), deadline_s=30) == 4  # the successor serves


def test_a_client_that_left_stops_its_call(pool):
    left = threading.Event()
    threading.Timer(0.5, left.set).start()
    t0 = time.monotonic()
    with pytest.raises(Deadline, match="left"):
        pool.run(time.sleep, (60,), deadline_s=60, left=left)
    assert time.monotonic() - t0 < 3


def test_past_the_memory_limit_the_call_ends_and_the_worker_is_replaced(pool):
    with pytest.raises(OverMemory):
        pool.run(bytearray, (1024 * 1024 * 1024,), deadline_s=30)  # 1 GiB under a 512 MiB limit
    assert pool.run(len, (bytearray(10 * 1024 * 1024),), deadline_s=30) == 10 * 1024 * 1024


def test_the_heavy_slots_refuse_a_second_expensive_call(pool):
    big = Pool(processes=2, memory_mib=512, heavy=1)
    try:
        t = threading.Thread(target=lambda: big.run(time.sleep, (2,), deadline_s=30, heavy=True))
        t.start()
        time.sleep(0.5)
        with pytest.raises(Busy, match="heavy"):
            big.run(time.sleep, (0,), deadline_s=30, heavy=True)
        assert big.run(operator.add, (1, 2), deadline_s=30) == 3  # a plain call still runs
        t.join()
    finally:
        big.stop()
