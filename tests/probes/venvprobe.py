"""A memplan probe script run in a framework's own venv (its Python named by a MEMPLAN_*_PYTHON variable): memplan's
root on its path, one torch thread, the JSON its last line prints."""

import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_probe(python: str, script: str, *args: str, timeout: int = 300) -> dict:
    """`python probes/SCRIPT ARGS` from memplan's root; the JSON of its last line (an assertion with its stderr's end
    where it fails)."""
    run = subprocess.run(
        [python, str(ROOT / "probes" / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])
