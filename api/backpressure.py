"""Back-pressure on probe jobs: a queue-depth cap and a per-client rate (a token bucket per client address), each
answered 429 with Retry-After before anything is queued."""

from __future__ import annotations

import math
import threading
import time

from fastapi import HTTPException


class Rate:
    """`per_minute` jobs a client may submit a minute, in bursts of up to `per_minute`."""

    def __init__(self, per_minute: int) -> None:
        self.per_s, self.burst = per_minute / 60, float(per_minute)
        self._buckets: dict[str, tuple[float, float]] = {}  # client -> (tokens, when)
        self._lock = threading.Lock()

    def take(self, client: str, n: int = 1) -> float:
        """Take n tokens; 0 when they were there, else the seconds until they will be (nothing taken)."""
        now = time.monotonic()
        with self._lock:
            tokens, when = self._buckets.get(client, (self.burst, now))
            tokens = min(self.burst, tokens + (now - when) * self.per_s)
            if tokens >= n:
                self._buckets[client] = (tokens - n, now)
                return 0.0
            self._buckets[client] = (tokens, now)
            if len(self._buckets) > 10_000:  # forget full buckets: they hold nothing a new one would not
                self._buckets = {k: v for k, v in self._buckets.items() if v[0] < self.burst}
            return (n - tokens) / self.per_s if n <= self.burst else math.inf


def too_many(detail: str, retry_after_s: float) -> HTTPException:
    return HTTPException(429, detail, headers={"Retry-After": str(max(1, math.ceil(min(retry_after_s, 3600))))})


def admit(queue, rate: Rate, client: str, n: int, max_queued: int) -> None:
    """Refuse (429) n more jobs past the queue's cap or the client's rate; take the client's tokens otherwise."""
    depth = queue.depth()
    if depth + n > max_queued:
        raise too_many(f"{depth} probe jobs are queued; this server queues at most {max_queued}", 60)
    if n > rate.burst:
        raise too_many(f"{n} jobs at once: a client may submit at most {int(rate.burst)} a minute", 60)
    wait = rate.take(client, n)
    if wait:
        raise too_many(f"over {int(rate.burst)} probe jobs a minute from {client}: try again in {wait:.0f} s", wait)
