"""OpenRLHF through v0.5.3 writes DeepSpeed's data_types.grad_accum_dtype fp32 (v0.5.3 openrlhf/utils/deepspeed/
deepspeed_utils.py:52; None from v0.5.4, commit 47f7cd8f): the 0.5 line (Framework.zero_grad_accum), whose gradient
partitions DeepSpeed keeps in fp32 (planner.estimate.zero.fp32_accum_grads_bytes)."""

import pytest

from planner.config.spec import Knobs
from planner.estimate import state_terms, zero
from planner.estimate.setup import Setup
from planner.estimate.trained import trainable_params
from planner.frameworks import adapter
from planner.model.catalog import load_model


def _setup(release: str, stage: int, precision: str = "bf16", offload: str = "none") -> Setup:
    knobs = Knobs(precision=precision, zero_stage=stage, offload=offload, framework="openrlhf", release=release)
    return Setup(load_model("glm-4-9b-chat"), knobs, 1, 128, 2048, 8)


@pytest.mark.parametrize("version,line", [("0.5.0", "0.5"), ("0.5.3", "0.5"), ("0.5.4", "0.8"), ("0.8.9", "0.8")])
def test_the_05_line_ends_at_053(version, line):
    fw = adapter("openrlhf", version)
    assert (fw.zero_grad_accum == "fp32") == (line == "0.5")
    assert adapter("openrlhf", "0.10").zero_grad_accum == "param"


def test_zero_2_and_3_keep_their_gradient_partition_in_fp32():
    """ZeRO-3: stage3.py:498-501 (DeepSpeed 0.14.4) allocates the partition in the accumulation dtype; ZeRO-2:
    stage_1_and_2.py:771-784 the averaged partition. glm-4-9b-chat (9.4 B) over 8 ranks: 4.70 GB where the 0.8 line
    holds 2.35 GB."""
    T = trainable_params(_setup("0.5", 3))
    for stage in (2, 3):
        assert state_terms.gradients_bytes(_setup("0.5", stage)) == 4 * T // 8
        assert state_terms.gradients_bytes(_setup("0.8", stage)) == 2 * T // 8
    assert (4 - 2) * T // 8 == pytest.approx(2.35e9, rel=0.01)


def test_zero_1_under_bf16_keeps_every_gradient_in_fp32_too():
    """BF16_Optimizer (engine.py:1180-1182 picks it for bf16, fp32 accumulation, ZeRO-1, no offload) keeps an fp32
    buffer of every gradient (bf16_optimizer.py:148) beside backward's bf16 gradients."""
    T = trainable_params(_setup("0.5", 1))
    assert state_terms.gradients_bytes(_setup("0.5", 1)) == 2 * T + 4 * T
    assert state_terms.gradients_bytes(_setup("0.8", 1)) == 2 * T + 2 * T // 8


def test_fp16_reads_it_offload_and_fp16_zero_1_do_not():
    assert zero.fp32_grad_accum(_setup("0.5", 3, precision="fp16"))
    assert zero.fp32_accum_grads_bytes(_setup("0.5", 3, offload="optimizer"), 10, 2) is None
    assert zero.fp32_accum_grads_bytes(_setup("0.5", 1, precision="fp16"), 10, 2) is None
