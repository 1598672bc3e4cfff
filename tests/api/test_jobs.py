"""The job queue's row logic on a real SQLite store, without a server: what a worker reads as a cancel,
and what it writes when a probe ends (the server-level faults are in test_faults.py)."""

import threading
import time

import pytest

from api.jobs import REQUEST_WAIT_S, JobQueue
from planner.config.spec import Knobs
from planner.evidence.db import StoreUnavailable
from planner.evidence.store import Shapes, Store, make_record


def queue_with(tmp_path, **statuses) -> JobQueue:
    q = JobQueue(tmp_path / "s.sqlite", 60, slots=["cpu"])
    with q._db() as db:
        for jid, status in statuses.items():
            db.execute(
                "INSERT INTO jobs (id, status, model, backend, dedup, request, spec, created) "
                "VALUES (?, ?, 'm', 'sim', ?, '{}', '{}', ?)",
                (jid, status, jid, time.time()),
            )
    return q


def record(status: str):
    return make_record(
        "m", {"model_type": "m"}, Knobs(), Shapes(micro_batch=1, grad_accum=1, seq_len=8), "sim", status, "d"
    )


def status_of(q: JobQueue, jid: str) -> str:
    with q._db() as db:
        return db.execute("SELECT status FROM jobs WHERE id=?", (jid,)).fetchone()[0]


def test_only_a_cancelled_row_is_a_cancel(tmp_path):
    """CI (stop 39): a read that missed the job's row (an immutable -shm) was taken for a cancel, the slow
    probe was killed, and its job stayed running for good."""
    q = queue_with(tmp_path, run="running", gone="cancelled")
    assert (q._cancelled("run"), q._cancelled("gone"), q._cancelled("missing")) == (False, True, False)


def test_a_probe_stopped_while_its_row_runs_ends_interrupted_without_a_record(tmp_path):
    q = queue_with(tmp_path, a="running", b="running", c="cancelled")
    assert q._store_if_running("a", record("cancelled")) is False
    assert q._store_if_running("b", record("ok")) is True
    assert q._store_if_running("c", record("ok")) is False  # a cancelled job's record is dropped
    assert [status_of(q, j) for j in "abc"] == ["interrupted", "done", "cancelled"]
    store = Store(tmp_path / "s.sqlite")
    try:
        assert [r.status for r in store._rows("", ())] == ["ok"]
    finally:
        store.close()


def test_a_request_waits_for_this_process_s_store_calls_one_second_at_most(tmp_path):
    """Issue 51: every store call of a process waits behind one lock (dblock); a worker that held it while the store
    was locked held every request for 30 s. A request now gives up in REQUEST_WAIT_S: a 503 (StoreUnavailable)."""
    q = queue_with(tmp_path, a="queued")
    held, done = threading.Event(), threading.Event()

    def hold():
        with q.dblock:
            held.set()
            done.wait(10)

    threading.Thread(target=hold, daemon=True).start()
    held.wait(5)
    t0 = time.perf_counter()
    with pytest.raises(StoreUnavailable, match="the store is busy"):
        q.depth()
    assert REQUEST_WAIT_S <= time.perf_counter() - t0 < REQUEST_WAIT_S + 0.5
    done.set()
    assert q.depth() == 1


def test_a_job_the_stop_killed_is_queued_again_as_before_its_claim(tmp_path):
    q = queue_with(tmp_path, a="running", c="cancelled")
    with q._db() as db:
        db.execute("UPDATE jobs SET device='cpu', host='h', started=1, pgid=2, folder='f', deadline=3 WHERE id='a'")
    folder = tmp_path / "s.sqlite.jobs" / "a"
    folder.mkdir(parents=True)
    q._requeue("a", folder)
    q._requeue("c", tmp_path / "none")  # a cancelled job stays cancelled
    with q._db() as db:
        row = db.execute("SELECT status, device, host, started, pgid, folder, deadline FROM jobs WHERE id='a'")
        assert row.fetchone() == ("queued", None, None, None, None, None, None)
    assert status_of(q, "c") == "cancelled" and not folder.exists()
