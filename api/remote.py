"""The job queue on a cluster's scheduler (issue 36; api/executors): one thread per API process claims queued jobs
(a sweep's together, as one Slurm job array), writes each job's folder where the nodes read it, submits them, and
polls the scheduler for the running jobs of every replica, finishing each in one transaction with its record.

The guarantees of api/jobs.py hold across kill -9 of any API process at any moment:
- A claimed job's row names its submission before `sbatch` runs (scheduler_id `?<name>_<index>`); a row still so
  named later is looked up by that name (api/executors: find) and gets its real id, or is interrupted if the
  scheduler never took it. A submission whose row was cancelled meanwhile is cancelled at once.
- A job ends once: its record is stored in the transaction that marks it done, only while it is still running
  (api/workers.py _store_if_running; in PostgreSQL the row is read FOR UPDATE), whichever replica polls it.
- A cancelled job's scheduler job is cancelled by the DELETE's process and again by any poller while the scheduler
  still says it is live, so nothing is left running.
- A job the scheduler lost (node failure, preemption, a cancel the API did not ask for) is `failed`, with the
  scheduler's state and reason; a time limit is a `timeout` record, as on this host.
"""

from __future__ import annotations

import json
import logging
import shutil
import socket
import subprocess
import time
from pathlib import Path

from api.executors import State, Submission
from planner.evidence import db as sql

FIND_AFTER_S = 20  # a row still `?`-named this long after its claim: its submitter died (sbatch takes < 1 s)
POLL_S = 1.0


