"""Which MoE weights a quantized base leaves dense (planner.estimate.quant_modules), against tiny real models built
from config by tests/probes/fused_experts.py: at transformers 5.25 (this venv, bitsandbytes 0.50.2 on CPU) the
stacked experts and routers stay bf16 under nf4 and int8; at transformers 4.57.1 (MEMPLAN_PREQUANT_PYTHON) every
expert is an nn.Linear but gpt-oss's, and DeepSeek's and GLM-4.5's routers are not.

The default tier pins the planner to the figures the sweep measured (MEASURED_5: `python tests/probes/fused_experts.py
nf4 int8` on transformers 5.25, 33 s); the sweep recomputes them."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from planner.estimate import quant
from planner.estimate.quant_modules import EXPERTS, dense_names, dense_weight_names
from planner.model.families import from_config

sys.path.insert(0, str(Path(__file__).parent))
from fused_experts import FAMILIES, LOADED, config

SCRIPT = Path(__file__).with_name("fused_experts.py")
# tiny Qwen3-MoE (2 layers, 8 experts of 32, hidden 64) at transformers 5.25 in nf4 and int8 alike: the weights its
# bitsandbytes linears hold, and the bytes of the bf16 experts and routers beside them (tolerance: none)
MEASURED_5 = {"qwen3_moe": {"quantized_weights": 24_576, "dense_bytes": 198_656}}
# memplan counts Qwen1.5-MoE's router (not adapted by PEFT) as a frozen half weight at every release: on transformers 4
# it is an nn.Linear that bitsandbytes quantizes (8 x 64 x 2 layers here), counted 1.5 bytes a weight too many
UNCOUNTED_ROUTER_AT_4 = {"qwen2_moe": 1024}


def planned(mt: str, quant_name: str, transformers_5: bool) -> tuple[int, int]:
    """(weights memplan counts quantized, decoder weights it counts dense in half) for the tiny `mt`."""
    model = from_config(config(mt), f"tiny-{mt}")
    dense = dense_weight_names(mt, quant_name, transformers_5)
    left = sum(t.numel for t in model.tensors if t.lora and t.name in dense)
    return quant.quantized_weights(model, dense), left


def test_a_stacked_experts_base_counts_its_experts_and_router_dense_as_measured():
    """transformers 5.25, a tiny Qwen3-MoE in nf4: memplan's quantized weights and the bf16 bytes beside them equal the
    measured (MEASURED_5, recomputed by the sweep)."""
    q, left = planned("qwen3_moe", "nf4", True)
    assert (q, 2 * left) == tuple(MEASURED_5["qwen3_moe"].values())
    assert planned("qwen3_moe", "nf4", False) == (q + left, 0)  # transformers 4: one nn.Linear an expert


def run(python: str, *args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    out = subprocess.run([python, str(SCRIPT), *args], capture_output=True, text=True, env=env, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.sweep
def test_bitsandbytes_on_transformers_5_leaves_every_family_s_experts_dense():
    """Each family built at transformers 5.25: the weights under nn.Linear are what memplan counts quantized; loaded
    in nf4 and int8 (Qwen3-MoE, Qwen1.5-MoE, Mixtral) the bitsandbytes linears hold exactly those, the rest bf16."""
    pytest.importorskip("bitsandbytes")
    real = run(sys.executable, "nf4", "int8")
    assert real["transformers"].startswith("5.")
    for mt, row in real["families"].items():
        q, left = planned(mt, "nf4", True)
        assert row["layout"]["linear"] == q, mt
        for fmt in ("nf4", "int8") if mt in LOADED else ():
            assert row[fmt]["quantized_weights"] == q and row[fmt]["dense_dtype"] == ["torch.bfloat16"], (mt, fmt)
            assert row[fmt]["dense_bytes"] >= 2 * left, (mt, fmt)  # Qwen1.5-MoE's router: dense, not counted here
    assert {k: real["families"]["qwen3_moe"]["nf4"][k] for k in MEASURED_5["qwen3_moe"]} == MEASURED_5["qwen3_moe"]


@pytest.mark.sweep
def test_on_transformers_4_the_experts_are_linears_but_gpt_oss_s():
    """Each family built at transformers 4.57.1: the weights under nn.Linear are what memplan counts quantized on a
    transformers 4 line (Qwen1.5-MoE's unadapted router aside: UNCOUNTED_ROUTER_AT_4)."""
    python = os.environ.get("MEMPLAN_PREQUANT_PYTHON")
    if not python or not Path(python).is_file():
        pytest.skip("MEMPLAN_PREQUANT_PYTHON names no transformers 4.57.1 venv (make fwenv builds .fwenv/prequant)")
    real = run(python, "")
    assert real["transformers"].startswith("4.57")
    for mt in FAMILIES:
        q, _ = planned(mt, "nf4", False)
        assert real["families"][mt]["layout"]["linear"] == q + UNCOUNTED_ROUTER_AT_4.get(mt, 0), mt


def test_the_plan_s_line_decides_and_fsdp_gathers_only_the_quantized_linears_packed():
    """The tiny Qwen3-MoE in nf4 under LoRA: the frozen base counts the measured 24,576 weights quantized and the
    rest in bf16 at hf's newest line (transformers 5), every expert quantized at hf@4.54 (transformers 4.57); FSDP's
    unit gathers a layer's quantized linears packed, the measured 24,576 over the 2 layers."""
    from planner.config.spec import Knobs
    from planner.estimate import fsdp, trained
    from planner.estimate.setup import Setup

    model = from_config(config("qwen3_moe"), "tiny-qwen3_moe")

    def setup(release: str, **kw) -> Setup:
        knobs = Knobs.make(lora_rank=8, precision="bf16", quant="nf4", framework="hf", release=release, **kw)
        return Setup(model, knobs, 1, 1, 64, gpus_per_node=2)

    measured, new, old = MEASURED_5["qwen3_moe"], setup(""), setup("4.54")
    assert quant.quantized_weights(model, dense_names(new)) == measured["quantized_weights"]
    experts = measured["dense_bytes"] // 2  # at 4.57 quantized too, 0.5 + 1/64 + 4/(64 x 256) bytes a weight
    moved = trained.frozen_bytes(new) - trained.frozen_bytes(old)
    assert abs(moved - (measured["dense_bytes"] - experts * quant.stored_bytes_per_weight("nf4"))) <= 1  # rounding
    assert fsdp.layer_params(setup("", fsdp="full"), quantized=True) == measured["quantized_weights"] // 2


@pytest.mark.parametrize(
    ("framework", "quant_name", "line_4"),
    [("swift", "awq", "3.9"), ("hf", "gptq", "4.54"), ("llamafactory", "gptq", "0.9.4"), ("trl", "awq", "0.22")],
)
def test_a_gptq_or_awq_moe_is_refused_on_transformers_5_and_planned_on_4(framework, quant_name, line_4):
    """A GPTQ/AWQ checkpoint's per-expert packed weights load into no stacked expert on transformers 5 (measured with
    transformers 5.23 and gptqmodel 7.7.0 on a tiny AWQ Qwen3-MoE: the stacked experts missing, every packed expert
    tensor unexpected): refused at the framework's transformers 5 line, naming its line on 4; a dense model and
    the line on transformers 4 are not refused."""
    from planner.config.spec import Knobs
    from planner.frameworks import adapter
    from planner.frameworks.rules import Where

    moe = from_config(config("qwen3_moe"), "tiny-qwen3_moe")
    routed = ("num_experts", "num_experts_per_tok", "moe_intermediate_size")
    cfg = {k: v for k, v in config("qwen3_moe").items() if k not in routed}
    dense = from_config({**cfg, "model_type": "qwen3"}, "tiny-qwen3")

    def refused(release: str, model) -> str | None:
        k = Knobs.make(lora_rank=8, precision="fp16", quant=quant_name, framework=framework, release=release)
        why = adapter(framework, release).refusal(dict(k), Where(model=model))
        return why[1] if why else None

    assert f"give --framework {framework}@{line_4}" in refused("", moe)
    assert refused("", dense) is None and refused(line_4, moe) is None


@pytest.mark.sweep
def test_transformers_5_loads_no_awq_expert_into_the_stacked_experts():
    """tests/probes/awq_moe.py in gptqmodel's venv (transformers 5.23, gptqmodel 7.7.0; about 10 s once its CPU kernel
    is built, 12 min the first time): the attention linears become AWQ layers, the stacked experts stay fp16 and are
    missing from the load, and every packed expert tensor (4 experts x 3 linears x 3 tensors) is unexpected: what
    rules.stacked_experts_prequant refuses."""
    python = os.environ.get("MEMPLAN_GPTQMODEL_PYTHON")
    if not python or not Path(python).is_file():
        pytest.skip("MEMPLAN_GPTQMODEL_PYTHON names no gptqmodel venv (make fwenv builds .fwenv/gptqmodel)")
    out = subprocess.run(
        [python, str(SCRIPT.with_name("awq_moe.py"))], capture_output=True, text=True, check=False, timeout=1500
    )
    assert out.returncode == 0, out.stderr[-2000:]
    real = json.loads(out.stdout.strip().splitlines()[-1])
    assert all("Awq" in real["attn"][n] for n in ("q_proj", "k_proj", "v_proj", "o_proj"))
    assert {n: v[:2] for n, v in real["mlp"].items() if n.startswith("experts.")} == {
        key: ["Qwen3MoeExperts", "torch.float16"] for key in EXPERTS
    }
    assert real["missing"] == sorted(f"model.layers.0.mlp.{n}" for n in EXPERTS)
    assert len(real["unexpected"]) == 36 and all(".mlp.experts." in n for n in real["unexpected"])
