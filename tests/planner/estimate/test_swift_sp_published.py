"""ms-swift's own published memory for one run at sequence parallel 1, 2, 4 and 8 against the plan of that run
(issue 48 item 6).

Source: ms-swift PR #5522 "Merge ulysses and ring-attention" (https://github.com/modelscope/ms-swift/pull/5522,
2025-08-25), the memory column of its table: `NPROC_PER_NODE=8 swift sft --model Qwen/Qwen2.5-3B-Instruct
--train_type lora --torch_dtype bfloat16 --per_device_train_batch_size 4 --target_modules all-linear
--gradient_accumulation_steps 8 --max_length 65536 --attn_impl flash_attn --sequence_parallel_size N
--use_logits_to_keep false --padding_free true` on rows of 9,000 tokens. Gradient checkpointing is ms-swift's default
(swift/trainers/arguments.py:135); padding_free packs the micro-batch's 4 rows into one row of 36,000 tokens, which
each sequence-parallel group of N ranks shares (swift/sequence_parallel/utils.py:108-144: the sampler deals rows over
the data-parallel groups only). The PR names no GPU; ms-swift's sequence-parallel examples of the time ran on
"4 * A100" (examples/train/sequence_parallel/ring_attention/sequence_parallel.sh:1, before the PR): an A100 80GB.

memory(GiB) is torch.cuda.max_memory_reserved on rank 0 (swift/trainers/patcher.py:27,
swift/utils/torch_utils.py:433-440), which the plan's device total models: peak allocated x (1 + fragmentation), plus
the CUDA context and NCCL's buffers outside the allocator. Tolerances: the ratios to SP 1 within 0.10 (the issue's
bar); each split run's total within 10% of its reserved memory.

At SP 1 the run sat at the card's edge, where the caching allocator frees its cache and retries before it fails
(c10/cuda/CUDACachingAllocator.cpp, malloc: release_cached_blocks): it reserved 3.9% over the plan's 72.5 GiB
allocated, where SP 2, 4 and 8 reserved 23% to 25% over theirs. Without the A100's edge measured (it has no calibration
file) the plan keeps its 13% prior there and calls the run too big for the card it ran on: the xfail."""

import pytest

from planner.config.spec import GIB, Knobs
from planner.estimate import memory
from planner.estimate.setup import Setup
from planner.model.catalog import load_model

PUBLISHED_GIB = {1: 75.35, 2: 48.5, 4: 27.78, 8: 17.92}  # PR #5522's table: SP size -> memory(GiB)
CARD = 80 * GIB  # A100 80GB


def _plan(sp: int):
    knobs = Knobs(
        framework="swift",
        lora_rank=8,
        lora_targets="all-linear",
        lora_dropout=0.05,  # ms-swift 4.6.0 default (swift/arguments/tuner_args.py:135)
        precision="bf16",
        checkpointing="full",
        batching="packed",
        attention="flash",
        sequence_parallel=sp,
    )
    return memory.breakdown(Setup(load_model("qwen2.5-3b"), knobs, 4, 8, 9000, 8, 1, gpu="a100-80gb"), CARD)


@pytest.mark.parametrize("sp", [2, 4, 8])
def test_the_sequence_parallel_ratios_follow_ms_swifts_published_ones(sp):
    published = PUBLISHED_GIB[sp] / PUBLISHED_GIB[1]  # 0.644, 0.369, 0.238
    planned = _plan(sp).device_total_bytes / _plan(1).device_total_bytes  # 0.548, 0.323, 0.210
    assert planned == pytest.approx(published, abs=0.10)


@pytest.mark.parametrize("sp", [2, 4, 8])
def test_a_split_rank_needs_about_what_ms_swift_reserved(sp):
    assert _plan(sp).device_total_bytes / GIB == pytest.approx(PUBLISHED_GIB[sp], rel=0.10)  # -5.9%, -3.4%, -2.6%


def test_the_loss_under_sequence_parallel_is_a_slice_of_the_unsplit_ones():
    """ms-swift's loss under SP on the rank's tokens costs what transformers' loss costs on all of them, split: both see
    fp32 logits (planner.estimate.recipe_terms.swift_sp_loss_bytes)."""
    whole = _plan(1).detail["logits_loss_bytes"]
    for sp in (2, 4, 8):
        assert _plan(sp).detail["logits_loss_bytes"] == pytest.approx(whole / sp, rel=1e-4)


@pytest.mark.xfail(strict=True, reason="no edge calibration for the A100: the plan keeps 13% fragmentation at the edge")
def test_the_unsplit_run_fits_the_card_it_ran_on():
    assert _plan(1).device_total_bytes <= CARD  # 83.2 GiB planned; ms-swift reserved 75.35 GiB
