"""The store's state as /healthz and /metrics report it: read by a background thread every PERIOD_S under a wait of
READ_WAIT_S, so that neither endpoint ever waits for the store, a plan or a check. They answer from the last reading,
on the event loop; a reading older than STALE_S (the thread itself stuck) is said as a fault of its own."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from planner.evidence import db as sql

PERIOD_S = 1.0
READ_WAIT_S = 0.5  # one reading's wait for the store (this process's other calls included)
STALE_S = 5.0


@dataclass(frozen=True)
class Reading:
    depth: int | None  # queued jobs; None when the store could not be read
    error: str | None  # why it could not, in one line
    at: float  # time.monotonic() when it was taken


class StoreMonitor:
    def __init__(self, queue, period_s: float = PERIOD_S) -> None:
        self.queue, self.period_s = queue, period_s
        self.reading = Reading(None, "the store has not been read yet", time.monotonic())
        self._stop, self._poke = threading.Event(), threading.Event()
        self._thread: threading.Thread | None = None

    def read(self) -> Reading:
        try:
            with sql.waits(READ_WAIT_S):
                depth = self.queue.depth()
        except (*sql.errors(), sql.StoreUnavailable) as e:
            return Reading(None, sql.reason(e), time.monotonic())
        return Reading(depth, None, time.monotonic())

    def start(self) -> None:
        """A first reading now (the service's first /healthz answers from it), then one every period_s."""
        self._stop.clear()
        self.reading = self.read()
        self._thread = threading.Thread(target=self._loop, name="store-monitor", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._poke.wait(self.period_s)
            self._poke.clear()
            try:
                self.reading = self.read()
            except Exception as e:  # a bug here must not end the readings: the next one may succeed
                logging.getLogger("memplan.health").exception("reading the store's state")
                self.reading = Reading(None, f"{e.__class__.__name__}: {e}", time.monotonic())

    def poke(self) -> None:
        """Read again now (a job was queued or cancelled: the depth changed)."""
        self._poke.set()

    def stop(self) -> None:
        self._stop.set()
        self._poke.set()
        if self._thread is not None:
            self._thread.join(timeout=READ_WAIT_S + 1)

    def health(self) -> dict:
        """/healthz: ok, or degraded with the reason (the store could not be read at the last reading, or a job
        worker's last write failed, or no reading for STALE_S); the queue depth and how old the reading is."""
        r, q = self.reading, self.queue
        age = time.monotonic() - r.at
        if r.error is not None:
            reason = f"the store cannot be read: {r.error}"
        elif q.store_error is not None:
            reason = f"the store cannot be written: {q.store_error}"
        elif age > STALE_S:
            reason = f"the store has not been read for {age:.0f} s"
        else:
            reason = None
        return {
            "status": "degraded" if reason else "ok",
            "reason": reason,
            "queue_depth": r.depth,
            "store_read_age_s": round(age, 3),
            "slots": q.slots,
            "executor": q.kind,
        }
