"""Writing a benchmark's results: the JSON file and its markdown table beside it (same name, .md)."""

from __future__ import annotations

import json
import os
import time
from importlib import metadata


def save(out: str, data: dict, md_lines: list[str]) -> None:
    with open(out, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    with open(os.path.splitext(out)[0] + ".md", "w") as f:
        f.write("\n".join(md_lines) + "\n")


def report_or_out(parser, args, markdown) -> bool:
    """For a benchmark with `--report JSON` (print stored results' markdown, run nothing) and `--out`: True when
    the report was printed; otherwise --out is required (the parser exits with its usage error)."""
    if args.report:
        with open(args.report) as f:
            print("\n".join(markdown(json.load(f))))
        return True
    if not args.out:
        parser.error("--out is required (or --report)")
    return False


def out_or_report(doc: str, markdown):
    """Parse the `--out` / `--report` pair of a benchmark with nothing else to set: the arguments, or None when
    --report printed its table (report_or_out)."""
    import argparse

    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--out", help="results JSON (a .md table is written beside it)")
    parser.add_argument("--report", help="print the markdown of stored results; run nothing")
    args = parser.parse_args()
    return None if report_or_out(parser, args, markdown) else args


def cpu_meta(packages: tuple[str, ...]) -> dict:
    """Date, this machine's CPUs and the versions of `packages`, for a benchmark run on the CPU."""
    return {
        "date": time.strftime("%Y-%m-%d"),
        "cpus": os.cpu_count(),
        "device": "cpu",
        **{p: metadata.version(p) for p in packages},
    }


def meta_line(meta: dict) -> str:
    """'date, N CPUs, package version, ...' of a cpu_meta, for a table's footer."""
    packages = ", ".join(f"{k} {v}" for k, v in meta.items() if k not in ("date", "cpus", "device"))
    return f"{meta['date']}, {meta['cpus']} CPUs, {packages}"


def publish(out: str, rows: list[dict], meta: dict, markdown) -> None:
    """Print the markdown table of {meta, rows} and write both files."""
    data = {"meta": meta, "rows": rows}
    md = markdown(data)
    print("\n".join(md))
    save(out, data, md)
