"""The suite's leak check (tests/conftest.py::nothing_leaks, issue 20) catches what it is for: a pytest run
whose test leaves an orphaned process, or a memplan temporary folder, fails; a clean one passes."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LEAKY = """
import subprocess, tempfile, os
def test_leaks():
    if os.environ["LEAK"] == "process":
        subprocess.Popen(["sleep", "60"], start_new_session=True)     # an orphan once the test is over
    elif os.environ["LEAK"] == "folder":
        tempfile.mkdtemp(prefix="memplan-probe-")
"""


def _run(tmp_path, leak: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_leaky.py").write_text(LEAKY)
    env = {**os.environ, "LEAK": leak, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)}
    env.pop("MEMPLAN_DURATIONS", None)  # the outer run records the durations, not this inner one (a relative path)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "tests.conftest",
            "-p",
            "no:cacheprovider",
            str(tmp_path / "test_leaky.py"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )


def test_a_leaked_process_fails_the_run(tmp_path):
    from tests.conftest import live_descendants

    try:
        r = _run(tmp_path, "process")
    finally:  # the orphan reparents to this session in turn: end it, or this run leaks it
        for pid, cmd in live_descendants(os.getpid()):
            if cmd == "sleep 60":
                os.kill(pid, 9)
    assert r.returncode != 0 and "still alive: sleep 60" in r.stdout, r.stdout[-2000:]


def test_a_leaked_temporary_folder_fails_the_run(tmp_path):
    r = _run(tmp_path, "folder")
    assert r.returncode != 0 and "temporary folder left" in r.stdout, r.stdout[-2000:]


def test_a_clean_run_passes(tmp_path):
    r = _run(tmp_path, "none")
    assert r.returncode == 0, r.stdout[-2000:]
