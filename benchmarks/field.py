"""The field corpus (tests/field/, issue 47): `planner check --config` on runs people reported in public threads, with
their files as posted, against what happened to them (ran out of memory, or ran, with the memory they measured).

Each run is a folder with its files and a run.toml (source link, framework and release, GPUs, model, outcome,
measured GiB per GPU where given, and the flags a user adds when the planner asks: the GPU kind at least). A run's
row says agree, DANGEROUS (the planner says it fits, but it ran out of memory), too cautious (the planner says it
does not fit, but it ran) or error (the planner's one-line message; a traceback is an error too, marked as such).
Where a figure was measured on a run that ran, the row gives predicted/measured - 1, like with like: run.toml's
`measured_kind` says what the figure is, "device" (the default: nvidia-smi, NVML or a share of the card, the whole
process: the planner's device total), "reserved" (torch.cuda.max_memory_reserved, as ms-swift 2.x logs it: the peak
allocated and the allocator's reserve, the fragmentation term) or "allocated" (torch.cuda.max_memory_allocated, as
torchtune logs it: the peak allocated).

    python benchmarks/field.py --out benchmarks/results/field.json
    python benchmarks/field.py --report benchmarks/results/field.json    (print the stored table)
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import statistics
import sys
import traceback
from pathlib import Path

import tomllib
from results_io import cpu_meta, meta_line, out_or_report, publish

# the corpus is read offline, as CI reads it: a model id memplan lacks is never fetched from the Hub (planner.intake.hub)
os.environ.setdefault("MEMPLAN_HUB", "0")

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "field"
GIB = 2**30


def runs(corpus: Path = CORPUS) -> list[tuple[Path, dict]]:
    """(folder, run.toml) of every run in the corpus, by folder name."""
    return [(p.parent, tomllib.loads(p.read_text())) for p in sorted(corpus.glob("*/run.toml"))]


def check(folder: Path, meta: dict) -> tuple[int, dict | None, str]:
    """(exit code, JSON answer or None, last stderr line) of `planner check --config FILES FLAGS --json`, run in
    this process; an exception that escapes the CLI is exit code -1 with its last traceback line."""
    from planner.cli import main

    argv = ["check", "--config", *[str(folder / f) for f in meta["files"]], *meta["flags"], "--json"]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as e:
            rc = int(e.code or 0)
        except Exception:  # noqa: BLE001 - a traceback is what this benchmark reports, not what it hides
            rc, err = -1, io.StringIO(traceback.format_exc())
    lines = [line for line in err.getvalue().splitlines() if line.strip()]
    try:
        answer = json.loads(out.getvalue()) if rc in (0, 3) else None
    except json.JSONDecodeError:
        answer = None
    return rc, answer, (lines[-1] if lines else "")


def verdict(outcome: str, rc: int) -> str:
    if rc not in (0, 3):
        return "error"
    fits = rc == 0
    if outcome == "oom":
        return "DANGEROUS" if fits else "agree"
    return "agree" if fits else "too cautious"


MEASURED_KINDS = ("device", "reserved", "allocated")  # run.toml measured_kind (the module's docstring)


def of_kind(memory: dict, kind: str) -> float:
    """The plan's GiB of the kind a run's figure is (MEASURED_KINDS): the device total, the peak allocated with the
    allocator's reserve (the fragmentation overhead), or the peak allocated."""
    if kind == "device":
        return memory["device_total_bytes"] / GIB
    reserve = sum(o["bytes"] for o in memory["overheads"] if o["name"] == "fragmentation") if kind == "reserved" else 0
    return (memory["peak_allocated_bytes"] + reserve) / GIB


