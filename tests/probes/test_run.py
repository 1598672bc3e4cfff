"""Isolated probes: outcomes told apart by exit status and result file; the caller keeps running."""

import time

import pytest

from planner.config.spec import Knobs
from planner.evidence.store import Shapes
from planner.model.catalog import model_config
from probes.run import run_isolated

CFG = model_config("debug-llama")
SHAPES = Shapes(micro_batch=1, grad_accum=1, seq_len=32)


@pytest.mark.parametrize("fault,status", [("oom", "oom"), ("crash", "crash"), ("hang", "timeout")])
def test_injected_faults_come_back_classified(fault, status):
    t0 = time.monotonic()
    rec = run_isolated("debug-llama", CFG, Knobs(), SHAPES, "sim", timeout_s=3, env={"MEMPLAN_PROBE_FAULT": fault})
    assert rec.status == status
    assert time.monotonic() - t0 < 20
    if status == "crash":
        assert rec.detail["exit_status"] != 0


def test_sim_probe_in_a_subprocess():
    pytest.importorskip("transformers")
    rec = run_isolated("debug-llama", CFG, Knobs(), SHAPES, "sim", timeout_s=300)
    assert rec.status == "ok" and rec.peak_allocated_bytes > 0 and rec.device == "fake-cpu"


def test_cuda_probe_on_a_gpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    rec = run_isolated("debug-llama", CFG, Knobs(), SHAPES, "cuda", timeout_s=300)
    assert rec.status == "ok" and rec.peak_reserved_bytes >= rec.peak_allocated_bytes > 0


def _orphan_probe(tmp_path, folder: str | None) -> int:
    """Start a parent that runs a hanging probe (deadline 4 s), kill -9 the parent after it has started the
    probe: the probe's pid."""
    import subprocess
    import sys

    code = f"""
import sys, time
from pathlib import Path
from planner.model.catalog import model_config
from planner.config.spec import Knobs
from planner.evidence.store import Shapes
from probes.run import run_isolated
def started(p, deadline):
    print(p.pid, flush=True)
run_isolated("debug-llama", model_config("debug-llama"), Knobs(), Shapes(micro_batch=1, grad_accum=1, seq_len=32),
             "sim", timeout_s=4, env={{"MEMPLAN_PROBE_FAULT": "hang"}}, on_start=started,
             folder={folder!r} and Path({folder!r}))
"""
    parent = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        text=True,
        env={**__import__("os").environ, "TMPDIR": str(tmp_path)},
    )
    pid = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    return pid


def _alive(pid: int) -> bool:
    from pathlib import Path

    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_an_orphaned_probe_that_nobody_can_adopt_dies_with_its_parent_and_leaves_no_folder(tmp_path):
    """Issue 20: a probe outlived its killed parent far past its timeout, and its temporary folder stayed."""
    pid = _orphan_probe(tmp_path, None)
    deadline = time.monotonic() + 3  # well inside its 4 s deadline: it went because its parent did
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid)
    assert not list(tmp_path.glob("memplan-probe-*"))


def test_an_adoptable_orphan_keeps_its_folder_and_its_own_deadline(tmp_path):
    pid = _orphan_probe(tmp_path, str(tmp_path / "job"))
    t0 = time.monotonic()
    time.sleep(1)
    assert _alive(pid)  # waiting to be adopted
    while _alive(pid) and time.monotonic() - t0 < 15:
        time.sleep(0.1)
    assert not _alive(pid) and time.monotonic() - t0 < 8  # its watchdog killed it at its deadline
    assert (tmp_path / "job" / "job.json").is_file()  # the folder stays for the adopter
