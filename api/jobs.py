"""Probe jobs: persisted in the probe store's SQLite file (table `jobs`), run one at a time per device
slot (each local GPU, or one CPU slot on a host without), each in its own subprocess with a timeout
(probes.run.run_isolated), so a job that OOMs, crashes or hangs is recorded with its class and the
service keeps serving.

Lifecycle: queued -> running -> done (outcome ok | oom | crash | timeout), or cancelled (DELETE, queued
or running: the probe's process group is killed), or interrupted (the service died while it ran: set
at the next start, when queued jobs resume). An identical request while one is queued returns that
job (coalesced).
"""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

from api.schemas import Job, ProbeRequest

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
  id TEXT PRIMARY KEY, status TEXT NOT NULL, outcome TEXT, model TEXT NOT NULL, backend TEXT NOT NULL,
  device TEXT, dedup TEXT NOT NULL, request TEXT NOT NULL, spec TEXT NOT NULL, record_id INTEGER,
  created REAL NOT NULL, started REAL, finished REAL);
CREATE INDEX IF NOT EXISTS jobs_status ON jobs (status, created);
"""
_COLUMNS = "id, status, outcome, model, backend, device, request, record_id, created, started, finished"


def device_slots() -> list[str]:
    """One slot per local NVIDIA GPU (NVML; in the GPU catalog or not), else one CPU slot."""
    from planner.hardware import local_gpu_count

    return [f"cuda:{i}" for i in range(local_gpu_count())] or ["cpu"]


class JobQueue:
    def __init__(self, db_path: Path, store_path: Path | None, timeout_s: int, slots: list[str] | None = None) -> None:
        self.db_path, self.store_path, self.timeout_s = Path(db_path), store_path, timeout_s
        self.slots = slots or device_slots()
        self.outcomes: Counter[str] = Counter()
        self._wake = threading.Condition()
        self._stop = threading.Event()
        self._procs: dict[str, object] = {}     # running job id -> Popen
        self._cancelled: set[str] = set()
        self._threads: list[threading.Thread] = []
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        with self._db() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)

    def _db(self) -> sqlite3.Connection:
        return sqlite3.connect(self.db_path, timeout=30, isolation_level=None)

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        """One thread per slot serves the queue (see _serve)."""
        for slot in self.slots:
            t = threading.Thread(target=self._serve, args=(slot,), name=f"probe-{slot}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        self._stop.set()
        with self._wake:
            self._wake.notify_all()
        for jid in list(self._procs):
            self._kill(jid)
        for t in self._threads:
            t.join(timeout=5)

    # -- requests -----------------------------------------------------------------------------
    def submit(self, req: ProbeRequest, model_name: str, config: dict, knobs, shapes) -> tuple[Job, bool]:
        """(job, created): an identical queued request is returned instead of a new job. knobs and shapes
        are what planner.advise.probe_plan made of the request (the CLI's probe makes the same)."""
        body = req.model_dump(mode="json")
        body["model"] = model_name
        dedup = json.dumps({"request": {**body, "timeout_s": None}, "config": config}, sort_keys=True)
        spec = json.dumps({"model": model_name, "config": config, "request": req.model_dump(mode="json"),
                           "knobs": knobs.model_dump(), "shapes": shapes.model_dump()})
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            row = db.execute("SELECT id FROM jobs WHERE status='queued' AND dedup=?", (dedup,)).fetchone()
            if row:
                db.execute("COMMIT")
                return self.get(row[0]), False
            jid = uuid.uuid4().hex[:16]
            db.execute("INSERT INTO jobs (id, status, model, backend, dedup, request, spec, created) "
                       "VALUES (?, 'queued', ?, ?, ?, ?, ?, ?)",
                       (jid, model_name, req.backend, dedup, json.dumps(body), spec, time.time()))
            db.execute("COMMIT")
        with self._wake:
            self._wake.notify_all()
        return self.get(jid), True

    def get(self, jid: str) -> Job | None:
        with self._db() as db:
            row = db.execute(f"SELECT {_COLUMNS} FROM jobs WHERE id=?", (jid,)).fetchone()
        return self._jobs([row])[0] if row else None

    def list(self, model: str | None, device: str | None, status: str | None, limit: int) -> list[Job]:
        cond, args = [], []
        for col, val in (("model", model), ("device", device), ("status", status)):
            if val is not None:
                cond.append(f"{col}=?")
                args.append(val)
        where = ("WHERE " + " AND ".join(cond)) if cond else ""
        with self._db() as db:
            rows = db.execute(f"SELECT {_COLUMNS} FROM jobs {where} ORDER BY created DESC LIMIT ?",
                              (*args, limit)).fetchall()
        return self._jobs(rows)

    def depth(self) -> int:
        with self._db() as db:
            return db.execute("SELECT COUNT(*) FROM jobs WHERE status='queued'").fetchone()[0]

    def cancel(self, jid: str) -> Job | None:
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            row = db.execute("SELECT status FROM jobs WHERE id=?", (jid,)).fetchone()
            if row is None:
                db.execute("COMMIT")
                return None
            if row[0] in ("queued", "running"):
                db.execute("UPDATE jobs SET status='cancelled', finished=? WHERE id=?", (time.time(), jid))
                self._cancelled.add(jid)
            db.execute("COMMIT")
        self._kill(jid)
        return self.get(jid)

    def _kill(self, jid: str) -> None:
        proc = self._procs.get(jid)
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    # -- workers ------------------------------------------------------------------------------
    def _claim(self, slot: str) -> tuple[str, dict] | None:
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            row = db.execute("SELECT id, spec FROM jobs WHERE status='queued' ORDER BY created LIMIT 1").fetchone()
            if row:
                db.execute("UPDATE jobs SET status='running', device=?, started=? WHERE id=?", (slot, time.time(), row[0]))
            db.execute("COMMIT")
        return (row[0], json.loads(row[1])) if row else None

    def _lock_slot(self, slot: str):
        """An exclusive lock file per slot, so that one process (of several uvicorn workers) runs a
        slot's jobs; the OS releases it when that process dies. On taking it, jobs left running on the
        slot were the dead holder's: they become interrupted."""
        import fcntl

        f = open(self.db_path.with_name(self.db_path.name + f".{slot.replace(':', '')}.lock"), "w")  # noqa: SIM115
        while not self._stop.is_set():
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self._stop.wait(0.5)
                continue
            with self._db() as db:
                db.execute("UPDATE jobs SET status='interrupted', finished=? WHERE status='running' AND device=?",
                           (time.time(), slot))
            return f
        f.close()
        return None

    def _serve(self, slot: str) -> None:
        lock = self._lock_slot(slot)
        if lock is None:
            return
        while not self._stop.is_set():
            claimed = self._claim(slot)
            if claimed is None:
                with self._wake:
                    self._wake.wait(timeout=0.5)
                continue
            self._run(slot, *claimed)

    def _run(self, slot: str, jid: str, spec: dict) -> None:
        from planner.spec import Knobs
        from planner.store import Shapes, Store
        from probes.run import run_isolated

        r = spec["request"]
        knobs, shapes = Knobs(**spec["knobs"]), Shapes(**spec["shapes"])
        env = {"MEMPLAN_PROBE_FAULT": r["inject_fault"] or ""}
        if slot.startswith("cuda:"):
            env["CUDA_VISIBLE_DEVICES"] = slot.split(":")[1]
        timeout = min(r["timeout_s"] or self.timeout_s, self.timeout_s)
        rec = run_isolated(spec["model"], spec["config"], knobs, shapes, r["backend"], timeout, env=env,
                           on_start=lambda p: self._procs.__setitem__(jid, p))
        self._procs.pop(jid, None)
        if jid in self._cancelled:
            return
        store = Store(self.store_path)
        try:
            rid = store.add(rec)
        finally:
            store.close()
        self.outcomes[rec.status] += 1
        with self._db() as db:
            db.execute("UPDATE jobs SET status='done', outcome=?, record_id=?, finished=? WHERE id=? AND status='running'",
                       (rec.status, rid, time.time(), jid))

    def _jobs(self, rows: list[tuple]) -> list[Job]:
        """Jobs from table rows, each with its probe record when done (one store opened per call)."""
        from planner.store import Store

        store = Store(self.store_path) if any(r[7] is not None for r in rows) else None
        try:
            return [self._job(row, store) for row in rows]
        finally:
            if store is not None:
                store.close()

    @staticmethod
    def _job(row: tuple, store) -> Job:
        jid, status, outcome, model, backend, device, request, record_id, created, started, finished = row
        record = None
        rec = store.get(record_id) if record_id is not None else None
        if rec is not None:
            record = rec.model_dump(mode="json")
            record["detail"] = {k: v for k, v in record["detail"].items() if k != "segments"}
        return Job(id=jid, status=status, outcome=outcome, model=model, backend=backend, device=device,
                   request=json.loads(request), record=record, created=created, started=started, finished=finished)
