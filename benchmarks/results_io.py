"""Writing a benchmark's results: the JSON file and its markdown table beside it (same name, .md)."""

from __future__ import annotations

import json
import os


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
