"""What TRL's 1.0, 1.6, 1.7, 1.10 and 1.14 lines (v1.0.0 .. 1.14.x) run otherwise than the newest, 1.15 .. 1.16
(planner/frameworks/trl/releases.py ONE_X_RUNS, KTO_WHOLE, KTO_FUSED_ENTROPY): Liger's loss with SFT, planned as
Liger's (not the chunked head of 1.7 .. 1.14), and KTO, which they score from the whole logits, planned at 1.0, 1.7
and 1.10 (v1.0.0 .. v1.5.x, v1.7.0 .. 1.13.x) and refused at 1.6 and 1.14. The Liger cases
failed before ONE_X_RUNS (the lines refused --loss fused, as 1.16's fused head does: sft_trainer.py:1127-1140), the 1.7
one again before temp_terms planned a Liger plan's loss as Liger's (qwen2.5-0.5b 4 x 4096: 0.93 GiB, the chunked
head's, in place of Liger's 0.72); the KTO case before KTO_WHOLE (the lines planned TRL 1.16's fused KTO head)."""

from planner.config.spec import Knobs
from planner.config.workload import Workload
from planner.estimate import temp_terms
from planner.estimate.setup import Setup
from planner.frameworks import adapter
from planner.model.catalog import load_model

BASE = dict(Knobs(framework="trl"))  # every knob at its default
LIGER = {**BASE, "loss": "fused"}
KTO = {**BASE, "workload": Workload(kind="kto", max_length=1024)}


def _logits_loss_bytes(release: str, loss: str) -> int:
    """qwen2.5-0.5b, 4 rows of 4096 tokens, bf16: the logits-and-loss term of TRL's SFT at `release`."""
    knobs = Knobs(framework="trl", release=release, loss=loss, precision="bf16")
    return temp_terms.logits_loss_bytes(Setup(load_model("qwen2.5-0.5b"), knobs, 4, 1, 4096))


def test_the_lines_before_1_15_run_liger_with_sft_and_plan_its_loss():
    assert adapter("trl", "1.16").cannot(LIGER)[0] == "loss"  # the fused head refuses Liger
    for line in ("1.0", "1.6", "1.7", "1.10", "1.14"):
        assert adapter("trl", line).cannot(LIGER) is None, line
    liger = _logits_loss_bytes("1.0", "fused")
    assert _logits_loss_bytes("1.7", "fused") == liger  # chunked_nll falls back to nll under Liger
    # Liger's chunk beside the hidden states' and the head's gradients, neither the full logits (1.0's nll) nor the
    # chunked head's tiles (1.7's chunked_nll)
    assert liger not in (_logits_loss_bytes("1.0", "standard"), _logits_loss_bytes("1.7", "standard"))


def test_the_lines_before_1_15_plan_kto_from_the_whole_logits_but_1_6_and_1_14():
    """1.0, 1.7 and 1.10 (v1.0.0 .. v1.5.x, v1.7.0 .. 1.13.x) plan it (planner.estimate.kto_entropy,
    tests/planner/frameworks/trl/test_kto_entropy.py)."""
    assert adapter("trl", "1.16").cannot(KTO) is None  # 1.16's KTO runs the fused head (kto_trainer.py:1364-1365)
    for line in ("1.0", "1.7", "1.10"):
        assert adapter("trl", line).cannot(KTO) is None, line
    for line in ("1.6", "1.14"):
        field, why = adapter("trl", line).cannot(KTO)
        assert field == "workload" and "whole logits" in why and "kto_trainer.py" in why, (line, why)
