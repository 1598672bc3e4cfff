"""The probe store: one SQLite file (WAL mode, schema-versioned) of probe records, and of real runs' steps
(planner.evidence.runs: the `runs` table, added to a version-1 file when it is opened).

A record is keyed twice:
- `tensor_key`: the architecture (a hash of its config), the plan's knobs and the shapes (micro-batch,
  accumulation, sequence, image tokens, world size). Tensor bytes depend on nothing else, so any
  record with the same tensor_key informs a plan, whatever card it ran on;
- `fingerprint`: tensor_key plus the device name and the torch/transformers/deepspeed versions:
  the identity of one measurement (context, workspace and capacity depend on the card).

Where: --store, else $MEMPLAN_STORE, else <user data dir>/memplan/probes.sqlite; a `postgresql://` URL there is a
PostgreSQL store (planner.evidence.db, its schema by planner.evidence.migrations), which several hosts share.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from planner.config.spec import Knobs
from planner.errors import BadInput
from planner.evidence import db as sql

SCHEMA_VERSION = 1
OPEN_TRIES = 20  # Store._connect: 0.25 s apart
Backend = Literal["sim", "cpu", "cuda"]
Status = Literal["ok", "oom", "crash", "timeout", "cancelled"]  # cancelled: returned, never stored


def default_path() -> Path | str:
    """The store named by $MEMPLAN_STORE (a file, or a PostgreSQL URL), else the user data dir's file."""
    env = os.environ.get("MEMPLAN_STORE")
    if env:
        return env if sql.is_url(env) else Path(env).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("memplan")) / "probes.sqlite"


def arch_hash(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]


