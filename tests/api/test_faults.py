"""Issue 20, faults lose nothing, against a real uvicorn and real SQLite files: a probe that finished while
its server was dead is adopted and stored once; the job worker outlives a store it cannot write;
cancellation reaches the probe from any worker process; and a chaos test of kill -9 at random points."""

import os
import random
import re
import shutil
import signal
import subprocess
import threading
import time

import pytest

from tests.api.conftest import Server, httpx, probe_pids, records, wait_job

PROBE = {"model": "debug-llama", "micro_batch": 1, "seq_len": 32, "backend": "sim"}


def test_a_probe_that_finished_while_its_server_was_dead_is_adopted_and_stored_once(tmp_path):
    s = Server(tmp_path / "store.sqlite").start()
    c = s.client()
    jid = c.post("/v1/probes", json={**PROBE, "inject_fault": "slow"}).json()["id"]
    wait_job(c, jid, done=("running",))
    time.sleep(0.5)
    s.kill(signal.SIGKILL)
    deadline = time.monotonic() + 60
    while probe_pids(s.store) and time.monotonic() < deadline:  # it finishes with no server
        time.sleep(0.2)
    assert (s.store.parent / "store.sqlite.jobs" / jid / "result.json").is_file()
    s2 = Server(s.store).start()
    try:
        job = wait_job(s2.client(), jid)
        assert job["status"] == "done" and job["outcome"] == "ok" and job["record"]["peak_allocated_bytes"] > 0
        assert records(s.store) == 1
        assert not (s.store.parent / "store.sqlite.jobs" / jid).exists()  # its folder is gone
    finally:
        s2.kill()


def _state(c, jid: str) -> str:
    """A job's status, or "unreadable" where the store cannot be read: CI's run of stop 66 got the 503 that names the
    store (an immutable WAL index fails a read too), with its Retry-After, where the job's row was asked for."""
    r = c.get(f"/v1/probes/{jid}")
    if r.status_code == 503:
        assert r.json()["detail"].startswith("the probe store is unavailable: ") and r.headers["retry-after"], r.text
        return "unreadable"
    return r.json()["status"]


@pytest.mark.skipif(shutil.which("chattr") is None, reason="needs chattr")
def test_the_worker_outlives_a_store_it_cannot_write_and_health_says_so(tmp_path):
    """Issue 20: with the store immutable for a few seconds, _claim raised in the worker thread, which died;
    the jobs stayed queued while /healthz said ok."""
    s = Server(tmp_path / "store.sqlite").start()
    c = s.client()
    slow = c.post("/v1/probes", json={**PROBE, "inject_fault": "slow"}).json()["id"]
    wait_job(c, slow, done=("running",))
    jid = c.post("/v1/probes", json={**PROBE, "seq_len": 48}).json()["id"]  # queued behind it
    files = [
        p
        for p in (s.store, s.store.with_name(s.store.name + "-wal"), s.store.with_name(s.store.name + "-shm"))
        if p.exists()
    ]
    if subprocess.run(["chattr", "+i", *map(str, files)], capture_output=True, check=False).returncode:
        s.kill()
        pytest.skip("chattr +i is refused here")
    try:
        try:
            # the slow probe sleeps 4 s once its process starts (importing torch: over 20 s on a loaded machine), then writes
            deadline = time.monotonic() + 90
            health = c.get("/healthz").json()
            while health["status"] == "ok" and time.monotonic() < deadline:
                time.sleep(0.2)
                health = c.get("/healthz").json()
            # an immutable WAL index can fail a read too (SQLite: "locking protocol"): either way, said
            assert health["status"] == "degraded" and re.search(r"cannot be (written|read)", health["reason"]), health
            assert _state(c, slow) in ("running", "unreadable")  # each job keeps its state
            assert _state(c, jid) in ("queued", "unreadable")
            assert "memplan_store_errors_total 0" not in c.get("/metrics").text
        finally:
            subprocess.run(["chattr", "-i", *map(str, files)], check=True)
        assert wait_job(c, slow, timeout_s=60)["outcome"] == "ok"  # its result was kept, then stored
        assert wait_job(c, jid, timeout_s=60)["outcome"] == "ok"  # the same worker goes on
        assert records(s.store) == 2
        assert c.get("/healthz").json()["status"] == "ok"
    except (AssertionError, KeyError, httpx.TransportError) as e:  # with the server's log (stops 39, 55, 66 left none)
        alive = s.proc.poll() is None
        s.kill()
        log = s.proc.stderr.read().decode()[-4000:]
        raise AssertionError(f"{e!r}\nserver alive: {alive}\nserver stderr:\n{log}") from None
    finally:
        s.kill()  # whatever failed above: no server outlives the test


