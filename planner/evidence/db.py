"""The store's database: an embedded SQLite file (the default) or a PostgreSQL server (`--store` or $MEMPLAN_STORE set
to a `postgresql://` URL), so that several API replicas on different hosts share one store and one job queue.

The store and the job queue write one SQL for both, with `?` placeholders, `INSERT ... RETURNING id` and
`ON CONFLICT` (SQLite 3.35 and later read both). `Pg` wraps a psycopg 3 connection in the few methods of sqlite3's
that they call (execute, executemany, executescript, `with db:` as one transaction, in_transaction, close), turning
`?` into psycopg's `%s` and SQLite's `BEGIN IMMEDIATE` into `BEGIN`. The PostgreSQL schema is made by numbered
migrations (planner.evidence.migrations) under an advisory lock, so that replicas starting at once apply each once.

Every connection waits a bounded time for a lock another holds (SQLite's busy timeout; PostgreSQL's connect and lock
timeouts): `wait_s()`. A command waits as long as a store's writers may need (WAIT_S, or $MEMPLAN_STORE_WAIT_S; `planner
serve` sets 1 s), a service's request only until its deadline (`waits`), so that a locked, corrupt or unreachable
store is a StoreUnavailable or one of `errors()` within it, which the API answers with a 503.
"""

from __future__ import annotations

import math
import os
import sqlite3
import time
from contextlib import contextmanager
from contextvars import ContextVar

from planner.errors import BadInput

PG_SCHEMES = ("postgresql://", "postgres://")
WAIT_S = 30.0  # a command's wait for a lock (ranks of one run record their steps into one file at once)
WAIT_ENV = "MEMPLAN_STORE_WAIT_S"
MIN_WAIT_S = 0.05  # a call past its deadline still gets this long: a store that is not locked answers in it
_DEADLINE: ContextVar[float | None] = ContextVar("store_deadline", default=None)


class StoreUnavailable(BadInput):
    """The store cannot be opened, read or written now (a corrupt file, a lock held too long, a server that does not
    answer): one line for the CLI, a 503 from the API. `reason`: the cause alone, without the store's name."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message, "store")
        self.reason = reason or message

    def __reduce__(self):  # raised in a planning worker, re-raised in the service (pickled across)
        return (type(self), (str(self), self.reason))


def wait_s(default: float | None = None) -> float:
    """How long the next store call may wait: what is left of the deadline `waits` set (at least MIN_WAIT_S), else
    `default`, else $MEMPLAN_STORE_WAIT_S, else WAIT_S."""
    end = _DEADLINE.get()
    if end is not None:
        return max(end - time.monotonic(), MIN_WAIT_S)
    if default is not None:
        return default
    return float(os.environ.get(WAIT_ENV) or WAIT_S)


@contextmanager
def waits(seconds: float):
    """Store calls inside (this thread, or a context copied from it) wait `seconds` at most, all of them together;
    an earlier deadline already set stands. Also a decorator: `@waits(1.0)`."""
    end = time.monotonic() + seconds
    outer = _DEADLINE.get()
    token = _DEADLINE.set(end if outer is None else min(outer, end))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def reason(e: BaseException) -> str:
    """A store error's cause in one line (psycopg's messages run to several: the first says it)."""
    if isinstance(e, StoreUnavailable):
        return e.reason.splitlines()[0]
    line = str(e).strip().splitlines()[0].strip() if str(e).strip() else ""
    return f"{e.__class__.__name__}: {line}" if line else e.__class__.__name__


def is_url(where) -> bool:
    return isinstance(where, str) and where.startswith(PG_SCHEMES)


def errors() -> tuple[type[BaseException], ...]:
    """The exceptions a store's database raises when it cannot be read or written (the job queue retries them)."""
    try:
        import psycopg
    except ImportError:
        return (sqlite3.Error,)
    return (sqlite3.Error, psycopg.Error)


