"""Issue 51 items 4 and 6, against a real uvicorn (a TestClient would hide the timing): a store that is corrupt, locked
or unreachable answers 503 with a one-line reason and Retry-After within 2 s on every endpoint that touches it, where
it used to answer 500 or hang for a minute; /healthz answers within 1 s whatever the store does (and says degraded
within a few), even while every thread that serves requests waits for the store; `planner serve` on a bad store says
one line and exits."""

import os
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import contextmanager

import pytest

from tests.api.conftest import ROOT, Server, wait_for, wait_job

PROBE = {"model": "debug-llama", "micro_batch": 1, "seq_len": 32, "backend": "sim"}
PLAN = {"model": "gpt2", "gpu": "h100", "gpus_per_node": 1, "global_batch": 8, "seq_len": 512}
FAST = {**PROBE, "inject_fault": "oom"}  # a job that ends at once, with a record
CHECK = {"model": "gpt2", "gpu": "h100", "gpus_per_node": 1, "seq_len": 512, "micro_batch": 1, "grad_accum": 8}
ANSWER_S, HEALTH_S = 2.0, 1.0  # the bounds


def endpoints(jid: str) -> list[tuple[str, str, dict | None, bool]]:
    """(method, path, body, writes) of every endpoint that reads or writes the store: the job endpoints, and plans that
    read calibration records (evidence auto, the default) or must write one (sim evidence: the store is checked
    writable first)."""
    return [
        ("POST", "/v1/probes", {**PROBE, "seq_len": 40}, True),
        ("POST", "/v1/probes/sweep", {"probes": [{**PROBE, "seq_len": 48}]}, True),
        ("GET", "/v1/probes", None, False),
        ("GET", f"/v1/probes/{jid}", None, False),
        ("DELETE", f"/v1/probes/{jid}", None, True),
        ("POST", "/v1/plans", PLAN, False),
        ("POST", "/v1/check", CHECK, False),
        ("POST", "/v1/plans", {**PLAN, "evidence": "sim"}, True),
    ]


def timed(client, method: str, path: str, body=None):
    t0 = time.perf_counter()
    r = client.request(method, path, json=body)
    seconds = time.perf_counter() - t0
    SLOWEST[r.status_code] = max(SLOWEST.get(r.status_code, 0), seconds)
    return r, seconds


SLOWEST: dict[int, float] = {}  # status -> the slowest answer with it, printed by each test (-s)


def said(what: str) -> None:
    print(f"{what}: slowest " + ", ".join(f"{k}: {v:.3f} s" for k, v in sorted(SLOWEST.items())))
    SLOWEST.clear()


def assert_unavailable(r, seconds: float, what) -> None:
    assert r.status_code == 503, (what, r.status_code, r.text[:300])
    detail = r.json()["detail"]
    assert isinstance(detail, str) and "\n" not in detail and detail.startswith("the probe store is unavailable: ")
    assert r.headers["retry-after"].isdigit()
    assert seconds < ANSWER_S, (what, seconds)


def health_within(client, status: str, reason: str = "", timeout_s: float = 5) -> dict:
    """Poll /healthz until it says `status` with a reason that starts so (the monitor reads the store every second);
    each answer within 1 s."""
    deadline = time.monotonic() + timeout_s
    while True:
        r, seconds = timed(client, "GET", "/healthz")
        assert r.status_code == 200 and seconds < HEALTH_S, seconds
        h = r.json()
        if (h["status"] == status and (h["reason"] or "").startswith(reason)) or time.monotonic() > deadline:
            assert h["status"] == status and (h["reason"] or "").startswith(reason), h
            return h
        time.sleep(0.2)


@contextmanager
def write_locked(store):
    """Another process's exclusive lock on the store, held open (BEGIN EXCLUSIVE: in WAL mode readers still read)."""
    db = sqlite3.connect(store, timeout=10, isolation_level=None)
    db.execute("BEGIN EXCLUSIVE")
    try:
        yield
    finally:
        db.execute("ROLLBACK")
        db.close()


def corrupt(store, content: bytes) -> None:
    for suffix in ("", "-wal", "-shm"):
        path = store.with_name(store.name + suffix)
        if path.exists():
            path.write_bytes(content)


