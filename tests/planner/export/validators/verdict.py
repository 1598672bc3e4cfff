"""The verdict loop every validator here shares: each file checked by its framework's own code, "PATH: OK what it
read" per file, or the traceback and "PATH: INVALID error" and exit status 1 at the first file refused (or after every file, with --each). Imported by
the validator scripts, which each framework's venv runs by path (this folder is on their sys.path)."""

import traceback
from collections.abc import Callable
from pathlib import Path


def verdicts(paths: list[str], check: Callable[[Path], str]) -> int:
    """`--each` among the paths: every file checked, the exit status 1 if any was refused (one framework import for
    several refusals, tests/planner/export/test_export_names.py)."""
    each = "--each" in paths
    status = 0
    for p in (p for p in paths if p != "--each"):
        try:
            print(f"{p}: OK {check(Path(p).resolve())}")
        except BaseException as e:  # noqa: BLE001 - any error of the framework's, SystemExit from argparse too
            traceback.print_exc()
            print(f"{p}: INVALID {type(e).__name__}: {e}")
            status = 1
            if not each:
                return 1
    return status
