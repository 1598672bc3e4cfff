"""The two halves of each framework's test_line_defaults.py (issue 47: a line fills its own release's defaults): the
release's own defaults, printed by a probe in the line's venv (tools/fwenv_old.sh), and memplan's reading of a minimal
file beside a requirements.txt pinning that release."""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from planner import intake

ROOT = Path(os.environ.get("MEMPLAN_FWENV_OLD", Path(__file__).resolve().parents[3] / ".fwenv-old"))


def venv_or_skip(name: str) -> Path:
    """The venv `name` under ROOT, or a skip naming the command that builds it."""
    venv = ROOT / name
    if not (venv / "bin" / "python").exists():
        pytest.skip(f"no venv {venv}: tools/fwenv_old.sh {name} builds it")
    return venv


def own_defaults(venv: Path, probe: str) -> dict:
    """The JSON the probe prints last, run by the venv's own Python (one process)."""
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", probe], check=False, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def read_pinned(folder: Path, pin: str, name: str, text: str):
    """memplan's reading of file `name` holding `text`, beside a requirements.txt holding `pin`."""
    folder.mkdir()
    (folder / "requirements.txt").write_text(f"{pin}\n")
    (folder / name).write_text(text)
    return intake.read([str(folder / name), str(folder / "requirements.txt")])


def cited_defaults(source: str) -> set[str]:
    """Whose defaults `source` cites: the word before each ` default` (`llamafactory@0.8` where an older line names
    itself, as_at's `llamafactory@0.8 default, as at llamafactory 0.9.5: ...`; `0.9.5` where it cites the newest)."""
    return set(re.findall(r"(\S+) default\b", source))