def test_a_cancel_answered_by_another_worker_kills_the_probe_and_stores_nothing(tmp_path):
    """Issue 20: with --workers 2, DELETE answered 'cancelled' while the probe ran on, and its record was
    then stored as evidence. Four tries, as the issue's."""
    s = Server(tmp_path / "store.sqlite", args=("--workers", "2")).start()
    try:
        for _ in range(4):
            c = s.client()  # a new connection each try: either worker may answer
            jid = c.post("/v1/probes", json={**PROBE, "inject_fault": "slow"}).json()["id"]
            wait_job(c, jid, done=("running",))
            # the row says running once claimed, before the probe's process starts (slow on a loaded machine)
            deadline = time.monotonic() + 15
            while not probe_pids(s.store) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert len(probe_pids(s.store)) == 1
            assert s.client().delete(f"/v1/probes/{jid}").json()["status"] == "cancelled"
            deadline = time.monotonic() + 5
            while probe_pids(s.store) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert probe_pids(s.store) == []
        time.sleep(5)  # past the slow probe's 4 s: nothing it did is stored later
        assert records(s.store) == 0
        assert {j["status"] for j in s.client().get("/v1/probes").json()} == {"cancelled"}
    finally:
        s.kill()


# 20 rounds (issue 29, the full tier; 116 s on 2 cores); `make test-fast` sets fewer
ROUNDS = int(os.environ.get("MEMPLAN_CHAOS_ROUNDS", "20"))


def test_chaos_kill_9_at_random_points_loses_nothing_and_runs_nothing_twice(tmp_path):
    """ROUNDS rounds: queue probes, kill -9 the server at a random moment of a job's life, restart. At the end no
    probe is orphaned, every job finished (done, or interrupted when it died before its probe started),
    every done job has its own record and the store holds no other, and a sampler never saw two probes on
    the one slot."""
    store = tmp_path / "store.sqlite"
    chaos(store, lambda: Server(store), lambda: probe_pids(store), one_slot=True)


def chaos(store, make_server, pids, one_slot: bool = False) -> None:
    rng = random.Random(20)
    seen_two, stop = [], threading.Event()

    def sample():
        while not stop.is_set():
            if len(pids()) > 1:
                seen_two.append(time.monotonic())
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    jobs, t0 = [], time.monotonic()
    try:
        for i in range(ROUNDS):
            s = make_server().start()
            c = s.client()
            fault = rng.choice([None, None, "slow"])
            jobs.append(c.post("/v1/probes", json={**PROBE, "seq_len": 32 + i, "inject_fault": fault}).json()["id"])
            time.sleep(rng.uniform(0, 3))
            s.kill(signal.SIGKILL)
        s = make_server().start()
        c = s.client()
        final = [wait_job(c, j, timeout_s=90) for j in jobs]
        s.kill()
    finally:
        stop.set()
        sampler.join()
    # a bound against a hang, not a speed target: 166 s alone on 2 cores, 221 s beside another pytest worker
    assert time.monotonic() - t0 < 360
    assert pids() == []
    assert not (one_slot and seen_two)
    done = [j for j in final if j["status"] == "done"]
    assert {j["status"] for j in final} <= {"done", "interrupted"}
    assert all(j["outcome"] == "ok" for j in done)
    ids = [j["record"]["id"] for j in done]
    assert len(set(ids)) == len(ids) == records(store)
    print(
        f"chaos: {ROUNDS} rounds in {time.monotonic() - t0:.0f} s; {len(done)} done, "
        f"{len(final) - len(done)} interrupted, {records(store)} records"
    )