def row(folder: Path, meta: dict) -> dict:
    rc, answer, message = check(folder, meta)
    predicted = answer["plan"]["memory"]["device_total_bytes"] / GIB if answer else None
    measured = meta.get("measured_gib") if meta["outcome"] == "ran" else None
    kind = meta.get("measured_kind", "device")
    compared = of_kind(answer["plan"]["memory"], kind) if answer else None
    return {
        "run": folder.name,
        "source": meta["source"],
        "framework": meta["framework"],
        "gpus": f"{meta['gpus']} x {meta['gpu']}",
        "vlm": meta["vlm"],
        "kind": meta["kind"],
        "outcome": meta["outcome"],
        "measured_gib": meta.get("measured_gib"),
        "measured_kind": kind,
        "predicted_gib": round(predicted, 2) if predicted is not None else None,
        "compared_gib": round(compared, 2) if compared is not None else None,
        "ratio_minus_1": round(compared / measured - 1, 4) if compared and measured else None,
        "verdict": verdict(meta["outcome"], rc),
        "exit_code": rc,
        "message": message if rc not in (0, 3) else "",
        "traceback": rc == -1,
    }


def summary(rows: list[dict]) -> dict:
    counts = {v: sum(r["verdict"] == v for r in rows) for v in ("agree", "DANGEROUS", "too cautious", "error")}
    ratios = [abs(r["ratio_minus_1"]) for r in rows if r["ratio_minus_1"] is not None]
    return {
        "runs": len(rows),
        **counts,
        "vlm": sum(r["vlm"] for r in rows),
        "rl": sum(r["kind"] != "sft" for r in rows),
        "oom": sum(r["outcome"] == "oom" for r in rows),
        "ran": sum(r["outcome"] == "ran" for r in rows),
        "frameworks": len({r["framework"].split(" ")[0] for r in rows}),
        "median_abs_ratio_minus_1": round(statistics.median(ratios), 4) if ratios else None,
        "with_figure": len(ratios),
    }


def markdown(data: dict) -> list[str]:
    s = summary(data["rows"])
    median = "-" if s["median_abs_ratio_minus_1"] is None else f"{s['median_abs_ratio_minus_1']:.1%}"
    title = (
        f"Field corpus (tests/field/): `planner check --config` on {s['runs']} runs people reported "
        f"({s['vlm']} VLM, {s['rl']} RL, {s['frameworks']} frameworks; {s['oom']} ran out of memory, {s['ran']} ran), "
        f"{meta_line(data['meta'])}"
    )
    counts = (
        f"| {s['agree']} | {s['DANGEROUS']} | {s['too cautious']} | {s['error']} | {median} "
        f"(over {s['with_figure']} runs with a figure) |"
    )
    lines = [
        title,
        "",
        "| agree | DANGEROUS | too cautious | error | median \\|predicted/measured - 1\\| |",
        "|---|---|---|---|---|",
        counts,
        "",
        "| run | framework | GPUs | outcome | measured GiB | predicted GiB | verdict | message |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in data["rows"]:
        cells = [
            f"[{r['run']}]({r['source']})",
            r["framework"],
            r["gpus"],
            r["outcome"],
            "-" if r["measured_gib"] is None else f"{r['measured_gib']:g}" + _kind(r),
            "-" if r["predicted_gib"] is None else f"{r['predicted_gib']:.1f}" + _compared(r),
            r["verdict"],
            r["message"].replace("|", "\\|"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _kind(r: dict) -> str:
    """A figure that is not the device's says its kind (rows stored before measured_kind: the device's)."""
    kind = r.get("measured_kind", "device")
    return "" if kind == "device" else f" ({kind})"


def _compared(r: dict) -> str:
    """Beside the device total, the planned figure of the measured kind where that is another."""
    kind = r.get("measured_kind", "device")
    return "" if kind == "device" or r.get("compared_gib") is None else f" ({kind} {r['compared_gib']:.1f})"


def main() -> None:
    args = out_or_report(__doc__, markdown)
    if args is None:
        return
    rows = [row(folder, meta) for folder, meta in runs()]
    publish(args.out, rows, cpu_meta(("pydantic",)) | {"memplan": git_head()}, markdown)


def git_head() -> str:
    """This checkout's commit, the planner version the table was made with."""
    import subprocess

    r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False)
    return r.stdout.strip() or "unknown"


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
