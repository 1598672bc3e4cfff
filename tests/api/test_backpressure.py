"""Probe jobs' back-pressure (api/backpressure.py): the queue's cap and a client's rate, each a 429 with Retry-After
before anything is queued; a real JobQueue on a SQLite store counts what is queued."""

import time

import pytest
from fastapi import HTTPException

from api.backpressure import Rate, admit
from api.jobs import JobQueue


@pytest.fixture
def queue(tmp_path):
    return JobQueue(tmp_path / "store.sqlite", timeout_s=60, slots=["cpu"])  # never started: nothing runs a job


def test_the_queue_cap_refuses_what_would_pass_it(queue):
    admit(queue, Rate(60), "10.0.0.1", 3, max_queued=3)
    with pytest.raises(HTTPException) as e:
        admit(queue, Rate(60), "10.0.0.1", 4, max_queued=3)
    assert e.value.status_code == 429 and e.value.headers["Retry-After"] == "60"
    assert "queues at most 3" in e.value.detail


def test_a_clients_rate_refills_with_time_and_spares_other_clients(queue):
    rate = Rate(per_minute=120)  # two a second
    for _ in range(120):
        admit(queue, rate, "10.0.0.1", 1, max_queued=1000)
    with pytest.raises(HTTPException) as e:
        admit(queue, rate, "10.0.0.1", 1, max_queued=1000)
    assert e.value.status_code == 429 and int(e.value.headers["Retry-After"]) == 1
    admit(queue, rate, "10.0.0.2", 1, max_queued=1000)  # another client's bucket is full
    time.sleep(0.6)
    admit(queue, rate, "10.0.0.1", 1, max_queued=1000)  # half a second gave one back


def test_a_sweep_larger_than_a_minutes_rate_is_refused_whole(queue):
    with pytest.raises(HTTPException, match="at most 5 a minute"):
        admit(queue, Rate(5), "10.0.0.1", 6, max_queued=1000)
