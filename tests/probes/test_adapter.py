"""ms-swift's bottleneck adapter (--lora-variant adapter, --tuner_type adapter) against ms-swift's own code in its
venv (MEMPLAN_SWIFT_PYTHON, ms-swift 4.6.0, torch 2.13 CPU): tests/probes/swift_adapter.py builds debug-llama from
its config, applies Swift.prepare_model with the AdapterConfig ms-swift's prepare_adapter builds, runs one real
backward, and measures one AdapterModule's forward on the live-bytes tracker (CUDA's autocast replayed).
Measured 2026-12-05, debug-llama (hidden 256, 4 layers), adapter_length 128, 512 tokens: 263,680 trained fp32
parameters in 16 tensors (4 x (2 x 256 x 128 + 128 + 256)), all with gradients; one adapter keeps 655,360 B (bf16
AMP), 1,048,576 B (bf16-pure) beside its output (gelu; relu keeps 131,072 B fewer under AMP). Exact. A step's
peak in the sim probe over ms-swift's modules against the plan: debug-llama 2 x 512 -0.37% (bf16 AMP), -0.40%
(bf16-pure), +0.36% (full checkpointing); llama-3.2-1b 1 x 256 -0.05%, 1 x 1024 -0.13% (sweep tier)."""

import pytest

from planner.config.spec import GIB, Knobs
from planner.estimate import bottleneck
from planner.estimate.memory import breakdown
from planner.estimate.setup import Setup
from planner.estimate.trained import largest_trainable_matrix_params, trainable_params, trainable_tensor_sizes
from planner.model.catalog import load_model
from tests.probes.venv_run import in_venv

LENGTH, TOKENS = 128, 512
# debug-llama micro 2 x 512, the sim's peak of a step with ms-swift's adapters (measured) and the plan's tolerance
STEP = {"micro": 2, "seq": 512, "knobs": {}}  # sim 152,334,848 B, planned 151,771,648 (-0.37%)
SWEPT = [
    ("debug-llama", {"micro": 2, "seq": 512, "knobs": {"precision": "bf16-pure"}}, 0.005),  # 156,070,400, -0.40%
    ("debug-llama", {"micro": 2, "seq": 512, "knobs": {"checkpointing": "full"}}, 0.005),  # 121,774,592, +0.36%
    ("llama-3.2-1b", {"micro": 1, "seq": 256, "knobs": {}}, 0.002),  # 3,321,099,264, planned -0.05%
    ("llama-3.2-1b", {"micro": 1, "seq": 1024, "knobs": {}}, 0.002),  # 5,540,997,120, planned -0.13%
]


def _swift(req: dict) -> dict:
    return in_venv("MEMPLAN_SWIFT_PYTHON", "tests/probes/swift_adapter.py", stdin=req, timeout=300)


@pytest.fixture(scope="module")
def measured() -> dict:
    config = load_model("debug-llama").config
    return _swift({"config": config, "length": LENGTH, "act": "gelu", "tokens": TOKENS, "steps": [STEP]})


def _planned(step: dict, name: str = "debug-llama") -> int:
    k = Knobs(lora_rank=LENGTH, lora_variant="adapter", framework="swift", **step["knobs"])
    return breakdown(Setup(load_model(name), k, step["micro"], 1, step["seq"]), 80 * GIB).peak_allocated_bytes


def test_trained_parameters_are_ms_swifts(measured):
    """One fp32 adapter after each MLP: the parameter count, the tensors, the largest, all trained."""
    model, k = load_model("debug-llama"), Knobs(lora_rank=LENGTH, lora_variant="adapter", framework="swift")
    s = Setup(model, k, 1, 1, 16)
    assert measured["adapters"] == model.text.layers
    assert measured["trained"] == trainable_params(s) == bottleneck.trained_params(model, k) == 263_680
    assert measured["trained_tensors"] == measured["grads"] == sum(n for _, n in trainable_tensor_sizes(s))
    assert measured["largest"] == largest_trainable_matrix_params(s)
    assert measured["trained_dtypes"] == ["torch.float32"]


@pytest.mark.parametrize("precision", ["bf16", "bf16-pure"])
def test_one_adapters_saved_tensors_are_ms_swifts(measured, precision):
    """What one AdapterModule keeps for backward over an existing bf16 MLP output, beside its bf16 output: exact."""
    assert measured[precision]["out_dtype"] == "torch.bfloat16"
    assert measured[precision]["kept"] == bottleneck.saved_bytes(256, LENGTH, TOKENS, precision)


def test_an_adapter_step_is_the_sims_peak(measured):
    """One bf16 AMP step of debug-llama with ms-swift's adapters (the sim probe over ms-swift's own modules): the
    plan within 0.5%, and not LoRA's plan at the same rank."""
    assert _planned(STEP) == pytest.approx(measured["peaks"][0], rel=0.005)
    lora = Knobs(lora_rank=LENGTH, framework="swift")
    assert breakdown(Setup(load_model("debug-llama"), lora, 2, 1, 512), 80 * GIB).peak_allocated_bytes != _planned(STEP)


@pytest.mark.sweep
@pytest.mark.parametrize("name,step,within", SWEPT)
def test_adapter_steps_under_bf16_pure_checkpointing_and_on_llama_1b(name, step, within):
    """The other precision, full checkpointing (the first layer then a checkpointed one) and a 16-layer model."""
    config = load_model(name).config
    peak = _swift({"config": config, "length": LENGTH, "steps": [step], "model": False})["peaks"][0]
    assert _planned(step, name) == pytest.approx(peak, rel=within)
