"""Probe jobs: persisted in the probe store's SQLite file (table `jobs`), run one at a time per device
slot (each local GPU, or one CPU slot on a host without), each in its own subprocess with a deadline it
enforces itself (probes.run.run_isolated), so a job that OOMs, crashes or hangs is recorded with its class
and the service keeps serving.

Lifecycle: queued -> running -> done (outcome ok | oom | crash | timeout), or cancelled (DELETE, queued
or running), or interrupted (its probe was gone at a restart and left no result). An identical request
while one is queued returns that job (coalesced).

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
import logging
import shutil
import sqlite3
import threading
import time
import uuid
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

from api.schemas import Job, ProbeRequest

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
  id TEXT PRIMARY KEY, status TEXT NOT NULL, outcome TEXT, model TEXT NOT NULL, backend TEXT NOT NULL,
  device TEXT, dedup TEXT NOT NULL, request TEXT NOT NULL, spec TEXT NOT NULL, record_id INTEGER,
  created REAL NOT NULL, started REAL, finished REAL);
CREATE INDEX IF NOT EXISTS jobs_status ON jobs (status, created);
"""
_ADDED = {"pgid": "INTEGER", "folder": "TEXT", "deadline": "REAL"}     # columns newer than the first schema
BACKOFF_S = (0.25, 0.5, 1, 2, 4, 8)
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
        self.store_errors = 0
        self.store_error: str | None = None     # the last store error, until a write succeeds again
        self.folders = self.db_path.with_name(self.db_path.name + ".jobs")     # one folder per running probe
        self._wake = threading.Condition()
        self._stop = threading.Event()
        self._procs: dict[str, object] = {}     # running job id -> Popen
        self._threads: list[threading.Thread] = []
        self.dblock = threading.RLock()     # held around every connection to the store (_db)
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
            db.execute("COMMIT")
        self._kill(jid)         # this process's probe at once; another process's sees the row (_cancelled)
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
            return False        # unreadable for now: the probe runs on, and the next poll asks again
        return row is None or row[0] == "cancelled"

    def healthy(self) -> tuple[bool, str | None]:
        return self.store_error is None, self.store_error

    # -- workers ------------------------------------------------------------------------------
    def _claim(self, slot: str) -> tuple[str, dict] | None:
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            row = db.execute("SELECT id, spec FROM jobs WHERE status='queued' ORDER BY created LIMIT 1").fetchone()
            if row:
                db.execute("UPDATE jobs SET status='running', device=?, started=? WHERE id=?", (slot, time.time(), row[0]))
            db.execute("COMMIT")
        return (row[0], json.loads(row[1])) if row else None

    def _retry(self, what, *args):
        """what(*args), retried with backoff while the store fails; None if the queue stops first."""
        from planner.errors import BadInput  # the store refusing to open

        for attempt in range(10**9):
            try:
                out = what(*args)
            except (sqlite3.Error, OSError, BadInput) as e:
                self.store_errors += 1
                self.store_error = f"{e.__class__.__name__}: {e}"
                if self._stop.wait(BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)]):
                    return None
                continue
            self.store_error = None
            return out
        return None

    def _lock_slot(self, slot: str):
        """An exclusive lock file per slot, so that one process (of several uvicorn workers) runs a
        slot's jobs; the OS releases it when that process dies. On taking it, the jobs left running on
        the slot were the dead holder's: they are adopted (_adopt) before any other job is claimed."""
        import fcntl

        f = open(self.db_path.with_name(self.db_path.name + f".{slot.replace(':', '')}.lock"), "w")  # noqa: SIM115
        while not self._stop.is_set():
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self._stop.wait(0.5)
                continue
            return f
        f.close()
        return None

    def _orphans(self, slot: str) -> list[tuple]:
        with self._db() as db:
            return db.execute("SELECT id, spec, pgid, folder, deadline FROM jobs WHERE status='running' AND device=?",
                              (slot,)).fetchall()

    def _serve(self, slot: str) -> None:
        lock = self._lock_slot(slot)
        if lock is None:
            return
        for orphan in self._retry(self._orphans, slot) or []:
            self._adopt(*orphan)
        while not self._stop.is_set():
            claimed = self._retry(self._claim, slot)
            if claimed is None:
                with self._wake:
                    self._wake.wait(timeout=0.5)
                continue
            try:
                self._run(slot, *claimed)
            except Exception:
                logging.getLogger("memplan.jobs").exception("probe job %s", claimed[0])
                self._stop.wait(1)

    def _run(self, slot: str, jid: str, spec: dict) -> None:
        from planner.spec import Knobs
        from planner.store import Shapes
        from probes.run import run_isolated

        r = spec["request"]
        knobs, shapes = Knobs(**spec["knobs"]), Shapes(**spec["shapes"])
        env = {"MEMPLAN_PROBE_FAULT": r["inject_fault"] or ""}
        if slot.startswith("cuda:"):
            env["CUDA_VISIBLE_DEVICES"] = slot.split(":")[1]
        timeout = min(r["timeout_s"] or self.timeout_s, self.timeout_s)
        folder = self.folders / jid

        def started(proc, deadline: float) -> None:
            self._procs[jid] = proc
            self._retry(self._write, "UPDATE jobs SET pgid=?, folder=?, deadline=? WHERE id=?",
                        (proc.pid, str(folder), deadline, jid))
        rec = run_isolated(spec["model"], spec["config"], knobs, shapes, r["backend"], timeout, env=env,
                           on_start=started, folder=folder, cancelled=lambda: self._cancelled(jid))
        self._procs.pop(jid, None)
        if self._stop.is_set():     # the service stopped and killed its probes: the job did not fail
            self._retry(self._write, "UPDATE jobs SET status='interrupted', finished=? WHERE id=? AND status='running'",
                        (time.time(), jid))
            shutil.rmtree(folder, ignore_errors=True)
            return
        self._finish(jid, rec, folder)

    def _adopt(self, jid: str, spec_json: str, pgid: int | None, folder: str | None, deadline: float | None) -> None:
        """A job the dead holder of this slot left running: wait for its probe (still ours if its process
        group runs probes.run on this job's folder), to its deadline, then finish the job with what it left."""
        from planner.spec import Knobs
        from planner.store import Shapes
        from probes.run import kill_group, outcome

        spec = json.loads(spec_json)
        if pgid is None or folder is None:      # died before its probe started: nothing ran
            self._retry(self._write, "UPDATE jobs SET status='interrupted', finished=? WHERE id=? AND status='running'",
                        (time.time(), jid))
            return
        stopped = None
        while _runs_probe(pgid, folder):
            if time.time() >= deadline + 5:     # its own watchdog failed: the deadline still holds
                stopped = "timeout"
            elif self._cancelled(jid) or self._stop.is_set():
                stopped = "cancelled"
            if stopped:
                kill_group(pgid)
                break
            time.sleep(0.25)
        if stopped is None and not (Path(folder) / "result.json").is_file() and time.time() >= deadline:
            stopped = "timeout"
        if self._stop.is_set():
            return              # leave it to the next holder of the slot
        r = spec["request"]
        rec = outcome(Path(folder), spec["model"], spec["config"], Knobs(**spec["knobs"]), Shapes(**spec["shapes"]),
                      r["backend"], None, stopped, None, min(r["timeout_s"] or self.timeout_s, self.timeout_s))
        if rec.status == "crash":       # gone with no result and no exit status: it was interrupted
            self._retry(self._write, "UPDATE jobs SET status='interrupted', finished=? WHERE id=? AND status='running'",
                        (time.time(), jid))
            shutil.rmtree(folder, ignore_errors=True)
            return
        self._finish(jid, rec, Path(folder))

    def _write(self, sql: str, args: tuple) -> None:
        with self._db() as db:
            db.execute(sql, args)

    def _finish(self, jid: str, rec, folder: Path) -> None:
        """Store the record and mark the job done in one transaction, only while the job is running (a
        cancelled job's record is dropped); retried while the store fails; then the folder goes."""
        stored = self._retry(self._store_if_running, jid, rec)
        if stored is None:
            return              # stopping: the job stays running, its folder and result stay for adoption
        if stored:
            self.outcomes[rec.status] += 1
        shutil.rmtree(folder, ignore_errors=True)

    def _store_if_running(self, jid: str, rec) -> bool:
        from planner.store import Store

        with self.dblock:
            return self._store_locked(jid, rec, Store(self.store_path))

    def _store_locked(self, jid: str, rec, store) -> bool:
        try:
            db = store.db
            db.execute("BEGIN IMMEDIATE")
            try:
                row = db.execute("SELECT status FROM jobs WHERE id=?", (jid,)).fetchone()
                if row is None or row[0] != "running" or rec.status == "cancelled":
                    db.execute("ROLLBACK")
                    return False
                rid = store.insert(rec)
                db.execute("UPDATE jobs SET status='done', outcome=?, record_id=?, finished=? WHERE id=?",
                           (rec.status, rid, time.time(), jid))
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            return True
        finally:
            store.close()

    def _jobs(self, rows: list[tuple]) -> list[Job]:
        """Jobs from table rows, each with its probe record when done (one store opened per call)."""
        from planner.store import Store

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
        return Job(id=jid, status=status, outcome=outcome, model=model, backend=backend, device=device,
                   request=json.loads(request), record=record, created=created, started=started, finished=finished)


def _runs_probe(pgid: int, folder: str) -> bool:
    """Whether process `pgid` is alive and is the probe of this folder (not a reused pid)."""
    try:
        cmdline = Path(f"/proc/{pgid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"probes.run" in cmdline and any(folder.encode() in part for part in cmdline)
