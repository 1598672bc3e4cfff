"""GPTQ checkpoints loaded by transformers 5.23 through optimum 2.3.0 and gptqmodel 7.7.0 on CPU
(tests/probes/gptq_tf5.py, in gptqmodel's venv: tools/fwenv.sh gptqmodel) against memplan's GPTQ terms
(planner.estimate.quant) and the stacked-experts refusal (planner.frameworks.rules.stacked_experts_prequant).

The default tier pins the terms to the figures the probe measured (MEASURED: `PYTHONPATH=. .fwenv/gptqmodel/bin/python
tests/probes/gptq_tf5.py llama` and `... qwen3_moe`, 17 s each on 2 shared cores); the sweep reruns the probe
(MEMPLAN_GPTQMODEL_PYTHON)."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from planner.estimate import quant
from planner.frameworks.rules import stacked_experts
from planner.model.families import from_config

SCRIPT = Path(__file__).with_name("gptq_tf5.py")
DIMS = {"hidden_size": 256, "intermediate_size": 768, "num_attention_heads": 4, "num_key_value_heads": 2}
MOE = {"moe_intermediate_size": 256, "num_experts": 4, "num_experts_per_tok": 2}
LLAMA = {"model_type": "llama", "num_hidden_layers": 2, "vocab_size": 512, "head_dim": 64, **DIMS}
WF_TABLE = 32  # bytes a quantized linear holds beyond the checkpoint: gptqmodel's int32 shift table wf_unsqueeze_zero
SMALL = 1536  # bytes the dequantization's small tensors (the unpacked zeros, 3 rounded blocks) add to its peak
MEASURED = {
    # the tiny Llama's 14 quantized linears, every tensor they hold after model.train() (qweight, qzeros, scales,
    # g_idx, wf_unsqueeze_zero), all TorchAtenLinear (auto_trainable's CPU pick)
    "stored": 836_032,
    "classes": ["TorchAtenLinear"],
    # the peak of one 768 x 256 down_proj forward (input 64 tokens, output 32 KiB), bf16 and fp16 input and a
    # TorchLinear of the same shape alike
    "transient": 1_181_184,
    # the dequantized bf16 weights layer 1's seven linears save for backward under a LoRA (layer 0's q/k/v save none:
    # their input, from the frozen embeddings, needs no gradient)
    "saved_layer": 1_572_864,
}
# the tiny GPTQ Qwen3-MoE (2 layers, 4 experts): what from_pretrained reports
MEASURED_MOE = {"missing": 4, "unexpected": 96, "experts": "bfloat16", "classes": ["TorchAtenLinear"]}


def tiny():
    return from_config(LLAMA, "tiny-llama-gptq")


def test_gptq_terms_are_the_measured_bytes():
    """transformers 5.23 + optimum 2.3.0 + gptqmodel 7.7.0 (MEASURED): the stored bytes to the byte but the shift
    table, the dequantization peak within SMALL bytes (6 bytes a weight of the largest linear), and the saved
    dequantized weights of a layer to the byte."""
    model = tiny()
    linears = sum(t.count for t in model.tensors if t.lora)
    assert quant.base_bytes(model, "gptq") == MEASURED["stored"] - WF_TABLE * linears
    assert 0 <= MEASURED["transient"] - quant.dequantized_weight_bytes(model, "gptq", 2) <= SMALL
    assert quant.saved_weights_layer_bytes(model, "gptq") == MEASURED["saved_layer"]


def test_a_stacked_experts_gptq_checkpoint_loads_no_expert():
    """What rules.stacked_experts_prequant refuses, as measured (MEASURED_MOE): every stacked expert parameter memplan
    counts in the tiny Qwen3-MoE is missing from the load, and every packed expert tensor the checkpoint holds
    (4 experts x 3 linears x 4 tensors a layer) is unexpected."""
    moe = from_config({**LLAMA, "model_type": "qwen3_moe", **MOE}, "tiny-qwen3-moe-gptq")
    assert stacked_experts(moe)
    stacked = [t for t in moe.tensors if t.name.startswith("experts.")]
    assert sum(t.count for t in stacked) == MEASURED_MOE["missing"]
    assert MEASURED_MOE["unexpected"] == stacked[0].count * MOE["num_experts"] * 3 * 4


def run(mt: str) -> dict:
    python = os.environ.get("MEMPLAN_GPTQMODEL_PYTHON")
    if not python or not Path(python).is_file():
        pytest.skip("MEMPLAN_GPTQMODEL_PYTHON names no gptqmodel venv (make fwenv builds .fwenv/gptqmodel)")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    out = subprocess.run([python, str(SCRIPT), mt], capture_output=True, text=True, env=env, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.sweep
def test_the_probe_measures_the_pinned_dense_figures():
    real = run("llama")
    assert real["versions"] == ["5.23.0", "2.3.0", "7.7.0"] and not real["missing"] and not real["unexpected"]
    assert sorted({v["class"] for v in real["linears"].values()}) == MEASURED["classes"]
    assert sum(sum(v["tensors"].values()) for v in real["linears"].values()) == MEASURED["stored"]
    peaks = {
        real["transient"]["bf16"]["peak"],
        real["transient"]["fp16"]["peak"],
        real["transient_torch_linear"]["peak"],
    }
    assert peaks == {MEASURED["transient"]}
    layer1 = [s for n, v in real["saved"].items() if n.startswith("model.layers.1.") for s in v]
    assert len(layer1) == 7 and sum(s["bytes"] for s in layer1) == MEASURED["saved_layer"]
    assert {s["dtype"] for s in layer1} == {"torch.bfloat16"}


@pytest.mark.sweep
def test_the_probe_measures_the_pinned_moe_figures():
    real = run("qwen3_moe")
    assert sorted(real["missing"]) == [
        f"model.layers.{i}.mlp.experts.{p}" for i in (0, 1) for p in ("down_proj", "gate_up_proj")
    ]
    assert len(real["unexpected"]) == MEASURED_MOE["unexpected"]
    assert all(".mlp.experts." in k for k in real["unexpected"])
    assert {d for d, _ in real["experts"].values()} == {"torch." + MEASURED_MOE["experts"]}
    assert sorted({v["class"] for v in real["linears"].values()}) == MEASURED_MOE["classes"]
    assert all(".self_attn." in n for n in real["linears"])
