"""Issue 51 item 2, its SIGTERM part, against a real `planner serve`: a graceful stop ends within a bounded time, kills
the probe it was running and queues its job again (it used to mark it `interrupted`, and nothing ran it again); the
next start on the same store runs it, and it ends with one record and no duplicate job."""

import os
import signal
import sqlite3
import time

from tests.api.conftest import Server, probe_pids, records, wait_for, wait_job

PROBE = {"model": "debug-llama", "micro_batch": 1, "seq_len": 32, "backend": "sim", "inject_fault": "slow"}
STOP_BOUND_S = 15  # the job queue's drain (api/jobs.py DRAIN_S, 10 s) and uvicorn's own shutdown


def job_row(store, jid: str) -> tuple:
    with sqlite3.connect(store) as db:
        return db.execute("SELECT status, device, started, pgid, folder FROM jobs WHERE id=?", (jid,)).fetchone()


def test_sigterm_queues_the_running_probe_again_and_the_next_start_runs_it_once(tmp_path):
    store = tmp_path / "store.sqlite"
    s = Server(store).start()
    try:
        c = s.client()
        jid = c.post("/v1/probes", json=PROBE).json()["id"]  # slow: 4 s before its probe's work
        wait_job(c, jid, done=("running",))
        wait_for(lambda: probe_pids(store), "the probe to start", timeout_s=30)
        t0 = time.perf_counter()
        s.proc.send_signal(signal.SIGTERM)  # the server's process alone, as a supervisor stops it
        s.proc.wait(timeout=STOP_BOUND_S + 15)
        stopped_s = time.perf_counter() - t0
    finally:
        try:
            os.killpg(s.proc.pid, signal.SIGKILL)  # whatever of its group is left (nothing, when it passes)
        except ProcessLookupError:
            pass
    assert stopped_s < STOP_BOUND_S, stopped_s
    assert probe_pids(store) == []  # the probe was killed, not left to run without its server
    assert job_row(store, jid) == ("queued", None, None, None, None)  # as before it was claimed
    assert not (tmp_path / "store.sqlite.jobs" / jid).exists()
    s2 = Server(store).start()
    try:
        c2 = s2.client()
        job = wait_job(c2, jid, timeout_s=120)
        assert job["status"] == "done" and job["outcome"] == "ok", job
        assert records(store) == 1
        assert [j["id"] for j in c2.get("/v1/probes").json()] == [jid]  # no duplicate job
    finally:
        s2.kill()
    print(f"SIGTERM to exit: {stopped_s:.2f} s; the job queued again, then done with record {job['record']['id']}")
