"""LLaMA-Factory's reward model (issue 49 item 1) read from its own example (tests/data/frameworks/llamafactory/
examples/train_lora/qwen3_lora_reward.yaml, v0.9.5: stage rm, LoRA on Qwen3-4B, cutoff 2,048) and planned as trl's
value-head model: one value a row over the chosen and the rejected row, the vocabulary head's logits made and cast
to fp32 at the forward's end (planner.estimate.heads.value_head_bytes, pinned in tests/probes/test_lf_valuehead.py),
where the same seq-cls under HF's Trainer (transformers' score head) makes none; written back as stage rm."""

from pathlib import Path

import pytest

from planner import advise, intake
from planner.config.spec import Knobs
from planner.errors import BadInput
from planner.estimate.heads import value_head_bytes
from planner.model.catalog import load_model

EXAMPLE = Path(__file__).parents[3] / "data/frameworks/llamafactory/examples/train_lora/qwen3_lora_reward.yaml"


def _check(**over) -> advise.CheckResult:
    reading = intake.read([str(EXAMPLE)])
    body = {**reading.request, "gpu": "h100", "gpus_per_node": 1, **over}
    return advise.check(advise.parse(advise.CheckRequest, body))


def test_stage_rm_reads_as_a_reward_models_pairs():
    r = intake.read([str(EXAMPLE)]).request
    assert (r["task"], r["num_labels"], r["negatives"], r["micro_batch"], r["seq_len"]) == ("seq-cls", 1, 1, 1, 2048)


def test_the_value_head_plan_counts_both_logits_of_the_chosen_and_the_rejected_row():
    plan = _check().plan
    text = load_model("qwen3-4b").text
    rows = 2  # micro-batch 1: the chosen and the rejected row
    assert plan.memory.detail["logits_loss_bytes"] == value_head_bytes(rows * 2048, text.vocab, text.hidden, 2, True)
    # HF's Trainer runs the same seq-cls with transformers' score head: one output a token, no vocabulary logits
    hf = _check(framework="hf").plan
    assert hf.memory.detail["logits_loss_bytes"] < plan.memory.detail["logits_loss_bytes"] // 100


def test_other_seq_cls_runs_are_refused_and_the_reward_model_is_written_as_stage_rm():
    with pytest.raises(BadInput, match="give --num-labels 1 --negatives 1"):
        Knobs.make(task="seq-cls", framework="llamafactory", negatives=0)
    from planner.frameworks.llamafactory.writer import method_entries

    plan = _check().plan
    entries = {key: value for key, value, _ in method_entries(plan, load_model("qwen3-4b"))}
    assert entries["stage"] == "rm"
