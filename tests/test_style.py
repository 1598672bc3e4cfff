"""ruff owns the layout (issue 29): every tracked Python file passes `ruff check` (lint and import order) and is
as `ruff format` writes it."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff() -> list[str]:
    beside = Path(sys.executable).with_name("ruff")
    if beside.is_file():
        return [str(beside)]
    if shutil.which("ruff"):
        return ["ruff"]
    pytest.skip("ruff is not installed (make setup-dev installs it)")


def _tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [f for f in out.split() if (ROOT / f).is_file()]


@pytest.mark.parametrize("args", [["check"], ["format", "--check"]], ids=["check", "format"])
def test_ruff_passes_on_every_tracked_file(args):
    r = subprocess.run([*_ruff(), *args, *_tracked()], cwd=ROOT, capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
