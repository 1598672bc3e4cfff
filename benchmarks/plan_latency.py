"""How long `planner suggest` takes after install, as a user runs it: a fresh process each time
(interpreter start, imports, catalog, search over every candidate, JSON out). Target: < 1 s.

    python benchmarks/plan_latency.py --out benchmarks/results/plan_latency.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

from results_io import report_or_out, save

CASES = [
    (
        "llama-3.1-8b on 8 x A100-80GB, 256 x 4096",
        [
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "a100-80gb",
            "--gpus-per-node",
            "8",
            "--global-batch",
            "256",
            "--seq-len",
            "4096",
        ],
    ),
    (
        "qwen2.5-72b on 32 x 8 H100, 1024 x 4096",
        [
            "--model",
            "qwen2.5-72b",
            "--gpu",
            "h100-80gb",
            "--gpus-per-node",
            "8",
            "--nodes",
            "32",
            "--global-batch",
            "1024",
            "--seq-len",
            "4096",
        ],
    ),
    (
        "qwen2.5-vl-7b on 6 x H20, 96 x 4096 (1024 image tokens)",
        [
            "--model",
            "qwen2.5-vl-7b",
            "--gpu",
            "h20",
            "--gpus-per-node",
            "6",
            "--global-batch",
            "96",
            "--seq-len",
            "4096",
            "--image-tokens",
            "1024",
        ],
    ),
    (
        "internvl2.5-8b LoRA on 2 x RTX 4090, 16 x 2048",
        [
            "--model",
            "internvl2.5-8b",
            "--gpu",
            "rtx4090",
            "--gpus-per-node",
            "2",
            "--global-batch",
            "16",
            "--seq-len",
            "2048",
            "--image-tokens",
            "1792",
            "--lora-rank",
            "16",
        ],
    ),
]


def time_once(args: list[str]) -> tuple[float, dict]:
    code = (
        "import sys, json; from planner.cli import main; rc = main(sys.argv[1:]); "
        "sys.stderr.write(json.dumps({'rc': rc, 'torch': 'torch' in sys.modules}))"
    )
    t0 = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-c", code, "suggest", *args, "--json"], capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - t0
    meta = json.loads(r.stderr.strip().splitlines()[-1])
    meta["plans"] = len(json.loads(r.stdout)["plans"])
    return elapsed, meta


IN_PROCESS = """
import json, statistics, sys, time
from planner import advise
from planner.cli import advising, build_parser
args = build_parser("suggest").parse_args(["suggest", *sys.argv[1:]])
req = advising.request(advise.SuggestRequest, args)
t0 = time.perf_counter(); advise.suggest(req); first = time.perf_counter() - t0
warm = []
for _ in range(5):
    t0 = time.perf_counter(); advise.suggest(req); warm.append(time.perf_counter() - t0)
print(json.dumps({"first": first, "warm": statistics.median(warm)}))
"""


def in_process(args: list[str]) -> dict:
    """advise.suggest on the case's request in one process, its imports done: the first call (catalog and
    calibration files read) and the median of five more (target: the first under 0.1 s)."""
    r = subprocess.run([sys.executable, "-c", IN_PROCESS, *args], capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the JSON here (and its markdown table beside it, .md)")
    ap.add_argument("--report", metavar="JSON", help="print a stored result's table (run nothing)")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    if report_or_out(ap, args, markdown):
        return
    import pydantic

    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode written, as an install writes it (cli_latency.py)
    rows = []
    for label, case in CASES:
        time_once(case)  # untimed: bytecode written, files in the page cache
        times, meta = [], {}
        for _ in range(args.repeat):
            t, meta = time_once(case)
            times.append(t)
        inside = in_process(case)
        rows.append(
            {
                "case": label,
                "median_s": round(statistics.median(times), 3),
                "max_s": round(max(times), 3),
                "in_process_first_s": round(inside["first"], 3),
                "in_process_warm_s": round(inside["warm"], 3),
                "plans": meta["plans"],
                "exit_code": meta["rc"],
                "torch_imported": meta["torch"],
            }
        )
        print(
            f"{label:60s} median {rows[-1]['median_s']:.3f} s  max {rows[-1]['max_s']:.3f} s  "
            f"in-process {inside['first']:.3f} s (warm {inside['warm']:.3f} s)  plans {meta['plans']}  "
            f"torch imported: {meta['torch']}"
        )
    result = {
        "benchmark": "plan_latency",
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}",
        "python": platform.python_version(),
        "pydantic": pydantic.VERSION,
        "repeat": args.repeat,
        "target_s": 1.0,
        "in_process_target_s": 0.1,
        "load_at_start": round(os.getloadavg()[0], 2),
        "rows": rows,
    }
    save(args.out, result, markdown(result))


def markdown(result: dict) -> list[str]:
    md = [
        (
            f"plan latency, {result['date']}, {result['machine']}, Python {result['python']}, pydantic "
            f"{result['pydantic']}, load {result['load_at_start']} at start"
        ),
        "",
        "| case | cold median s | cold max s | in-process first s | in-process warm s | plans | torch imported |",
        "|---|---|---|---|---|---|---|",
    ]
    return md + [
        f"| {r['case']} | {r['median_s']:.3f} | {r['max_s']:.3f} | {r['in_process_first_s']:.3f} | "
        f"{r['in_process_warm_s']:.3f} | {r['plans']} | {r['torch_imported']} |"
        for r in result["rows"]
    ]


if __name__ == "__main__":
    main()