def redacted(url: str) -> str:
    """The URL without its password, for messages and /healthz."""
    head, sep, tail = url.partition("@")
    if not sep or ":" not in head.split("//", 1)[-1]:
        return url
    scheme, _, cred = head.partition("//")
    return f"{scheme}//{cred.split(':', 1)[0]}:***@{tail}"


class Pg:
    """A psycopg connection in autocommit mode, with transactions begun and ended by the caller, as sqlite3's are in
    the store's code (`with db:` or an explicit BEGIN ... COMMIT)."""

    dialect = "postgresql"

    def __init__(self, url: str, wait_s: float = WAIT_S) -> None:
        try:
            import psycopg
        except ImportError:
            raise BadInput(
                f"--store {redacted(url)!r}: a PostgreSQL store needs psycopg (pip install 'psycopg[binary]')", "store"
            ) from None
        # whole seconds, 2 at least (libpq's rule), 10 at most (a host that does not answer is said then)
        self.conn = psycopg.connect(url, autocommit=True, connect_timeout=min(10, max(2, math.ceil(wait_s))))
        self.conn.execute(f"SET lock_timeout = {max(1, int(wait_s * 1000))}")  # ms; a SET takes no parameter
        self.total_changes = 0  # as sqlite3's: statements that may have written, through this connection

    @staticmethod
    def _sql(sql: str) -> str:
        return "BEGIN" if sql.strip().upper() == "BEGIN IMMEDIATE" else sql.replace("?", "%s")

    def execute(self, sql: str, args: tuple | list = ()):
        if not sql.lstrip().upper().startswith("SELECT"):
            self.total_changes += 1
        cur = self.conn.cursor()
        cur.execute(self._sql(sql), tuple(args) or None)
        return cur

    def executemany(self, sql: str, rows):
        cur = self.conn.cursor()
        cur.executemany(self._sql(sql), list(rows))
        return cur

    def executescript(self, sql: str) -> None:
        self.conn.execute(sql)

    @property
    def in_transaction(self) -> bool:
        from psycopg.pq import TransactionStatus

        return self.conn.info.transaction_status != TransactionStatus.IDLE

    def __enter__(self) -> Pg:  # noqa: PYI034
        self.conn.execute("BEGIN")
        return self

    def __exit__(self, kind, value, tb) -> None:
        self.conn.execute("COMMIT" if kind is None else "ROLLBACK")

    def close(self) -> None:
        self.conn.close()


def connect(where, wait: float | None = None):
    """A connection to a store: Pg for a URL, else sqlite3 on the file (WAL mode set by the caller), waiting for
    locks `wait` seconds at most (None: wait_s())."""
    wait = wait_s() if wait is None else wait
    if is_url(where):
        return Pg(where, wait)
    return sqlite3.connect(where, timeout=wait)


def dialect(db) -> str:
    return getattr(db, "dialect", "sqlite")


def for_update(db, skip_locked: bool = False) -> str:
    """The row-lock clause a claim or a finish reads its row with: none in SQLite, whose BEGIN IMMEDIATE already holds
    the whole file; FOR UPDATE [SKIP LOCKED] in PostgreSQL, so that replicas claim different jobs at once."""
    if dialect(db) == "sqlite":
        return ""
    return " FOR UPDATE SKIP LOCKED" if skip_locked else " FOR UPDATE"


QUEUE_LOCK = 3_620_037  # pg_advisory_xact_lock's key for adding probe jobs


def lock_queue(db) -> None:
    """Inside a transaction: hold the job queue's insert lock (PostgreSQL; SQLite's BEGIN IMMEDIATE already does)."""
    if dialect(db) != "sqlite":
        db.execute("SELECT pg_advisory_xact_lock(?)", (QUEUE_LOCK,))


def has_table(db, name: str) -> bool:
    if dialect(db) == "sqlite":
        sql = "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?"
    else:
        sql = "SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = ?"
    return db.execute(sql, (name,)).fetchone() is not None
