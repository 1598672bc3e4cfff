"""gptqmodel's real GPTQ and AWQ layers (7.7.0, in their own venv: tools/fwenv.sh gptqmodel) against
planner.estimate.quant and the sim's stand-ins (recipe.quant.GptqStandIn): what the layers store, and what a training
step saves for backward. Skipped where MEMPLAN_GPTQMODEL_PYTHON names no such venv (`make test` sets it)."""

import json
import os
import subprocess
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from planner.estimate import quant
from recipe.quant import GptqStandIn

K, N, ROWS = 1024, 768, 256
SCRIPT = Path(__file__).with_name("gptqmodel_layers.py")


@pytest.fixture(scope="module")
def real() -> dict:
    python = os.environ.get("MEMPLAN_GPTQMODEL_PYTHON")
    if not python:
        pytest.skip(
            "MEMPLAN_GPTQMODEL_PYTHON is not set: the python of the gptqmodel venv (make fwenv) runs this check"
        )
    cmd = [python, str(SCRIPT), str(K), str(N), str(ROWS), "bfloat16"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def stand_in_saved() -> list[dict]:
    q = GptqStandIn(torch.nn.Linear(K, N, bias=False, dtype=torch.bfloat16))
    x = torch.randn(ROWS, K, dtype=torch.bfloat16, requires_grad=True)
    saved = []

    def pack(t):
        saved.append({"shape": sorted(t.shape), "bytes": t.nbytes, "is_input": t.data_ptr() == x.data_ptr()})
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        q(x).sum().backward()
    return saved


def test_stored_bytes(real):
    """The buffers to the byte but gptqmodel's two 32-byte shift tables (TorchLinear.post_init)."""
    per_weight = quant.stored_bytes_per_weight("gptq")
    gptq = real["gptq"]["buffers"]
    assert sum(gptq.values()) - 64 == K * N * per_weight + 4 * K  # + g_idx, 4 bytes an input
    assert sum(real["awq"]["buffers"].values()) == K * N * per_weight


def test_gptq_saves_its_dequantized_weight_not_its_input(real):
    """The term quant.saved_weights_layer_bytes counts (2 bytes a weight), and what the sim's stand-in saves."""
    (saved,) = real["gptq"]["saved"]
    assert sorted(saved["shape"]) == [N, K] and saved["bytes"] == 2 * K * N and not saved["is_input"]
    assert [(s["shape"], s["bytes"], s["is_input"]) for s in stand_in_saved()] == [([N, K], 2 * K * N, False)]


def test_awq_torch_fallback_saves_the_weight_too(real):
    """Without CUDA gptqmodel trains AWQ with AwqTorchLinear, which saves its weight as GPTQ does: the AWQ plans
    count the CUDA GEMM/Triton kernels instead (packed tensors only), which this machine cannot run."""
    (saved,) = real["awq"]["saved"]
    assert sorted(saved["shape"]) == [N, K] and not saved["is_input"]
