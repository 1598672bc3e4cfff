"""Probe jobs: persisted in the probe store (table `jobs`: the SQLite file, or the PostgreSQL database several
replicas share), run by the settings' executor. `local` runs them one at a time per device slot of this host (each
local GPU, or one CPU slot on a host without), each in its own subprocess with a deadline it enforces itself
(probes.run.run_isolated), so a job that OOMs, crashes or hangs is recorded with its class and the service keeps
serving; `slurm` and `ray` hand them to the cluster's scheduler (api/remote.py, api/executors).

Lifecycle: queued -> running -> done (outcome ok | oom | crash | timeout), or cancelled (DELETE, queued or running),
or interrupted (its probe was gone at a restart and left no result), or failed (a cluster's scheduler refused or lost
it: its state and reason are kept), or queued again (a graceful stop killed its probe within DRAIN_S). An identical
request while one is queued returns that job (coalesced); a sweep's jobs are never coalesced.

Faults lose nothing:
- A running job's probe process group, folder and deadline are in its row. After a restart, the worker
  that takes the slot adopts the slot's running jobs before it claims another: it waits for a live probe
  (to its deadline), then stores the result the probe left in its folder. Two probes never hold one slot.
- Cancelling writes `cancelled` to the row; whichever process runs the job sees it within 0.25 s and kills
  the probe. A record is stored in the same transaction that marks its job done, and only if the job is
  still running then, so a cancelled probe's record is never stored, and no record is stored twice.
- A store error (locked, read-only, unreadable file) never ends a worker: it retries with backoff, the job
  keeps its state, `/healthz` says `degraded` with the error until a write succeeds again. A request waits for the
  store REQUEST_WAIT_S at most, this process's other calls included (then the API answers 503).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
import uuid
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

from api.health import StoreMonitor
from api.remote import RemoteWorkers
from api.schemas import Job, ProbeRequest
from api.workers import SlotWorkers
from planner.evidence import db as sql

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
  id TEXT PRIMARY KEY, status TEXT NOT NULL, outcome TEXT, model TEXT NOT NULL, backend TEXT NOT NULL,
  device TEXT, dedup TEXT NOT NULL, request TEXT NOT NULL, spec TEXT NOT NULL, record_id INTEGER,
  created REAL NOT NULL, started REAL, finished REAL);
CREATE INDEX IF NOT EXISTS jobs_status ON jobs (status, created);
"""
_ADDED = {  # columns newer than the first schema (PostgreSQL: planner.evidence.migrations 3 and 4)
    "pgid": "INTEGER",
    "folder": "TEXT",
    "deadline": "REAL",
    **dict.fromkeys(("host", "executor", "sweep", "scheduler_id", "sched_state", "sched_reason"), "TEXT"),
}
_INSERT = (
    "INSERT INTO jobs (id, status, model, backend, dedup, request, spec, created, sweep, executor) "
    "VALUES (?, 'queued', ?, ?, ?, ?, ?, ?, ?, ?)"
)
REQUEST_WAIT_S = 1.0  # a request's wait for the store, all its calls together
WORKER_WAIT_S = 0.5  # a job worker's wait for one call (then it retries with backoff): dblock is held that long
DRAIN_S = 10.0  # stop(): the running probes killed and their jobs queued again within this
_COLUMNS = (
    "id, status, outcome, model, backend, device, request, record_id, created, started, finished, executor, sweep, "
    "scheduler_id, sched_state AS scheduler_state, sched_reason AS scheduler_reason"
)
_FIELDS = [c.split()[-1] for c in _COLUMNS.split(", ")]  # Job's fields (record_id: its record)


def device_slots() -> list[str]:
    """One slot per local NVIDIA GPU (NVML; in the GPU catalog or not), else one CPU slot."""
    from planner.model.hardware import local_gpu_count

    return [f"cuda:{i}" for i in range(local_gpu_count())] or ["cpu"]


