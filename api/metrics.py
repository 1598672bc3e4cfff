"""Prometheus text exposition of the service's counters, written by hand (no client library)."""

from __future__ import annotations

import threading
from collections import defaultdict

LATENCY_BUCKETS_S = (0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class Metrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: dict[tuple[str, str, int], int] = defaultdict(int)
        self.latency: dict[str, list[float]] = {}  # route -> [count per bucket..., +Inf count, sum]

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        with self._lock:
            self.requests[(method, route, status)] += 1
            h = self.latency.setdefault(route, [0] * (len(LATENCY_BUCKETS_S) + 1) + [0.0])
            for i, b in enumerate(LATENCY_BUCKETS_S):
                if seconds <= b:
                    h[i] += 1
            h[len(LATENCY_BUCKETS_S)] += 1
            h[-1] += seconds

    def render(self, queue_depth: int | None, outcomes: dict[str, int], store_errors: int = 0) -> str:
        """queue_depth None (the store unreadable) is exposed as NaN."""
        out = [
            "# HELP memplan_requests_total HTTP requests by method, route and status.",
            "# TYPE memplan_requests_total counter",
        ]
        with self._lock:
            for (m, r, s), n in sorted(self.requests.items()):
                out.append(f'memplan_requests_total{{method="{m}",route="{r}",status="{s}"}} {n}')
            out += [
                "# HELP memplan_request_seconds Request latency by route.",
                "# TYPE memplan_request_seconds histogram",
            ]
            for r, h in sorted(self.latency.items()):
                for i, b in enumerate(LATENCY_BUCKETS_S):
                    out.append(f'memplan_request_seconds_bucket{{route="{r}",le="{b}"}} {h[i]}')
                n = h[len(LATENCY_BUCKETS_S)]
                out += [
                    f'memplan_request_seconds_bucket{{route="{r}",le="+Inf"}} {n}',
                    f'memplan_request_seconds_sum{{route="{r}"}} {h[-1]:.6f}',
                    f'memplan_request_seconds_count{{route="{r}"}} {n}',
                ]
        out += [
            "# HELP memplan_probe_queue_depth Probe jobs waiting.",
            "# TYPE memplan_probe_queue_depth gauge",
            f"memplan_probe_queue_depth {'NaN' if queue_depth is None else queue_depth}",
            "# HELP memplan_probe_outcomes_total Finished probe jobs by outcome.",
            "# TYPE memplan_probe_outcomes_total counter",
        ]
        out += [
            f'memplan_probe_outcomes_total{{outcome="{k}"}} {outcomes.get(k, 0)}'
            for k in ("ok", "oom", "crash", "timeout")
        ]
        out += [
            "# HELP memplan_store_errors_total Store reads and writes of the job workers that failed (retried).",
            "# TYPE memplan_store_errors_total counter",
            f"memplan_store_errors_total {store_errors}",
        ]
        return "\n".join(out) + "\n"
