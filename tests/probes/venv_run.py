"""A probe script run under a framework's own venv (its python named by an environment variable, the test skipped
without one), with this repository on its path: its JSON answer, the last line it prints (a framework's logger may
print before it)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def in_venv(variable: str, script: str, *args: str, stdin: object = None, env: dict | None = None, timeout: int = 600):
    """`script` (a path under the repository) with `args`, `stdin` sent as JSON where given, under the venv's python."""
    python = os.environ.get(variable)
    if not python or not Path(python).exists():
        pytest.skip(f"{variable} names no venv")
    run = subprocess.run(
        [python, str(ROOT / script), *args],
        input=None if stdin is None else json.dumps(stdin),
        check=False,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.strip().splitlines()[-1])
