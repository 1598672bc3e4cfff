"""verl's fused log-prob head (model.use_fused_kernels) read, planned and refused elsewhere: verl v0.7.0's own
Qwen2.5-VL-7B GRPO example sets it, and its old log-probs and reference passes score 512 tokens at a time
(planner.estimate.role_heads.fused_*, pinned to verl's own function in tests/probes/test_verl_fused_head.py)."""

from pathlib import Path

import pytest

from planner import advise, checkconfig
from planner.errors import BadInput
from planner.estimate import role_heads

EXAMPLE = Path(__file__).parents[2] / "data" / "frameworks" / "verl" / "examples" / "run_qwen2_5_vl-7b.sh"
PHASE = "colocated (8 GPUs): {}"
GIB = 2**30


def _phases(**roles) -> dict[str, int]:
    given = {"gpu": "h100", **({"workload": {"roles": roles}} if roles else {})}
    return checkconfig.check_config([str(EXAMPLE)], given).plan.memory.phases


def test_the_examples_log_prob_passes_hold_a_chunk_of_logits_not_all_of_them():
    """Read from the file (use_fused_kernels=True): the old log-probs and the reference's forward hold one 512-token
    chunk's fp32 logits; `--fused-kernels false` beside the file gives the whole logits back (the user's word last),
    where the old log-probs were the peak (69.4 GiB: does not fit an H100). The difference is the heads' own: the
    passes are the same otherwise."""
    fused, whole = _phases(), _phases(fused_kernels=False)
    old, ref = PHASE.format("old-logps"), PHASE.format("reference-forward")
    assert fused[old] < whole[old] and fused[ref] < whole[ref]
    assert whole[old] > 65 * GIB > 25 * GIB > fused[old]
    # both passes at the same tokens hold the same chunk: the old log-probs' entropy costs nothing more
    assert fused[old] == fused[ref]
    chunk = role_heads.fused_logprob_pass_head_bytes(20 * 3072, 152064, 512, 4)
    assert chunk < 2 * GIB  # 4 x 512 x 152,064 fp32 values and the per-token outputs


def test_the_fused_head_is_verls_alone():
    body = {"model": "qwen2.5-1.5b", "gpu": "h100", "gpus_per_node": 8, "global_batch": 64, "framework": "openrlhf"}
    body["workload"] = {"kind": "grpo", "num_generations": 8, "max_completion_length": 256, "roles": {}}
    body["workload"]["roles"]["fused_kernels"] = True
    with pytest.raises(BadInput, match="--fused-kernels true is verl's model.use_fused_kernels.*--framework verl"):
        advise.suggest(advise.parse(advise.SuggestRequest, body), with_nearest=False)
