"""CHORD (planner.estimate.chord): ms-swift's expert SFT rows inside GRPO's micro-step, after its forward, one backward
over both losses (v4.6.0 swift/rlhf_trainers/grpo_trainer.py:1223-1224, utils.py:1633-1675)."""

import pytest

from planner.config.spec import Knobs
from planner.config.workload import Workload
from planner.errors import BadInput
from planner.estimate import activation_terms, chord, ref_in_step, rl
from planner.estimate import memory as mem
from planner.estimate.setup import Setup
from planner.model import catalog, hardware

CAP = 80 << 30


def _setup(sft_rows: int, framework: str = "swift") -> Setup:
    w = Workload(kind="grpo", max_prompt_length=2048, max_completion_length=1024, chord_sft_batch=sft_rows)
    knobs = Knobs.make(framework=framework, workload=w, zero_stage=3, checkpointing="full", attention="flash")
    return Setup(catalog.load_model("qwen2.5-1.5b"), knobs, 4, 8, w.seq_len(), 8, 1)


def test_the_sft_rows_join_grpos_saved_tensors():
    """The chord-sft phase: GRPO's saved activations and log-probs beside an SFT step of 2 rows of 2,048 tokens at
    its own peak; without CHORD no such phase."""
    s = _setup(2)
    sft = mem.breakdown(chord.sft_setup(s), CAP)
    terms = rl.phase_terms(s, CAP, mem.breakdown(s, CAP))["chord-sft"]
    assert terms["saved_activations_bytes"] == activation_terms.activations_bytes(s)
    assert terms["policy_logps_bytes"] == ref_in_step.policy_head_saved_bytes(s)
    assert terms["chord_sft_bytes"] == sft.activations_bytes + sft.temp_bytes > 0
    assert (chord.sft_setup(s).micro_batch, chord.sft_setup(s).seq_len) == (2, 2048)
    assert "chord-sft" not in rl.breakdown(_setup(0), CAP).phases


def test_more_sft_rows_cost_more_memory_and_time():
    one, four = _setup(1), _setup(4)
    assert rl.breakdown(four, CAP).phases["chord-sft"] > rl.breakdown(one, CAP).phases["chord-sft"]
    hw = hardware.resolve("h100-80gb", 8, 1)
    assert rl.step_time(four, hw).compute_s > rl.step_time(one, hw).compute_s > rl.step_time(_setup(0), hw).compute_s


@pytest.mark.parametrize(
    "fields,needle",
    [
        ({"framework": "trl"}, "takes no CHORD SFT rows"),
        ({"framework": "swift", "release": "3.7"}, "takes no CHORD SFT rows"),
        ({"framework": "swift", "sequence_parallel": 2, "attention": "flash"}, "not planned under the split"),
    ],
)
def test_chord_is_refused_where_it_does_not_run(fields, needle):
    w = {"kind": "grpo", "chord_sft_batch": 1}
    with pytest.raises(BadInput, match=needle):
        Knobs.make(workload=w, **fields)
