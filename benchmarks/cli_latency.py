"""How long the `planner` command takes cold, as a user types it: a fresh process each time through the installed
console script (interpreter start, imports, parser, work, output to a pipe). Targets on 2 cores (issue 50):
`planner --help` 0.2 s, `planner suggest` with the README's first example 0.3 s. Wall seconds (median, max) and the process's own
CPU seconds (user + sys, median): on a shared machine the CPU figure is the steadier one.

    python benchmarks/cli_latency.py --out benchmarks/results/cli_latency.json
    python benchmarks/cli_latency.py --report benchmarks/results/cli_latency.json    (print the stored table)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

from results_io import report_or_out, save

SUGGEST = [
    "suggest",
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
    "--top",
    "5",
]
CASES = [("planner --help", ["--help"], 0.2), ("planner suggest (README's first example)", SUGGEST, 0.3)]


def planner_command() -> list[str]:
    """The console script beside this interpreter (what `pip install` put on PATH), else `python -m planner.cli`."""
    script = Path(sys.executable).with_name("planner")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "planner.cli"]


def time_once(cmd: list[str]) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of the process, exit code) of one fresh run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), r.returncode


def imported(args: list[str], names: tuple[str, ...] = ("rich", "torch")) -> dict[str, bool]:
    """Which of `names` one run imports (python -X importtime lists every module on stderr)."""
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "planner.cli", *args], capture_output=True, text=True, check=False
    )
    mods = {line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    return {n: n in mods for n in names}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def markdown(result: dict) -> list[str]:
    md = [
        (
            f"CLI latency (cold: a fresh process per run), {result['date']}, {result['machine']}, "
            f"Python {result['python']}, pydantic {result['pydantic']}, rich {result['rich']}, "
            f"load {result['load_average_1min_at_start']} at start, {result['repeat']} runs"
        ),
        "",
        "| command | median s | max s | CPU s (median) | target s | imports rich | imports torch |",
        "|---|---|---|---|---|---|---|",
    ]
    return md + [
        f"| {r['case']} | {r['median_s']:.3f} | {r['max_s']:.3f} | {r['cpu_median_s']:.3f} | {r['target_s']} | "
        f"{r['imports']['rich']} | {r['imports']['torch']} |"
        for r in result["rows"]
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the JSON here (and its markdown table beside it, .md)")
    ap.add_argument("--report", metavar="JSON", help="print a stored result's table (run nothing)")
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    if report_or_out(ap, args, markdown):
        return
    # bytecode written as an install writes it (pip compiles at install time): with PYTHONDONTWRITEBYTECODE set (this
    # project's shell sets it) every run would time the compiler on each module edited since its .pyc was written
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    cmd, load = planner_command(), os.getloadavg()
    rows = []
    for label, case, target in CASES:
        time_once(cmd + case)  # untimed: bytecode written, files in the page cache
        runs = [time_once(cmd + case) for _ in range(args.repeat)]
        wall, cpu = [r[0] for r in runs], [r[1] for r in runs]
        rows.append(
            {
                "case": label,
                "args": case,
                "median_s": round(statistics.median(wall), 3),
                "max_s": round(max(wall), 3),
                "cpu_median_s": round(statistics.median(cpu), 3),
                "target_s": target,
                "exit_codes": sorted({r[2] for r in runs}),
                "imports": imported(case),
            }
        )
    command = " ".join(os.path.relpath(c) if c.startswith(os.getcwd()) else c for c in cmd)
    result = {
        "benchmark": "cli_latency",
        "date": datetime.date.today().isoformat(),
        "machine": f"{cpu_model()}, {os.cpu_count()} cores ({len(os.sched_getaffinity(0))} usable), "
        f"{platform.platform()}",
        "load_average_1min_at_start": round(load[0], 2),
        "python": platform.python_version(),
        "pydantic": version("pydantic"),
        "rich": version("rich"),
        "command": command,
        "repeat": args.repeat,
        "rows": rows,
    }
    print(json.dumps(result, indent=1))
    print("\n".join(markdown(result)))
    save(args.out, result, markdown(result))


if __name__ == "__main__":
    main()
