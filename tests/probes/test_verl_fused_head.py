"""verl's fused log-prob head (model.use_fused_kernels) against planner.estimate.role_heads' fused terms: verl's own
FusedLinearForPPO run on CPU in each release's venv (probes/verl_fused_head.py: 0.9.1 in .fwenv/verl, 0.6.1 in
.fwenv-old), every storage counted by probes.tracker. One chunk (256 tokens, under verl's 512) and two with a partial
third (1,300: the previous chunk's gradients live into the next), at a hidden size near the chunk's tokens and one far
under them (which of the backward's two moments is the peak turns on it), at a 1,024-token vocabulary (bf16 matmuls are
slow on CPU). Measured: every peak within the terms' per-token allowance (FUSED_PER_TOKEN, 16 bytes) and a few
allocator blocks."""

import os

import pytest

from planner.estimate import role_heads
from planner.frameworks import FRAMEWORKS
from tests.probes.venvprobe import run_probe

VOCAB, CHUNK = 1024, 512
ROUNDING = 8 * 512  # a few of the allocator's 512-byte blocks (probes.tracker) over the chunk's small tensors
# one chunk at a hidden size near its tokens (the matmuls' moment is the backward's peak), two and a partial third at a
# small one (the logits' gradient is): 52 s of a worker in make test at four shapes (stop 70), two since
SHAPES = [(256, 1024, VOCAB), (1300, 64, VOCAB)]
# release -> (its venv's python, the fp32 logits-sized tensors a no-grad chunk holds: torch_functional.py at each)
RELEASES = {
    "0.9.1": (os.environ.get("MEMPLAN_VERL_PYTHON"), 3),
    "0.6.1": (os.path.join(os.environ.get("MEMPLAN_FWENV_OLD", "/nonexistent"), "verl-0.6.1", "bin", "python"), 4),
}


def _measured(python: str) -> list[dict]:
    return run_probe(python, "verl_fused_head.py", *(",".join(map(str, s)) for s in SHAPES), timeout=600)


@pytest.mark.parametrize("release", list(RELEASES))
def test_the_fused_terms_are_verls_own_heads_peaks(release):
    python, copies = RELEASES[release]
    if not python or not os.path.exists(python):
        pytest.skip(f"no venv with verl {release} (make fwenv / fwenv-old name them)")
    for row in _measured(python):
        assert row["verl"] == release
        t, h, v = row["tokens"], row["hidden"], row["vocab"]
        nograd = role_heads.fused_logprob_pass_head_bytes(t, v, CHUNK, copies)
        assert -ROUNDING <= nograd - row["nograd"] <= role_heads.FUSED_PER_TOKEN * t + ROUNDING, row
        for key, entropy in (("update", "off"), ("update_entropy", "on")):
            planned = role_heads.fused_update_head_bytes(t, v, h, 2, entropy, True, CHUNK)
            assert -ROUNDING <= planned - row[key] <= role_heads.FUSED_PER_TOKEN * t + ROUNDING, (key, row)


def test_verls_line_plans_the_hungrier_releases_chunk():
    """The 0.7 line runs 0.7.0's file (4 fp32 copies a no-grad chunk) and 0.9.1's (3): planned at 4, 512 tokens."""
    engine = FRAMEWORKS["verl"].role_engine
    assert (engine.fused_chunk_tokens, engine.fused_logprob_fp32_copies) == (CHUNK, 4)
    assert role_heads.fused_head("verl", True) == (CHUNK, 4)
    assert role_heads.fused_head("verl", False) == role_heads.fused_head("openrlhf", True) == (0, 0)
