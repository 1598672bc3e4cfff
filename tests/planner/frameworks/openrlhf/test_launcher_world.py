"""OpenRLHF's DPO and SFT scripts give the global batch (--train_batch_size) and the micro-batch; DeepSpeed splits the
batch over the launcher's GPUs (OpenRLHF utils/deepspeed/deepspeed.py: batch / micro / world). Where `deepspeed
--module` names no GPU count (every visible one), the count given as a flag is the world the accumulation is derived
from, so that the plan trains the script's batch: OpenRLHF#384's 128 on 8 GPUs is 16 micro-steps of 1, not 128."""

from pathlib import Path

import pytest

from planner.checkconfig import check_config

ROOT = Path(__file__).resolve().parents[4]
ISSUE_384 = ROOT / "tests" / "field" / "openrlhf-384-glm4-9b-dpo-z3-8xa100" / "train_dpo.sh"
SFT = """deepspeed --module openrlhf.cli.train_sft \\
   --pretrain Qwen/Qwen2.5-0.5B-Instruct \\
   --train_batch_size 64 \\
   --micro_train_batch_size 2 \\
   --max_len 1024 \\
   --zero_stage 2 \\
   --bf16
"""


def _split(result) -> tuple[int, int, int, int]:
    p = result.plan
    return p.micro_batch, p.grad_accum, p.world_size, p.global_batch


def _accum_row(result) -> dict:
    return next(r for r in result.config["settings"] if r["field"] == "grad_accum")


def test_the_dpo_batch_is_split_over_the_flags_gpus():
    result = check_config([str(ISSUE_384)], {"gpu": "a100-80gb", "gpus_per_node": 8})
    assert _split(result) == (1, 16, 8, 128)
    assert _accum_row(result)["source"].startswith("derived again from the flags")


@pytest.mark.parametrize("gpus,accum", [(4, 8), (8, 4)])
def test_the_sft_batch_is_split_over_the_flags_gpus(tmp_path, gpus, accum):
    script = tmp_path / "train_sft.sh"
    script.write_text(SFT)
    result = check_config([str(script)], {"gpu": "h100", "gpus_per_node": gpus})
    assert _split(result) == (2, accum, gpus, 64)


def test_without_the_count_the_reading_asks_for_it(tmp_path):
    """Every visible GPU is the host's to say: one line asks for --gpus-per-node, and one GPU trains the batch."""
    script = tmp_path / "train_sft.sh"
    script.write_text(SFT)
    result = check_config([str(script)], {"gpu": "h100"})
    assert any("every visible GPU" in n and "pass --gpus-per-node" in n for n in result.config["unplanned"])
    assert _split(result) == (2, 32, 1, 64)
