"""TRL's SFT loss is its fused log-prob head (planner/frameworks/trl/__init__.py: sft_head "fused-logprob"): a plan for
`--framework trl` counts recipe_terms.logprob_head_bytes where HF's Trainer (and TRL 0.x, `trl-0`) counts the full
logits. Pinned by the
live-bytes tracker on a real step of each trainer (tests/probes/trl_sft_step.py): a Llama of hidden 256, 2 layers,
a 65,536-token vocabulary, micro-batch 2 x 512 tokens, fp32, fused AdamW, measured 2026-11-24 as
HF 1,273,938,432 bytes and TRL 670,786,048 (memplan: 1,277,312,000 and 675,179,488). Tolerance 2%."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from planner import advise

ROOT = Path(__file__).resolve().parents[2]


def measured(kind: str, config_dir: Path) -> int:
    r = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "probes" / "trl_sft_step.py"), kind, str(config_dir)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])["peak_bytes"]


def predicted(framework: str, config_dir: Path) -> int:
    req = {
        "model": str(config_dir / "config.json"),
        "gpu": "h100",
        "micro_batch": 2,
        "seq_len": 512,
        "precision": "fp32",
        "optimizer": "adamw-fused",
        "checkpointing": "off",
        "framework": framework,
        "evidence": "analytic",
    }
    return advise.check(advise.parse(advise.CheckRequest, req)).plan.memory.peak_allocated_bytes


@pytest.mark.parametrize("kind", ["hf", "trl"])
def test_a_trl_sft_step_holds_the_fused_head_and_hfs_the_full_logits(kind, tmp_path):
    pytest.importorskip("trl")
    pytest.importorskip("datasets")
    got = measured(kind, tmp_path)
    want = predicted(kind, tmp_path)
    assert abs(want - got) / got < 0.02, (kind, want, got)
    if kind == "trl":  # the full logits' plan would be 90% over: the test can tell them apart
        assert abs(predicted("hf", tmp_path) - got) / got > 0.5
    else:  # TRL before 1.0 takes HF's loss from the full logits (trl 0.29.1 sft_trainer.py:1234-1236)
        assert predicted("trl-0", tmp_path) == want
