"""Probe jobs: persisted in the probe store's SQLite file (table `jobs`), run one at a time per device
slot (each local GPU, or one CPU slot on a host without), each in its own subprocess with a deadline it
enforces itself (probes.run.run_isolated), so a job that OOMs, crashes or hangs is recorded with its class
and the service keeps serving.

Lifecycle: queued -> running -> done (outcome ok | oom | crash | timeout), or cancelled (DELETE, queued
or running), or interrupted (its probe was gone at a restart and left no result, or it was stopped with
no cancel in its row). An identical request while one is queued returns that job (coalesced).

Faults lose nothing:
- A running job's probe process group, folder and deadline are in its row. After a restart, the worker
  that takes the slot adopts the slot's running jobs before it claims another: it waits for a live probe
  (to its deadline), then stores the result the probe left in its folder. Two probes never hold one slot.
- Cancelling writes `cancelled` to the row; whichever process runs the job sees it within 0.25 s and kills
  the probe. A record is stored in the same transaction that marks its job done, and only if the job is
  still running then, so a cancelled probe's record is never stored, and no record is stored twice.
- A store error (locked, read-only, unreadable file) never ends a worker: it retries with backoff, the job
  keeps its state, `/healthz` says `degraded` with the error until a write succeeds again.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

from api.schemas import Job, ProbeRequest
from api.workers import SlotWorkers

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
  id TEXT PRIMARY KEY, status TEXT NOT NULL, outcome TEXT, model TEXT NOT NULL, backend TEXT NOT NULL,
  device TEXT, dedup TEXT NOT NULL, request TEXT NOT NULL, spec TEXT NOT NULL, record_id INTEGER,
  created REAL NOT NULL, started REAL, finished REAL);
CREATE INDEX IF NOT EXISTS jobs_status ON jobs (status, created);
"""
_ADDED = {"pgid": "INTEGER", "folder": "TEXT", "deadline": "REAL"}  # columns newer than the first schema
_COLUMNS = "id, status, outcome, model, backend, device, request, record_id, created, started, finished"


def device_slots() -> list[str]:
    """One slot per local NVIDIA GPU (NVML; in the GPU catalog or not), else one CPU slot."""
    from planner.model.hardware import local_gpu_count

    return [f"cuda:{i}" for i in range(local_gpu_count())] or ["cpu"]


class JobQueue(SlotWorkers):
    def __init__(self, db_path: Path, store_path: Path | None, timeout_s: int, slots: list[str] | None = None) -> None:
        self.db_path, self.store_path, self.timeout_s = Path(db_path), store_path, timeout_s
        self.slots = slots or device_slots()
        self.outcomes: Counter[str] = Counter()
        self.store_errors = 0
        self.store_error: str | None = None  # the last store error, until a write succeeds again
        self.folders = self.db_path.with_name(self.db_path.name + ".jobs")  # one folder per running probe
        self._wake = threading.Condition()
        self._stop = threading.Event()
        self._procs: dict[str, object] = {}  # running job id -> Popen
        self._threads: list[threading.Thread] = []
        self.dblock = threading.RLock()  # held around every connection to the store (_db)
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        with self._db() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)
            have = {r[1] for r in db.execute("PRAGMA table_info(jobs)")}
            for col, kind in _ADDED.items():
                if col not in have:
                    db.execute(f"ALTER TABLE jobs ADD COLUMN {col} {kind}")

    @contextmanager
    def _db(self):
        """A connection of its own, closed after use, one at a time in this process. SQLite shares one
        view of a WAL store's shared memory among all of a process's open connections; opened while the
        files could not be written, that view stays read-only while any connection is open, so a busy
        service that always held one would never recover from a moment of read-only store."""
        with self.dblock:
            db = sqlite3.connect(self.db_path, timeout=30, isolation_level=None)
            try:
                yield db
            finally:
                db.close()

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
        spec = json.dumps(
            {
                "model": model_name,
                "config": config,
                "request": req.model_dump(mode="json"),
                "knobs": knobs.model_dump(),
                "shapes": shapes.model_dump(),
            }
        )
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            row = db.execute("SELECT id FROM jobs WHERE status='queued' AND dedup=?", (dedup,)).fetchone()
            if row:
                db.execute("COMMIT")
                return self.get(row[0]), False
            jid = uuid.uuid4().hex[:16]
            db.execute(
                "INSERT INTO jobs (id, status, model, backend, dedup, request, spec, created) "
                "VALUES (?, 'queued', ?, ?, ?, ?, ?, ?)",
                (jid, model_name, req.backend, dedup, json.dumps(body), spec, time.time()),
            )
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
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM jobs {where} ORDER BY created DESC LIMIT ?", (*args, limit)
            ).fetchall()
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
            db.execute("COMMIT")
        self._kill(jid)  # this process's probe at once; another process's sees the row (_cancelled)
        return self.get(jid)

    def _kill(self, jid: str) -> None:
        from probes.run import kill_group

        proc = self._procs.get(jid)
        if proc is not None and proc.poll() is None:
            kill_group(proc.pid)

    def _cancelled(self, jid: str) -> bool:
        try:
            with self._db() as db:
                row = db.execute("SELECT status FROM jobs WHERE id=?", (jid,)).fetchone()
        except sqlite3.Error:
            return False  # unreadable for now: the probe runs on, and the next poll asks again
        # rows are never deleted: a missing row is a read that did not see the WAL (an immutable -shm
        # can give one), not a cancel; taking it for one killed a running probe and left its job running
        return row is not None and row[0] == "cancelled"

    def healthy(self) -> tuple[bool, str | None]:
        return self.store_error is None, self.store_error

    def _jobs(self, rows: list[tuple]) -> list[Job]:
        """Jobs from table rows, each with its probe record when done (one store opened per call)."""
        from planner.evidence.store import Store

        with self.dblock:
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
        return Job(
            id=jid,
            status=status,
            outcome=outcome,
            model=model,
            backend=backend,
            device=device,
            request=json.loads(request),
            record=record,
            created=created,
            started=started,
            finished=finished,
        )
