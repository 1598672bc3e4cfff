"""The job queue's slot workers (api/jobs.py's JobQueue runs one thread per device slot on them): claim a
queued job, run its probe (probes.run.run_isolated, with the job's folder and deadline in its row), adopt
the jobs a dead holder of the slot left running, and store each result with its job's end in one
transaction, retrying with backoff while the store fails; on a graceful stop, queue again the jobs whose probes
the stop killed (_requeue). JobQueue holds the state these methods use
(_db, _locked, folders, slots, timeout_s, _stop, _wake, _procs, outcomes, store_error(s)).
"""

from __future__ import annotations

import json
import logging
import shutil
import socket
import time
from pathlib import Path

from planner.evidence import db as sql

BACKOFF_S = (0.25, 0.5, 1, 2, 4, 8)
REQUEUE_S = 3.0  # a stopping worker's tries to queue its job again (the stop's drain bounds the whole)
_QUEUED = "status='queued', device=NULL, host=NULL, started=NULL, pgid=NULL, folder=NULL, deadline=NULL"


class SlotWorkers:
    def _claim(self, slot: str) -> tuple[str, dict] | None:
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            lock = sql.for_update(db, skip_locked=True)  # PostgreSQL: replicas claim different jobs at once
            row = db.execute(
                f"SELECT id, spec FROM jobs WHERE status='queued' ORDER BY created LIMIT 1{lock}"
            ).fetchone()
            if row:
                db.execute(
                    "UPDATE jobs SET status='running', device=?, host=?, executor='local', started=? WHERE id=?",
                    (slot, socket.gethostname(), time.time(), row[0]),
                )
            db.execute("COMMIT")
        return (row[0], json.loads(row[1])) if row else None

    def _retry(self, what, *args):
        """what(*args), retried with backoff while the store fails; None if the queue stops first."""
        from planner.errors import BadInput  # the store refusing to open

        for attempt in range(10**9):
            try:
                out = what(*args)
            except (*sql.errors(), OSError, BadInput) as e:
                self.store_errors += 1
                self.store_error = sql.reason(e)  # one line: /healthz says it
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

        f = open(self.locks.with_name(self.locks.name + f".{slot.replace(':', '')}.lock"), "w")  # noqa: SIM115
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
            return db.execute(  # this host's: another replica's slot of the same name is its own
                "SELECT id, spec, pgid, folder, deadline FROM jobs WHERE status='running' AND device=? "
                "AND (host IS NULL OR host=?) AND (executor IS NULL OR executor='local')",
                (slot, socket.gethostname()),
            ).fetchall()

    def _serve(self, slot: str) -> None:
        lock = self._lock_slot(slot)
        if lock is None:
            return
        for orphan in self._retry(self._orphans, slot) or []:
            try:
                self._adopt(*orphan)
            except Exception:  # an unreadable result: the job is interrupted, the slot goes on
                logging.getLogger("memplan.jobs").exception("adopting probe job %s", orphan[0])
                self._interrupt(orphan[0])
        self._retry(self._sweep)
        while not self._stop.is_set():
            claimed = self._retry(self._claim, slot)
            if claimed is None:
                with self._wake:
                    self._wake.wait(timeout=0.5)
                continue
            self.monitor.poke()  # one fewer queued
            try:
                self._run(slot, *claimed)
            except Exception:
                logging.getLogger("memplan.jobs").exception("probe job %s", claimed[0])
                self._stop.wait(1)

    def _run(self, slot: str, jid: str, spec: dict) -> None:
        from planner.config.spec import Knobs
        from planner.evidence.store import Shapes
        from probes.run import kill_group, run_isolated

        r = spec["request"]
        knobs, shapes = Knobs(**spec["knobs"]), Shapes(**spec["shapes"])
        env = {"MEMPLAN_PROBE_FAULT": r["inject_fault"] or ""}
        if slot.startswith("cuda:"):
            env["CUDA_VISIBLE_DEVICES"] = slot.split(":")[1]
        timeout = self._timeout(spec)
        folder = self.folders / jid

        def started(proc, deadline: float) -> None:
            self._procs[jid] = proc
            if self._stop.is_set():  # the stop ran before this probe was known to it: stopped here
                kill_group(proc.pid)
            self._retry(
                self._write,
                "UPDATE jobs SET pgid=?, folder=?, deadline=? WHERE id=?",
                (proc.pid, str(folder), deadline, jid),
            )

        rec = run_isolated(
            spec["model"],
            spec["config"],
            knobs,
            shapes,
            r["backend"],
            timeout,
            env=env,
            on_start=started,
            folder=folder,
            cancelled=lambda: self._stop.is_set() or self._cancelled(jid),
        )
        self._procs.pop(jid, None)
        if self._stop.is_set() and rec.status in ("cancelled", "crash"):  # the stop killed it: the job did not fail
            self._requeue(jid, folder)
            return
        self._finish(jid, rec, folder)

    def _adopt(self, jid: str, spec_json: str, pgid: int | None, folder: str | None, deadline: float | None) -> None:
        """A job the dead holder of this slot left running: wait for its probe (still ours if its process
        group runs probes.run on this job's folder), to its deadline, then finish the job with what it left."""
        from probes.run import kill_group

        spec = json.loads(spec_json)
        if pgid is None or folder is None:  # died before its probe started: nothing ran
            self._interrupt(jid)
            return
        stopped = None
        while _runs_probe(pgid, folder):
            if time.time() >= deadline + 5:  # its own watchdog failed: the deadline still holds
                stopped = "timeout"
            elif self._stop.is_set():
                stopped = "stopping"
            elif self._cancelled(jid):
                stopped = "cancelled"
            if stopped:
                kill_group(pgid)
                break
            time.sleep(0.25)
        if stopped == "stopping":
            self._requeue(jid, Path(folder))
            return
        if stopped is None and not (Path(folder) / "result.json").is_file() and time.time() >= deadline:
            stopped = "timeout"
        if self._stop.is_set():
            return  # it ended by itself meanwhile: its result is left to the next holder of the slot
        rec = self._outcome(spec, Path(folder), None, stopped)
        if rec.status == "crash":  # gone with no result and no exit status: it was interrupted
            self._interrupt(jid)
            shutil.rmtree(folder, ignore_errors=True)
            return
        self._finish(jid, rec, Path(folder))

    def _sweep(self) -> None:
        """Remove the folders of jobs no longer running (a kill between a job's end and its folder's removal)."""
        if not self.folders.is_dir():
            return
        with self._db() as db:
            running = {r[0] for r in db.execute("SELECT id FROM jobs WHERE status='running'")}
        for d in self.folders.iterdir():  # not one just made for a job another slot claimed after the query
            if d.name not in running and time.time() - d.stat().st_mtime > 60:
                shutil.rmtree(d, ignore_errors=True)

    def _interrupt(self, jid: str) -> None:
        """A running job whose probe was lost, or that the service stopped: interrupted (retried as any write)."""
        self._retry(
            self._write,
            "UPDATE jobs SET status='interrupted', finished=? WHERE id=? AND status='running'",
            (time.time(), jid),
        )

    def _requeue(self, jid: str, folder: Path) -> None:
        """A running job whose probe the service's stop killed: queued again, as it was before it was claimed, so the
        next start runs it. Tried for REQUEUE_S though the queue stops; if the store refuses that long, the job stays
        running and the next holder of the slot finds its probe gone (interrupted)."""
        end = time.monotonic() + REQUEUE_S
        while True:
            try:
                self._write(f"UPDATE jobs SET {_QUEUED} WHERE id=? AND status='running'", (jid,))
                break
            except (*sql.errors(), sql.StoreUnavailable) as e:
                if time.monotonic() >= end:
                    logging.getLogger("memplan.jobs").warning("probe job %s not queued again: %s", jid, e)
                    return
                time.sleep(0.25)
        shutil.rmtree(folder, ignore_errors=True)

    def _write(self, sql: str, args: tuple) -> int:
        """One statement; the rows it changed."""
        with self._db() as db:
            return db.execute(sql, args).rowcount

    def _timeout(self, spec: dict) -> int:
        """A job's time limit: its request's, at most the service's."""
        return min(spec["request"]["timeout_s"] or self.timeout_s, self.timeout_s)

    def _outcome(self, spec: dict, folder: Path, returncode: int | None, stopped: str | None):
        """The record of a job's probe that ended outside this process (adopted here, or run by a cluster's
        scheduler) from what it left in its folder (probes.run.outcome)."""
        from planner.config.spec import Knobs
        from planner.evidence.store import Shapes
        from probes.run import outcome

        knobs, shapes = Knobs(**spec["knobs"]), Shapes(**spec["shapes"])
        args = (spec["model"], spec["config"], knobs, shapes, spec["request"]["backend"])
        return outcome(folder, *args, returncode, stopped, None, self._timeout(spec))

    def _finish(self, jid: str, rec, folder: Path) -> None:
        """Store the record and mark the job done in one transaction, only while the job is running (a
        cancelled job's record is dropped); retried while the store fails; then the folder goes."""
        stored = self._retry(self._store_if_running, jid, rec)
        if stored is None:
            return  # stopping: the job stays running, its folder and result stay for adoption
        if stored:
            self.outcomes[rec.status] += 1
        shutil.rmtree(folder, ignore_errors=True)

    def _store_if_running(self, jid: str, rec) -> bool:
        from planner.evidence.store import Store

        with self._locked() as wait:
            return self._store_locked(jid, rec, Store(self.where, wait))

    def _store_locked(self, jid: str, rec, store) -> bool:
        try:
            db = store.db
            db.execute("BEGIN IMMEDIATE")
            try:
                row = db.execute(f"SELECT status FROM jobs WHERE id=?{sql.for_update(db)}", (jid,)).fetchone()
                if row is None or row[0] != "running":
                    db.execute("ROLLBACK")
                    return False
                if rec.status == "cancelled":  # stopped while its row says running: no record, not left running
                    db.execute("UPDATE jobs SET status='interrupted', finished=? WHERE id=?", (time.time(), jid))
                    db.execute("COMMIT")
                    return False
                rid = store.insert(rec)
                db.execute(
                    "UPDATE jobs SET status='done', outcome=?, record_id=?, finished=? WHERE id=?",
                    (rec.status, rid, time.time(), jid),
                )
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            return True
        finally:
            store.close()


def _runs_probe(pgid: int, folder: str) -> bool:
    """Whether process `pgid` is alive and is the probe of this folder (not a reused pid)."""
    try:
        cmdline = Path(f"/proc/{pgid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"probes.run" in cmdline and any(folder.encode() in part for part in cmdline)
