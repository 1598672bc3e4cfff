"""DPO padding-free and under Ulysses sequence parallel (planner/estimate/recipe_terms.py row_shape and
packed_row_grad_bytes, planner/estimate/rl.py on the rank's view), without torch; the measurements behind them are
tests/probes/test_dpo_packed.py's."""

from dataclasses import replace

import pytest

from planner.config.spec import Knobs
from planner.config.workload import Workload
from planner.estimate import recipe_terms
from planner.estimate.rl import breakdown
from planner.estimate.setup import Setup
from planner.model.catalog import load_model


def _dpo(batching: str = "padded", sp: int = 1, max_length: int = 96) -> Knobs:
    w = Workload(kind="dpo", max_length=max_length, max_prompt_length=32, logprobs="full")
    return Knobs(
        workload=w, batching=batching, attention="flash", framework="swift", precision="fp32", sequence_parallel=sp
    )


def test_a_packed_micro_batch_of_pairs_is_one_row_of_both_rows_tokens():
    """trl v0.28.0 dpo_trainer.py:1643-1650: chosen and rejected rows flattened into one row."""
    assert recipe_terms.row_shape(_dpo(), 2, 96) == (4, 96)
    assert recipe_terms.row_shape(_dpo("packed"), 2, 96) == (1, 4 * 96)


def test_the_packed_rows_log_softmax_gradient_is_the_measured_step_difference():
    """Real CPU steps (tests/probes/test_dpo_packed.py, fp32, 2 pairs x 96 tokens, `logprobs full`): the packed
    step's training peak is 106,638,336 bytes, the padded one's 100,257,792: 6,380,544 more (within 2%)."""
    t = replace(load_model("debug-llama").text, vocab=4096)  # the term weighs the vocabulary alone
    assert recipe_terms.packed_row_grad_bytes(t, _dpo("packed"), 4 * 96, "fp32") == pytest.approx(6_380_544, rel=0.02)
    assert recipe_terms.packed_row_grad_bytes(t, _dpo(), 4 * 96, "fp32") == 0


def test_dpo_under_ulysses_plans_each_phase_on_the_ranks_slice():
    """Under --sequence-parallel 2 each rank holds half of every row (ms-swift's DPO, swift/rlhf_trainers/
    rlhf_mixin.py:66-67): the reference forward inside the micro-step is the one of rows half as long."""
    model = load_model("qwen2.5-0.5b")
    split = breakdown(Setup(model, _dpo(sp=2, max_length=2048), 2, 1, 2048, gpus_per_node=2), 80 * 2**30)
    half = breakdown(Setup(model, _dpo(max_length=2048), 2, 1, 1024, gpus_per_node=2), 80 * 2**30)
    assert split.detail["forward_transient_bytes"] == half.detail["forward_transient_bytes"]
    assert split.detail["policy_logps_bytes"] == half.detail["policy_logps_bytes"]


def test_a_packed_kto_micro_batch_is_one_row_of_its_rows_and_the_kl_batch_another():
    """ms-swift's KTO collator (4.6.0 swift/template/base.py:1884-1893) packs the micro-batch's rows, and apart from
    them their KL rows (each prompt with its neighbour's completion, pipelines/train/kto.py:14-28), each into one row:
    the kl-forward and the training step each run one row of micro x max_length tokens, half of DPO's pair row."""
    w = Workload(kind="kto", max_length=96, max_prompt_length=32, logprobs="full")
    kto = Knobs(workload=w, batching="packed", attention="flash", framework="swift", precision="fp32")
    assert recipe_terms.row_shape(kto, 2, 96) == (1, 2 * 96)
    model = load_model("qwen2.5-0.5b")
    packed = breakdown(Setup(model, kto, 2, 1, 96), 80 * 2**30).phases
    padded = breakdown(Setup(model, kto.model_copy(update={"batching": "padded"}), 2, 1, 96), 80 * 2**30).phases
    phases = {k.split(":")[0]: k for k in packed}
    assert set(phases) == {"training", "kl-forward", "reference-forward"}
    # the no-grad passes hold the logits and one row's log_softmax: the packed row's is both rows' (2 x 96 tokens)
    excess = packed[phases["kl-forward"]] - padded[phases["kl-forward"]]
    assert excess == 4 * (2 * 96 - 96) * model.text.vocab
