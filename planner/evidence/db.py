"""The store's database: an embedded SQLite file (the default) or a PostgreSQL server (`--store` or $MEMPLAN_STORE set
to a `postgresql://` URL), so that several API replicas on different hosts share one store and one job queue.

The store and the job queue write one SQL for both, with `?` placeholders, `INSERT ... RETURNING id` and
`ON CONFLICT` (SQLite 3.35 and later read both). `Pg` wraps a psycopg 3 connection in the few methods of sqlite3's
that they call (execute, executemany, executescript, `with db:` as one transaction, in_transaction, close), turning
`?` into psycopg's `%s` and SQLite's `BEGIN IMMEDIATE` into `BEGIN`. The PostgreSQL schema is made by numbered
migrations (planner.evidence.migrations) under an advisory lock, so that replicas starting at once apply each once.
"""

from __future__ import annotations

import sqlite3

PG_SCHEMES = ("postgresql://", "postgres://")


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

    def __init__(self, url: str, connect_timeout: int = 10) -> None:
        try:
            import psycopg
        except ImportError:
            from planner.errors import BadInput

            raise BadInput(
                f"--store {redacted(url)!r}: a PostgreSQL store needs psycopg (pip install 'psycopg[binary]')", "store"
            ) from None
        self.conn = psycopg.connect(url, autocommit=True, connect_timeout=connect_timeout)
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


def connect(where):
    """A connection to a store: Pg for a URL, else sqlite3 on the file (WAL mode set by the caller)."""
    if is_url(where):
        return Pg(where)
    return sqlite3.connect(where, timeout=30)


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