class RemoteWorkers:
    def _serve_remote(self) -> None:
        while not self._stop.is_set():
            claimed = self._retry(self._claim_batch)
            if claimed:
                self._submit(*claimed)
                continue
            self._retry(self._poll)
            with self._wake:
                self._wake.wait(timeout=POLL_S)

    def _claim_batch(self) -> tuple[str, list[tuple[str, dict]]] | None:
        """The oldest queued job, with every queued job of its sweep: running, named for their submission."""
        kind = self.scheduler.kind
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            lock = sql.for_update(db, skip_locked=True)
            row = db.execute(
                f"SELECT id, sweep FROM jobs WHERE status='queued' ORDER BY created, id LIMIT 1{lock}"
            ).fetchone()
            if row is None:
                db.execute("COMMIT")
                return None
            jid, sweep = row
            if sweep:
                rows = db.execute(
                    f"SELECT id, spec FROM jobs WHERE status='queued' AND sweep=? ORDER BY created, id{lock}", (sweep,)
                ).fetchall()
            else:
                rows = db.execute(f"SELECT id, spec FROM jobs WHERE id=?{lock}", (jid,)).fetchall()
            name = f"memplan-{sweep or jid}"
            now, host = time.time(), socket.gethostname()
            for i, (rid, _) in enumerate(rows):
                folder = self.shared / rid
                db.execute(
                    "UPDATE jobs SET status='running', executor=?, device=?, host=?, started=?, folder=?, "
                    "scheduler_id=?, sched_state='SUBMITTING' WHERE id=?",
                    (kind, kind, host, now, str(folder), f"?{name}_{i}", rid),
                )
            db.execute("COMMIT")
        return name, [(rid, json.loads(spec)) for rid, spec in rows]

    def _submit(self, name: str, jobs: list[tuple[str, dict]]) -> None:
        from probes.run import write_job

        subs = []
        for jid, spec in jobs:
            folder = self.shared / jid
            write_job(folder, spec, deadline=None, adoptable=True)
            fault = spec["request"]["inject_fault"] or ""
            subs.append(Submission(jid, folder, self._timeout(spec), {"MEMPLAN_PROBE_FAULT": fault}))
        try:
            ids = self.scheduler.submit(subs, name)
        except (
            RuntimeError,
            OSError,
            subprocess.SubprocessError,
        ) as e:  # refused (no such partition, too many GPUs) or unreachable: the jobs fail, said why
            reason = str(e).strip() or e.__class__.__name__
            for sub in subs:
                self._fail(sub.jid, "REFUSED", reason)
            return
        for sub, sid in zip(subs, ids):
            self._record_id(sub.jid, sid)

    def _record_id(self, jid: str, sid: str) -> None:
        """The scheduler's id into the row; a row no longer running (cancelled meanwhile) cancels the submission."""

        written = self._retry(
            self._write,
            "UPDATE jobs SET scheduler_id=?, sched_state='PENDING' WHERE id=? AND status='running'",
            (sid, jid),
        )
        if written == 0:
            self.scheduler.cancel([sid])
            self._retry(self._write, "UPDATE jobs SET scheduler_id=? WHERE id=?", (sid, jid))

    def _poll(self) -> None:
        kind = self.scheduler.kind
        with self._db() as db:
            running = db.execute(
                "SELECT id, spec, folder, scheduler_id, started, sched_state FROM jobs "
                "WHERE status='running' AND executor=?",
                (kind,),
            ).fetchall()
            stale = db.execute(
                "SELECT id, scheduler_id FROM jobs WHERE status='cancelled' AND executor=? AND scheduler_id IS NOT NULL "
                "AND (sched_state IS NULL OR sched_state != 'ENDED')",
                (kind,),
            ).fetchall()
        self._find_unnamed([r for r in running if r[3] and r[3].startswith("?")])
        named = [r for r in running if r[3] and not r[3].startswith("?")]
        states = self.scheduler.states([r[3] for r in named] + [s for _, s in stale if not s.startswith("?")])
        for jid, spec, folder, sid, _, known in named:
            st = states.get(sid)
            if st is None:
                continue  # not known to the scheduler right now (a moment between controller and accounting)
            if st.terminal:
                self._end(jid, json.loads(spec), Path(folder), st)
            elif st.state != known:
                self._retry(
                    self._write,
                    "UPDATE jobs SET sched_state=?, sched_reason=? WHERE id=? AND status='running'",
                    (st.state, st.reason, jid),
                )
        for jid, sid in stale:  # cancelled rows whose scheduler job may still run
            st = states.get(sid)
            if sid.startswith("?"):
                self._find_unnamed([(jid, None, None, sid, 0, None)], cancelled=True)
            elif st is None or st.terminal:
                self._retry(self._write, "UPDATE jobs SET sched_state='ENDED' WHERE id=?", (jid,))
            else:
                self.scheduler.cancel([sid])

    def _find_unnamed(self, rows: list[tuple], cancelled: bool = False) -> None:
        """Rows claimed by a process that died around its submission: their scheduler ids by name, else interrupted
        (the scheduler never took them), once FIND_AFTER_S has passed since the claim."""
        for jid, _, _, marker, started, _ in rows:
            if not cancelled and time.time() - (started or 0) < FIND_AFTER_S:
                continue
            name, _, index = marker[1:].rpartition("_")
            found = self.scheduler.find(name)  # an array's tasks are `<id>_<index>`; a single job's id has no index
            sid = next((f for f in found if _task_index(f) == int(index)), None)
            if sid is not None:
                self._record_id(jid, sid) if not cancelled else self.scheduler.cancel([sid])
            elif cancelled:
                self._retry(self._write, "UPDATE jobs SET sched_state='ENDED' WHERE id=?", (jid,))
            else:
                self._interrupt(jid)

    def _end(self, jid: str, spec: dict, folder: Path, st: State) -> None:
        """A job the scheduler says ended: its probe's record (ok, oom, crash, timeout), or failed if it was lost."""
        if st.lost and not (folder / "result.json").is_file():
            self._fail(jid, st.state, st.reason)
            return
        rec = self._outcome(spec, folder, st.returncode, "timeout" if st.timeout else None)
        rec.detail["scheduler"] = {"executor": self.scheduler.kind, "state": st.state, "reason": st.reason}
        self._retry(self._write, "UPDATE jobs SET sched_state=?, sched_reason=? WHERE id=?", (st.state, st.reason, jid))
        self._finish(jid, rec, folder)

    def _fail(self, jid: str, state: str, reason: str) -> None:
        """Lost or refused by the scheduler: failed, no record (nothing was measured), the scheduler's words kept."""
        self._retry(
            self._write,
            "UPDATE jobs SET status='failed', sched_state=?, sched_reason=?, finished=? WHERE id=? AND status='running'",
            (state, reason[:500], time.time(), jid),
        )
        shutil.rmtree(self.shared / jid, ignore_errors=True)
        logging.getLogger("memplan.jobs").warning(
            "probe job %s failed on %s: %s %s", jid, self.scheduler.kind, state, reason
        )


def _task_index(sid: str) -> int:
    """An array task's index (`123_4`: 4); 0 for a single job (`123`, or Ray's `memplan-<job id>`)."""
    head, sep, tail = sid.rpartition("_")
    return int(tail) if sep and tail.isdigit() and head.isdigit() else 0