@pytest.mark.parametrize("content", [b"", b"not a database\n" * 100], ids=["0-byte", "text"])
def test_a_corrupt_store_answers_503_on_every_endpoint_and_health_says_degraded(tmp_path, content):
    s = Server(tmp_path / "store.sqlite").start()
    try:
        c = s.client()
        jid = wait_job(c, c.post("/v1/probes", json=FAST).json()["id"])["id"]
        wait_for(lambda: health_within(c, "ok")["queue_depth"] == 0, "the monitor to read the queue empty", 5)
        corrupt(s.store, content)
        for method, path, body, writes in endpoints(jid):
            if writes and not content and path == "/v1/plans":
                continue  # a sim plan would trace gpt2 into the empty database (below)
            r, seconds = timed(c, method, path, body)
            if content or path.startswith("/v1/probes"):
                assert_unavailable(r, seconds, (method, path, body))
            else:  # to SQLite a 0-byte file is an empty database: a plan reads no records there
                assert r.status_code in (200, 503) and seconds < ANSWER_S, (path, r.status_code, seconds)
        # 0-byte: the job workers' writes fail at once; a read may still see the WAL's pages for a while
        health = health_within(c, "degraded", "the store cannot be read: " if content else "the store cannot be")
        assert "\n" not in health["reason"] and health["store_read_age_s"] < 3
        if content:
            assert health["queue_depth"] is None and "memplan_probe_queue_depth NaN" in c.get("/metrics").text
        assert 'route="/v1/probes",status="503"' in c.get("/metrics").text
        said(f"{len(content)}-byte store ({health['reason']})")
    finally:
        s.kill()


def test_a_locked_store_answers_503_to_writes_and_health_never_waits(tmp_path):
    s = Server(tmp_path / "store.sqlite").start()
    try:
        c = s.client()
        jid = wait_job(c, c.post("/v1/probes", json=FAST).json()["id"])["id"]
        with write_locked(s.store):
            for method, path, body, writes in endpoints(jid):
                r, seconds = timed(c, method, path, body)
                if writes:
                    assert_unavailable(r, seconds, (method, path, body))
                else:  # WAL readers never wait for a writer
                    assert r.status_code == 200 and seconds < ANSWER_S, (path, r.status_code, seconds)

            def write():
                with s.client() as w:
                    w.post("/v1/probes", json=PROBE)

            # 48 writes at once: every thread of the request pool waits for the store; /healthz does not
            writers = [threading.Thread(target=write) for _ in range(48)]
            for w in writers:
                w.start()
            time.sleep(0.3)
            slowest = max(timed(c, "GET", "/healthz")[1] for _ in range(5))
            for w in writers:
                w.join()
            assert slowest < HEALTH_S, slowest
        assert c.post("/v1/probes", json={**PROBE, "seq_len": 64}).status_code == 202  # the lock gone: writes again
        assert health_within(c, "ok")["reason"] is None
        said(f"locked store (/healthz beside 48 waiting writes: {slowest:.3f} s)")
    finally:
        s.kill()


def test_an_unreachable_postgresql_store_answers_503(tmp_path):
    pytest.importorskip("psycopg", reason="psycopg not installed (the test extra installs it)")
    from tests.engines.postgres import PgServer, missing

    if why := missing():
        pytest.skip(why)
    pg = PgServer().start()
    s = Server(pg.url, env={"MEMPLAN_STATE_DIR": str(tmp_path / "state")})
    try:
        s.start()
        c = s.client()
        jid = wait_job(c, c.post("/v1/probes", json=FAST).json()["id"])["id"]
        pg.stop()  # its port closed: every connection is refused
        for method, path, body, _ in endpoints(jid):
            assert_unavailable(*timed(c, method, path, body), (method, path, body))
        assert "Connection refused" in health_within(c, "degraded", "the store cannot be read: ")["reason"]
        said("unreachable PostgreSQL")
    finally:
        s.kill()
        pg.stop()


def serve(*args: str, env: dict | None = None) -> tuple[subprocess.CompletedProcess, float]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MEMPLAN_")} | (env or {})
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "planner.cli", "serve", "--port", "1", *args]
    r = subprocess.run(cmd, check=False, env=environ, cwd=ROOT, capture_output=True, text=True, timeout=120)
    return r, time.perf_counter() - t0


@pytest.mark.parametrize("how", ["flag", "env", "postgresql"])
def test_start_up_on_a_bad_store_is_one_line(tmp_path, how):
    """It printed uvicorn's 40-line traceback of the factory's error."""
    bad = tmp_path / "bad.sqlite"
    bad.write_text("not a database\n" * 100)
    if how == "flag":
        r, seconds = serve("--store", str(bad))
    elif how == "env":
        r, seconds = serve(env={"MEMPLAN_STORE": str(bad)})
    else:
        r, seconds = serve("--store", "postgresql://memplan:s3cret@127.0.0.1:1/memplan")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("planner: error: --store "), r.stderr
    assert "s3cret" not in r.stderr and "Traceback" not in r.stderr
    assert ("file is not a database" if how != "postgresql" else "cannot open as a probe store") in lines[0]
    print(f"{how}: {seconds:.2f} s: {lines[0]}")
