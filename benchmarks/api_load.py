"""Concurrent POST /v1/plans against a local `planner serve` (analytic evidence, a catalog model):
p50/p99 latency and requests/s over a bounded number of requests, and meanwhile /healthz every 0.1 s from
another client: its p99 and slowest answer (issue 51: health apart from work, within 1 s under a 16-client burst).

    python benchmarks/api_load.py --out benchmarks/results/api_load.json [--requests 600 --concurrency 1,8,16]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path

import httpx
from results_io import save

ROOT = Path(__file__).resolve().parents[1]
BODY = {
    "model": "llama-3.1-8b",
    "gpu": "h100",
    "gpus_per_node": 8,
    "global_batch": 256,
    "seq_len": 4096,
    "evidence": "analytic",
    "top": 5,
}


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def watch(url: str, stop: threading.Event, seconds: list[float]) -> None:
    """GET /healthz every 0.1 s from its own client until `stop`; each answer's seconds into `seconds`."""
    with httpx.Client(base_url=url, timeout=30) as c:
        while not stop.is_set():
            t0 = time.perf_counter()
            c.get("/healthz").raise_for_status()
            seconds.append(time.perf_counter() - t0)
            stop.wait(0.1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--requests", type=int, default=600)
    ap.add_argument("--concurrency", default="1,8,16", help="comma list: one run per level")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from api.sandbox import default_processes
    from recipe.dist import free_port

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as tmp:
        server = subprocess.Popen(
            [sys.executable, "-m", "planner.cli", "serve", "--port", str(port), "--store", f"{tmp}/store.sqlite"],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            for _ in range(300):
                try:
                    httpx.get(url + "/healthz", timeout=1)
                    break
                except httpx.HTTPError:
                    time.sleep(0.2)
            with httpx.Client(base_url=url, timeout=30) as c:
                for _ in range(10):  # warm-up (imports, caches)
                    c.post("/v1/plans", json=BODY).raise_for_status()

                def one(_):
                    t0 = time.perf_counter()
                    r = c.post("/v1/plans", json=BODY)
                    return time.perf_counter() - t0, r.status_code

                runs = []
                for level in map(int, args.concurrency.split(",")):
                    stop, health = threading.Event(), []
                    watcher = threading.Thread(target=watch, args=(url, stop, health))
                    watcher.start()
                    t0 = time.perf_counter()
                    with ThreadPoolExecutor(level) as pool:
                        results = list(pool.map(one, range(args.requests)))
                    runs.append((level, results, time.perf_counter() - t0, health))
                    stop.set()
                    watcher.join()
        finally:
            server.terminate()
            server.wait(timeout=30)
    rows = []
    for level, results, wall, health in runs:
        lat = [t for t, _ in results]
        rows.append(
            {
                "requests": len(results),
                "concurrency": level,
                "statuses": sorted({s for _, s in results}),
                "p50_ms": round(1000 * percentile(lat, 0.5), 2),
                "p99_ms": round(1000 * percentile(lat, 0.99), 2),
                "requests_per_s": round(len(results) / wall, 1),
                "healthz_p99_ms": round(1000 * percentile(health, 0.99), 2),
                "healthz_max_ms": round(1000 * max(health), 2),
            }
        )
        print(json.dumps(rows[-1]))
    if args.out:
        meta = {
            "date": time.strftime("%Y-%m-%d"),
            "cpus": os.cpu_count(),
            "workers": 1,
            "planning_workers": default_processes(),
            "body": BODY,
            **{p: metadata.version(p) for p in ("fastapi", "uvicorn")},
        }
        md = [
            "| requests | concurrency | p50 ms | p99 ms | requests/s | /healthz p99 ms | /healthz max ms |",
            "|---|---|---|---|---|---|---|",
        ]
        md += [
            f"| {r['requests']} | {r['concurrency']} | {r['p50_ms']} | {r['p99_ms']} | {r['requests_per_s']} | "
            f"{r['healthz_p99_ms']} | {r['healthz_max_ms']} |"
            for r in rows
        ]
        md.append(
            f"\n{meta['date']}, {meta['cpus']} CPUs, one uvicorn worker ({meta['planning_workers']} planning workers), fastapi {meta['fastapi']}, uvicorn "
            f"{meta['uvicorn']}. Body: `{json.dumps(BODY)}`"
        )
        save(args.out, {**meta, "runs": rows}, md)


if __name__ == "__main__":
    main()