class JobQueue(SlotWorkers, RemoteWorkers):
    def __init__(self, store, timeout_s: int, slots: list[str] | None = None, settings=None) -> None:
        from api.executors import make

        self.where = store if sql.is_url(store) else Path(store)
        self.timeout_s = timeout_s
        self.slots = slots or device_slots()
        self.scheduler = make(settings) if settings is not None else None
        self.outcomes: Counter[str] = Counter()
        self.store_errors = 0
        self.store_error: str | None = None  # the last store error, until a write succeeds again
        state = self._state_dir(settings)
        self.folders = state / f"{self._name}.jobs"  # one folder per running probe
        self.locks = state / self._name  # + .<slot>.lock
        self.shared = Path(settings.shared_dir) if settings and settings.shared_dir else self.folders
        self._wake = threading.Condition()
        self._stop = threading.Event()
        self._procs: dict[str, object] = {}  # running job id -> Popen
        self._threads: list[threading.Thread] = []
        self.dblock = threading.RLock()  # held around every connection to the store (_db)
        self.monitor = StoreMonitor(self)  # the store's state for /healthz and /metrics, read in the background
        state.mkdir(parents=True, exist_ok=True)
        self.shared.mkdir(parents=True, exist_ok=True)
        if sql.is_url(self.where):
            from planner.evidence.store import Store

            Store(self.where, sql.WAIT_S).close()  # the server's schema: its migrations (planner.evidence.migrations)
            return
        with sql.waits(sql.WAIT_S), self._db() as db:  # uvicorn's workers may set up one new file at once
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)
            have = {r[1] for r in db.execute("PRAGMA table_info(jobs)")}
            for col, kind in _ADDED.items():
                if col not in have:
                    db.execute(f"ALTER TABLE jobs ADD COLUMN {col} {kind}")

    @property
    def kind(self) -> str:
        return self.scheduler.kind if self.scheduler is not None else "local"

    def _state_dir(self, settings) -> Path:
        """This host's job folders and slot locks: beside a SQLite store (as before servers), else the settings'
        state_dir or the user data dir, one name per PostgreSQL URL."""
        if not sql.is_url(self.where):
            self._name = self.where.name
            return self.where.parent
        self._name = "pg-" + hashlib.sha256(str(self.where).encode()).hexdigest()[:12]
        if settings is not None and settings.state_dir:
            return Path(settings.state_dir)
        from platformdirs import user_data_dir

        return Path(user_data_dir("memplan")) / "service"

    @contextmanager
    def _db(self):
        """A connection of its own, closed after use, one at a time in this process (_locked). SQLite shares one view
        of a WAL store's shared memory among all of a process's open connections; opened while the files could not be
        written, that view stays read-only while any connection is open, so a busy service that always held one would
        never recover from a moment of read-only store."""
        with self._locked() as wait:
            db = sql.connect(self.where, wait)
            if isinstance(db, sqlite3.Connection):
                db.isolation_level = None  # transactions as the code begins them (BEGIN IMMEDIATE)
            try:
                yield db
            finally:
                db.close()

    @contextmanager
    def _locked(self):
        """dblock, waited for as long as a store call may (a request's deadline, else WORKER_WAIT_S); yields the rest."""
        wait = sql.wait_s(WORKER_WAIT_S)
        if not self.dblock.acquire(timeout=wait):
            raise sql.StoreUnavailable(f"the store is busy: this server's other calls held it for {wait:.1f} s")
        try:
            yield sql.wait_s(WORKER_WAIT_S)
        finally:
            self.dblock.release()

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        """One thread per slot serves the queue (see _serve); with a cluster's scheduler, one thread submits and
        polls (api/remote.py)."""
        self.monitor.start()
        if self.scheduler is not None:
            t = threading.Thread(target=self._serve_remote, name=f"probe-{self.scheduler.kind}", daemon=True)
            t.start()
            self._threads.append(t)
            return
        for slot in self.slots:
            t = threading.Thread(target=self._serve, args=(slot,), name=f"probe-{slot}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self, drain_s: float = DRAIN_S) -> None:
        """Stop serving within drain_s: this process's running probes are killed and their jobs queued again."""
        end = time.monotonic() + drain_s
        self._stop.set()
        self.monitor.stop()
        with self._wake:
            self._wake.notify_all()
        for jid in list(self._procs):
            self._kill(jid)
        for t in self._threads:
            t.join(timeout=max(end - time.monotonic(), 0))

    # -- requests -----------------------------------------------------------------------------
    @sql.waits(REQUEST_WAIT_S)
    def submit(self, req: ProbeRequest, model_name: str, config: dict, knobs, shapes) -> tuple[Job, bool]:
        """(job, created): an identical queued request is returned instead of a new job. knobs and shapes are what
        planner.advise.probe_plan made of the request (the CLI's probe makes the same)."""
        row = self._row(req, model_name, config, knobs, shapes)
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            sql.lock_queue(db)  # PostgreSQL: two replicas never both add one request
            old = db.execute("SELECT id FROM jobs WHERE status='queued' AND dedup=?", (row[3],)).fetchone()
            if old:
                db.execute("COMMIT")
                return self.get(old[0]), False
            db.execute(_INSERT, (*row, None, self.kind))
            db.execute("COMMIT")
        self._notify()
        return self.get(row[0]), True

    @sql.waits(REQUEST_WAIT_S)
    def submit_sweep(self, items: list[tuple]) -> list[Job]:
        """Several probes (request, model name, config, knobs, shapes) queued in one transaction under one sweep id,
        so that a cluster executor claims them together (one Slurm job array). Never coalesced."""
        sweep = uuid.uuid4().hex[:16]
        rows = [self._row(*item) for item in items]
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            for row in rows:
                db.execute(_INSERT, (*row, sweep, self.kind))
            db.execute("COMMIT")
        self._notify()
        return [self.get(row[0]) for row in rows]

    @staticmethod
    def _row(req: ProbeRequest, model_name: str, config: dict, knobs, shapes) -> tuple:
        body = req.model_dump(mode="json")
        body["model"] = model_name
        dedup = json.dumps({"request": {**body, "timeout_s": None}, "config": config}, sort_keys=True)
        spec = {"model": model_name, "config": config, "request": req.model_dump(mode="json")}
        spec |= {"knobs": knobs.model_dump(), "shapes": shapes.model_dump()}
        jid = uuid.uuid4().hex[:16]
        return jid, model_name, req.backend, dedup, json.dumps(body), json.dumps(spec), time.time()

    def _notify(self) -> None:
        with self._wake:
            self._wake.notify_all()
        self.monitor.poke()

    @sql.waits(REQUEST_WAIT_S)
    def get(self, jid: str) -> Job | None:
        with self._db() as db:
            row = db.execute(f"SELECT {_COLUMNS} FROM jobs WHERE id=?", (jid,)).fetchone()
        return self._jobs([row])[0] if row else None

    @sql.waits(REQUEST_WAIT_S)
    def list(self, model: str | None, device: str | None, status: str | None, limit: int) -> list[Job]:
        given = {col: val for col, val in (("model", model), ("device", device), ("status", status)) if val is not None}
        cond, args = [f"{col}=?" for col in given], list(given.values())
        where = ("WHERE " + " AND ".join(cond)) if cond else ""
        with self._db() as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM jobs {where} ORDER BY created DESC LIMIT ?", (*args, limit)
            ).fetchall()
        return self._jobs(rows)

    @sql.waits(REQUEST_WAIT_S)
    def depth(self) -> int:
        with self._db() as db:
            return db.execute("SELECT COUNT(*) FROM jobs WHERE status='queued'").fetchone()[0]

    @sql.waits(REQUEST_WAIT_S)
    def cancel(self, jid: str) -> Job | None:
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            row = db.execute(f"SELECT status, scheduler_id FROM jobs WHERE id=?{sql.for_update(db)}", (jid,)).fetchone()
            if row is None:
                db.execute("COMMIT")
                return None
            if row[0] in ("queued", "running"):
                db.execute("UPDATE jobs SET status='cancelled', finished=? WHERE id=?", (time.time(), jid))
            db.execute("COMMIT")
        self._kill(jid)  # this process's probe at once; another process's sees the row (_cancelled)
        self.monitor.poke()
        if self.scheduler is not None and row[0] == "running" and row[1] and not row[1].startswith("?"):
            self.scheduler.cancel([row[1]])  # and every poller again while the scheduler says it is live
        return self.get(jid)

    def _kill(self, jid: str) -> None:
        from probes.run import kill_group

        proc = self._procs.get(jid)
        if proc is not None and proc.poll() is None:
            kill_group(proc.pid)

    @sql.waits(REQUEST_WAIT_S)
    def _cancelled(self, jid: str) -> bool:
        try:
            with self._db() as db:
                row = db.execute("SELECT status FROM jobs WHERE id=?", (jid,)).fetchone()
        except sql.errors():
            return False  # unreadable for now: the probe runs on, and the next poll asks again
        # rows are never deleted: a missing row is a read that did not see the WAL (an immutable -shm
        # can give one), not a cancel; taking it for one killed a running probe and left its job running
        return row is not None and row[0] == "cancelled"

    def _jobs(self, rows: list[tuple]) -> list[Job]:
        """Jobs from table rows, each with its probe record when done (one store opened per call)."""
        from planner.evidence.store import Store

        with self._locked() as wait:
            store = Store(self.where, wait) if any(r[7] is not None for r in rows) else None
            try:
                return [self._job(row, store) for row in rows]
            finally:
                if store is not None:
                    store.close()

    @staticmethod
    def _job(row: tuple, store) -> Job:
        f = dict(zip(_FIELDS, row))
        rid, sid = f.pop("record_id"), f["scheduler_id"]
        rec = store.get(rid) if rid is not None else None
        f["record"] = rec.model_dump(mode="json", exclude={"detail": {"segments"}}) if rec is not None else None
        f |= {"request": json.loads(f["request"]), "executor": f["executor"] or "local"}
        f |= {"scheduler_id": None if sid is None or sid.startswith("?") else sid}
        return Job(**f | {"scheduler_reason": f["scheduler_reason"] or None})
