"""LoRA on a frozen tower's and projector's linears, not checkpointed (planner.estimate.tower_lora): one block's saved
bytes and the projector's against the sim's per-module trace of each real model (probes.sim other_modules, 4 decoder
layers, micro-batch 1 x 1,024 tokens with 256 image tokens, rank 8, bf16 AMP, measured 2026-12-07: the modules of
the tower's second block summed, as tests/probes/test_tower_lora.py sums them on every sim row; the first block keeps
no input of its first norm). Tolerance 0.2% (InternViT's block keeps 48,640 B more than the terms, 0.11%)."""

import pytest

from planner.config.spec import Knobs
from planner.estimate import tower_lora
from planner.model.catalog import load_model

LORA = Knobs(precision="bf16", checkpointing="off", lora_rank=8, lora_vision=True)
# (model, patches of 256 image tokens, the sim's block bytes, the sim's projector bytes less its norms' inputs)
MEASURED = [
    ("gemma-3-4b", 4096, 194_262_016, 0),  # Gemma 3's projector is a matmul with a parameter, no nn.Linear
    ("qwen2.5-vl-3b", 1024, 65_221_120, 13_398_016 - 5_246_976),  # the merger less ln_q's fp32 input and rsqrt
    ("internvl2.5-8b", 1024, 44_580_352, 10_790_912 - 4_229_120),  # mlp1 less its LayerNorm's fp32 input
]


@pytest.mark.parametrize("name,patches,block,projector", MEASURED)
def test_a_block_and_the_projector_save_what_the_sim_traced(name, patches, block, projector):
    m = load_model(name)
    linears = tower_lora.tower_linears(m, "vision")
    assert tower_lora.block_saved_bytes(m.vision, patches, LORA, linears, False) == pytest.approx(block, rel=0.002)
    assert tower_lora.projector_saved_bytes(m, LORA, patches // m.vision.patches_per_token, False) == projector


def test_bf16_pure_keeps_the_adapters_fp32_copies():
    """bf16-pure: lora_A saves the fp32 cast of its input and its fp32 output (4 bytes where autocast keeps 2), no
    autocast weight copies, and the LayerNorms their half input."""
    m, p = load_model("gemma-3-4b"), 4096
    pure = LORA.model_copy(update={"precision": "bf16-pure"})
    linears = tower_lora.tower_linears(m, "vision")
    widths = sum(d for d, _ in linears) + 8 * len(linears)
    amp, half = (tower_lora.block_saved_bytes(m.vision, p, k, linears, False) for k in (LORA, pure))
    weights = sum(2 * 8 * (d + o) for d, o in linears)
    norms = 2 * (2 * p * m.vision.hidden + 8 * m.vision.hidden)  # fp32 casts and weight copies autocast made
    assert half - amp == 2 * p * widths - weights - norms


def test_dropout_adds_its_mask_at_each_adapted_input():
    m, p = load_model("qwen2.5-vl-3b"), 1024
    linears = tower_lora.tower_linears(m, "vision")
    on, off = (tower_lora.block_saved_bytes(m.vision, p, LORA, linears, d) for d in (True, False))
    assert on - off == p * sum(d for d, _ in linears)


def test_only_plain_lora_at_zero_0_in_half_precision_is_examined():
    assert tower_lora.examined(LORA) and tower_lora.examined(LORA.model_copy(update={"precision": "bf16-pure"}))
    for update in ({"precision": "fp32"}, {"zero_stage": 2}, {"lora_vision": False}, {"lora_variant": "dora"}):
        assert not tower_lora.examined(LORA.model_copy(update=update))
