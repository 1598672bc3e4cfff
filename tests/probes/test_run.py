"""Isolated probes: outcomes told apart by exit status and result file; the caller keeps running."""
import time

import pytest

from planner.catalog import model_config
from planner.spec import Knobs
from planner.store import Shapes
from probes.run import run_isolated

CFG = model_config("debug-llama")
SHAPES = Shapes(micro_batch=1, grad_accum=1, seq_len=32)


@pytest.mark.parametrize("fault,status", [("oom", "oom"), ("crash", "crash"), ("hang", "timeout")])
def test_injected_faults_come_back_classified(fault, status):
    t0 = time.monotonic()
    rec = run_isolated("debug-llama", CFG, Knobs(), SHAPES, "sim", timeout_s=3,
                       env={"MEMPLAN_PROBE_FAULT": fault})
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