def library_versions() -> dict[str, str]:
    """Installed versions, read from package metadata (no import)."""
    from importlib import metadata  # here: reading it costs a planner that records nothing about 20 ms

    out = {}
    for name in ("torch", "transformers", "deepspeed"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = ""
    return out


class Shapes(BaseModel):
    model_config = ConfigDict(defer_build=True)  # built at first use: a command builds only its own models

    micro_batch: int = Field(ge=1)
    grad_accum: int = Field(ge=1)
    seq_len: int = Field(ge=1)
    image_tokens: int = Field(ge=0, default=0)
    world_size: int = Field(ge=1, default=1)


def tensor_key(config: dict, knobs: Knobs, shapes: Shapes) -> str:
    """Accumulation counts only as 1 or more than 1: from the second micro-step on, every micro-step
    holds the same tensors."""
    shape = {**shapes.model_dump(), "grad_accum": min(shapes.grad_accum, 2)}
    # SFT keys as before workloads; the framework is not a key: a probe runs the recipe its knobs name; nor are the
    # knobs of the phases around the step a probe measures (evaluation, checkpoint save)
    outside = {"framework", "eval_batch", "eval_logits_steps", "save_weights"}
    if knobs.task == "causal-lm":  # keys from before the task knobs
        outside |= {"task", "num_labels", "negatives"}
    if knobs.parallel == 1:  # keys from before the parallel sizes (a probe refuses them anyway: Knobs.for_probe)
        outside |= {"tensor_parallel", "sequence_parallel", "context_parallel", "cp_attention", "device_map"}
    dumped = knobs.model_dump(exclude=outside if knobs.workload.rl else outside | {"workload"})
    blob = json.dumps({"arch": arch_hash(config), "knobs": dumped, "shapes": shape}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def segment_phase(segment: tuple) -> str:
    """The MemoryBreakdown phase name of a traced segment (phase, (position, k))."""
    name = segment[0]
    if name == "backward":
        return "end-of-backward" if segment[1][0] == "end" else "backward"
    return {"forward": "forward", "optimizer": "optimizer-step"}.get(name, "optimizer-step")


def flat_segment(seg) -> tuple:
    """A segment as stored: ('backward', ('start', 0)) -> ('backward', 'start', 0)."""
    out = []
    for x in seg:
        out.extend(flat_segment(x) if isinstance(x, tuple) else [x])
    return tuple(out)


def unflat_segment(seg: tuple) -> tuple:
    """A stored segment ('backward', 'start', 0) back to ('backward', ('start', 0))."""
    return (seg[0], tuple(seg[1:])) if len(seg) > 1 else seg


class ProbeRecord(BaseModel):
    model_config = ConfigDict(defer_build=True)  # built at first use: a command builds only its own models

    id: int | None = None
    model: str
    arch: str
    tensor_key: str
    fingerprint: str = ""
    backend: Backend
    status: Status
    device: str
    versions: dict[str, str]
    knobs: Knobs
    shapes: Shapes
    peak_allocated_bytes: int | None = None  # ok: the peak; oom: allocated at failure (if known)
    peak_reserved_bytes: int | None = None
    device_used_bytes: int | None = None  # NVML: the whole process's device memory
    step_time_s: float | None = None
    by_category: dict[str, int] = {}
    phase: str | None = None
    detail: dict = {}
    created: float = Field(default_factory=time.time)

    def model_post_init(self, _ctx) -> None:
        if not self.fingerprint:
            blob = json.dumps({"t": self.tensor_key, "device": self.device, "versions": self.versions}, sort_keys=True)
            self.fingerprint = hashlib.sha256(blob.encode()).hexdigest()[:24]


def make_record(
    model: str, config: dict, knobs: Knobs, shapes: Shapes, backend: str, status: str, device: str, **fields
) -> ProbeRecord:
    """A probe record of one run (probes, the trainer's OOM events), keyed from its config, knobs and shapes."""
    return ProbeRecord(
        model=model,
        arch=arch_hash(config),
        tensor_key=tensor_key(config, knobs, shapes),
        backend=backend,
        status=status,
        device=device,
        versions=library_versions(),
        knobs=knobs,
        shapes=shapes,
        **fields,
    )


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS probes (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  fingerprint TEXT NOT NULL, tensor_key TEXT NOT NULL, model TEXT NOT NULL, arch TEXT NOT NULL,
  backend TEXT NOT NULL, status TEXT NOT NULL, device TEXT NOT NULL, created REAL NOT NULL,
  record TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS probes_tensor_key ON probes (tensor_key);
CREATE INDEX IF NOT EXISTS probes_model ON probes (model);
"""
# real runs' steps (planner.evidence.runs): made where the file can be written, so that a read-only store of an earlier
# version still opens for reading (a run's reader finds no table: no runs)
_RUNS_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  run TEXT NOT NULL, step INTEGER NOT NULL, rank INTEGER NOT NULL, model TEXT NOT NULL, created REAL NOT NULL,
  record TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS runs_run ON runs (run);
"""


class Store:
    @classmethod
    def existing(cls, path: str | Path | None = None) -> Store:
        """A store that must exist already: read commands never create one (a typo in --store is said)."""
        where = (path if sql.is_url(path) else Path(path).expanduser()) if path else default_path()
        if sql.is_url(where):
            return cls(where)  # a server's store is made by its migrations when first opened
        try:
            found = where.is_file()
        except (OSError, ValueError):
            found = False
        if not found:
            raise BadInput(
                f"--store {str(where)!r}: no probe store there (probes and --evidence sim create one)", "store"
            )
        return cls(where)

    def __init__(self, path: str | Path | None = None, wait: float | None = None) -> None:
        """wait: how long opening may wait for locks, all tries together (None: planner.evidence.db.wait_s())."""
        where = path or default_path()
        wait = sql.wait_s() if wait is None else wait
        if sql.is_url(where):
            self._open_server(str(where), wait)
            return
        self.path = Path(where).expanduser()
        self.db = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            row = self._connect(time.monotonic() + wait)
        except (OSError, ValueError, sqlite3.DatabaseError) as e:  # ValueError: a NUL byte in the path
            if self.db is not None:  # closed now: an open connection keeps a read-only WAL view (api/jobs.py)
                self.db.close()
            msg = f"--store {str(self.path)!r}: cannot open as a probe store ({e})"
            raise sql.StoreUnavailable(msg, sql.reason(e)) from None
        if row is None:  # several processes may set up one new file at once: the first one's version stands
            with self.db:
                self.db.execute(
                    "INSERT INTO meta VALUES ('schema_version', ?) ON CONFLICT (key) DO NOTHING", (str(SCHEMA_VERSION),)
                )
        elif int(row[0]) > SCHEMA_VERSION:
            raise BadInput(
                f"--store {str(self.path)!r}: schema version {row[0]} is newer than this memplan's "
                f"({SCHEMA_VERSION}); upgrade memplan or use another store"
            )

    def _open_server(self, url: str, wait: float) -> None:
        """A PostgreSQL store: connect, then apply the migrations it lacks (planner.evidence.migrations)."""
        from planner.evidence.migrations import LATEST, applied, migrate

        self.path, self.db = sql.redacted(url), None  # path: what messages say, never the password
        try:
            self.db = sql.connect(url, wait)
            if applied(self.db)[-1:] != [
                LATEST
            ]:  # one query where the schema is current (every job's finish opens one)
                migrate(self.db, self.path)
        except sql.errors() as e:
            if self.db is not None:
                self.db.close()
            first = str(e).strip().splitlines()[0] if str(e).strip() else e.__class__.__name__
            msg = f"--store {self.path!r}: cannot open as a probe store ({first})"
            raise sql.StoreUnavailable(msg, sql.reason(e)) from None

    def _connect(self, end: float):
        """Open the file and set up its schema; the stored schema version's row (None for a new file). Processes that
        open one new file at once (every rank of a run recording its steps) can be answered `database is locked`
        at once, whatever the busy timeout (4 processes opening a new file, 60 times: once; and 12 times two of them
        inserted the schema version, which __init__ now inserts once): set up again, for up to
        about 5 s, and never past `end` (time.monotonic())."""
        for attempt in range(OPEN_TRIES):
            self.db = sql.connect(self.path, max(end - time.monotonic(), sql.MIN_WAIT_S))
            try:
                self.db.execute("PRAGMA journal_mode=WAL")
                self.db.executescript(_SCHEMA)
                try:
                    self.db.executescript(_RUNS_SCHEMA)
                except sqlite3.OperationalError as e:  # a read-only file: readable, without runs
                    if "readonly" not in str(e):
                        raise
                return self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or attempt == OPEN_TRIES - 1 or time.monotonic() + 0.25 > end:
                    raise
                self.db.close()
                self.db = None
                time.sleep(0.25)
        raise AssertionError("unreachable")

    def check_writable(self) -> None:
        """StoreUnavailable now if a record could not be added later (a read-only file or folder, a lock held)."""
        try:
            with self.db:  # a real write, rolled back: sqlite opens a file it cannot write read-only
                self.db.execute("SAVEPOINT write_check")
                self.db.execute(
                    "INSERT INTO meta VALUES ('write_check', '1') ON CONFLICT (key) DO UPDATE SET value = excluded.value"
                )
                self.db.execute("ROLLBACK TO write_check")
                self.db.execute("RELEASE write_check")
        except sql.errors() as e:
            msg = f"--store {str(self.path)!r}: cannot be written ({e}); a probe's record would be lost"
            raise sql.StoreUnavailable(msg, f"cannot be written: {sql.reason(e)}") from None

    def add(self, rec: ProbeRecord) -> int:
        with self.db:
            return self.insert(rec)

    def insert(self, rec: ProbeRecord) -> int:
        """Add a record inside the caller's transaction (the API's job queue commits it with its job)."""
        cur = self.db.execute(
            "INSERT INTO probes (fingerprint, tensor_key, model, arch, backend, status, device, created, record) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                rec.fingerprint,
                rec.tensor_key,
                rec.model,
                rec.arch,
                rec.backend,
                rec.status,
                rec.device,
                rec.created,
                rec.model_dump_json(exclude={"id"}),
            ),
        )
        rec.id = int(cur.fetchall()[0][0])  # all of it: a stepped-out statement, before any COMMIT
        return rec.id

    def _rows(self, where: str, args: tuple, limit: int | None = None) -> list[ProbeRecord]:
        sql = f"SELECT id, record FROM probes {where} ORDER BY created DESC, id DESC"
        if limit:
            sql += f" LIMIT {int(limit)}"
        return [ProbeRecord.model_validate_json(r).model_copy(update={"id": i}) for i, r in self.db.execute(sql, args)]

    def get(self, record_id: int) -> ProbeRecord | None:
        rows = self._rows("WHERE id = ?", (record_id,))
        return rows[0] if rows else None

    def delete(self, ids: list[int]) -> int:
        """Remove records by id; how many there were."""
        with self.db:
            return self.db.executemany("DELETE FROM probes WHERE id = ?", [(i,) for i in ids]).rowcount

    def has_arch(self, arch: str) -> bool:
        """Whether any record is of this architecture (arch_hash)."""
        return self.db.execute("SELECT 1 FROM probes WHERE arch = ? LIMIT 1", (arch,)).fetchone() is not None

    def by_tensor_key(self, key: str) -> list[ProbeRecord]:
        return self._rows("WHERE tensor_key = ?", (key,))

    def list(self, model: str | None = None, backend: str | None = None, limit: int = 50) -> list[ProbeRecord]:
        cond, args = [], []
        if model:
            cond.append("model = ?")
            args.append(model)
        if backend:
            cond.append("backend = ?")
            args.append(backend)
        return self._rows(("WHERE " + " AND ".join(cond)) if cond else "", tuple(args), limit)

    def close(self) -> None:
        self.db.close()
