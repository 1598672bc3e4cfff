"""TRL's DPO, KTO, GKD and PPO trainers set every nn.Dropout's p to 0 before training (disable_dropout_in_model):
PEFT's LoRA dropout then saves nothing (planner.estimate.lora.dropout_runs, Memory.zeroes_dropout); the real
measurement is tests/probes/test_disable_dropout.py."""

from __future__ import annotations

import pytest

from planner.config.spec import Knobs
from planner.config.workload import Workload
from planner.estimate.activation_terms import activations_bytes
from planner.estimate.lora import dropout_zeroed
from planner.estimate.setup import Setup
from planner.model.catalog import load_model

MODEL = load_model("qwen2.5-0.5b")


def saved(framework: str, kind: str, dropout: float, checkpointing: str = "off") -> int:
    knobs = Knobs(
        framework=framework,
        workload=Workload(kind=kind),
        lora_rank=16,
        lora_dropout=dropout,
        checkpointing=checkpointing,
    )
    return activations_bytes(Setup(MODEL, knobs, 2, 1, 1024))


@pytest.mark.parametrize(
    ("framework", "kind"),
    [("trl", "dpo"), ("trl", "kto"), ("swift", "dpo"), ("swift", "kto"), ("llamafactory", "dpo"), ("axolotl", "kto")],
)
def test_a_trainer_that_zeroes_dropout_saves_what_no_dropout_saves(framework, kind):
    assert dropout_zeroed(Knobs(framework=framework, workload=Workload(kind=kind), lora_rank=16))
    assert saved(framework, kind, 0.05) == saved(framework, kind, 0.0)


@pytest.mark.parametrize(("framework", "kind"), [("trl", "sft"), ("trl", "grpo"), ("openrlhf", "dpo"), ("hf", "sft")])
def test_elsewhere_lora_dropout_keeps_its_masks(framework, kind):
    """GRPO's disable_dropout is False by default (trl v1.9.0 grpo_config.py:447); SFT's trainers leave dropout as set;
    OpenRLHF's DPO is not TRL's (not read: its dropout is planned as set)."""
    assert not dropout_zeroed(Knobs(framework=framework, workload=Workload(kind=kind), lora_rank=16))
    # one byte a mask element at every adapted linear's input width (PEFT: a dropout an adapter), each row's 1,024
    # tokens (DPO's micro-batch of 2 pairs: 4 rows)
    widths = 4 * MODEL.text.hidden + 2 * MODEL.text.hidden + MODEL.text.intermediate  # q,k,v,o + gate,up + down
    tokens = Workload(kind=kind).rows(2) * 1024
    assert saved(framework, kind, 0.05) - saved(framework, kind, 0.0) == MODEL.text.layers * tokens * widths


def test_the_reason_names_the_trainer_and_where_it_was_read():
    line = dropout_zeroed(Knobs(framework="swift", workload=Workload(kind="kto"), lora_rank=16))
    assert "kto_trainer.py:32" in line and "disable_dropout_in_model" in line
    dpo = Knobs(framework="trl", workload=Workload(kind="dpo"), lora_rank=16)
    assert "dpo_trainer.py:913-916" in dropout_zeroed(dpo)


def test_gpt2s_own_dropout_masks_go_where_the_trainer_zeroes_them():
    """GPT-2's resid_pdrop (its nn.Dropout after attention and after the MLP, 1-byte masks of the hidden width: two a
    layer) runs under SFT and is zeroed with every nn.Dropout by TRL's KTO and DPO; the sim zeroes the same modules
    (probes.step.build_model) and its KTO step of a 4-layer GPT-2 agrees with the plan within 0.01%
    (tests/probes/test_disable_dropout.py)."""
    gpt2 = load_model("gpt2")
    tokens, t = 2 * 1024, gpt2.text

    def acts(kind: str) -> int:
        return activations_bytes(Setup(gpt2, Knobs(framework="trl", workload=Workload(kind=kind)), 2, 1, 1024))

    assert t.dropout > 0 and acts("sft") - acts("kto") == 2 * tokens * t.hidden * t.layers
