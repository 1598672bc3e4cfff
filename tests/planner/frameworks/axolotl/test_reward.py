"""axolotl's reward models (planner/frameworks/axolotl/reader_task.py, issue 49 item 1): `reward_model: true` is TRL's
RewardTrainer, a one-label score head over each pair's chosen and rejected rows (memplan's seq-cls with one negative),
read from v0.18.0 examples/qwen2/reward-model.yaml and written back; process_reward_model (a token classifier) and a
classifier without reward_model are named, never planned as a causal LM silently; the rows a pair runs, measured in
the TRL axolotl pins."""

import os
import subprocess
from pathlib import Path

import pytest

from planner import advise, checkconfig, intake
from planner.errors import BadInput
from planner.estimate.heads import rows_per_example
from planner.export import launch

DATA = Path(__file__).resolve().parents[3] / "data" / "frameworks" / "axolotl" / "examples"
SFT = "base_model: Qwen/Qwen2.5-0.5B\nmicro_batch_size: 2\nsequence_len: 2048\nbf16: true\n{extra}"


def _read(tmp_path: Path, text: str, pins: str = ""):
    if pins:
        (tmp_path / "requirements.txt").write_text(pins)
    (tmp_path / "axolotl.yaml").write_text(text)
    return intake.read([str(tmp_path / "axolotl.yaml")])


def test_reward_model_is_a_one_label_score_head_over_chosen_and_rejected_rows():
    r = intake.read([str(DATA / "qwen2/reward-model.yaml")])
    want = {"task": "seq-cls", "num_labels": 1, "negatives": 1, "seq_len": 2048, "micro_batch": 2}
    assert {k: r.request.get(k) for k in want} == want
    task = next(s for s in r.settings if s.field == "task")
    assert task.key == "reward_model" and "core/builders/causal.py:160-161" in task.source
    out = checkconfig.check_config([str(DATA / "qwen2/reward-model.yaml")], {"gpu": "h100"})
    assert (out.plan.knobs.task, out.plan.knobs.negatives, out.plan.knobs.num_labels) == ("seq-cls", 1, 1)


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ("process_reward_model: true\nmodel_type: AutoModelForTokenClassification\nnum_labels: 2\n", "PRMTrainer"),
        ("model_type: AutoModelForSequenceClassification\nnum_labels: 3\n", "a classifier without reward_model"),
    ],
    ids=["prm", "classifier"],
)
def test_a_token_classifier_or_a_classifier_alone_is_named_not_planned(tmp_path, extra, named):
    r = _read(tmp_path, SFT.format(extra=extra))
    assert "task" not in r.request and "num_labels" not in r.request
    line = next(x for x in r.unplanned if named in x)
    assert "num_labels" in line and "not planned" in line


def test_reward_model_came_at_0_5_and_0_4_drops_it(tmp_path):
    """v0.4.0 has no reward_model (its src never reads it); v0.5.0 v0_4_1/__init__.py:590 takes it."""
    old = _read(tmp_path, SFT.format(extra="reward_model: true\n"), "axolotl==0.4.0\n")
    assert "task" not in old.request and any("not an axolotl 0.4 key" in x for x in old.unplanned)
    new = _read(tmp_path, SFT.format(extra="reward_model: true\n"), "axolotl==0.5.0\n")
    assert new.request["task"] == "seq-cls"


def test_a_reward_model_plan_is_written_and_read_back(tmp_path):
    body = {"model": "qwen2.5-0.5b", "gpu": "h100", "gpus_per_node": 2, "micro_batch": 2, "seq_len": 2048}
    body |= {"framework": "axolotl", "task": "seq-cls", "negatives": 1, "lora_rank": 8, "checkpointing": "full"}
    res = advise.check(advise.parse(advise.CheckRequest, body))
    model, hw, goal = res.context
    files = launch.files(res.plan, hw, model, goal.seq_len)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    yaml = files["axolotl.yaml"]
    assert "reward_model: true" in yaml and "num_labels: 1" in yaml and "bradley_terry.chat_template" in yaml
    main = launch.LAUNCH_NAME if launch.LAUNCH_NAME in files else "axolotl.yaml"
    back = checkconfig.check_config([str(tmp_path / main)], {"gpu": "h100"})
    assert dict(back.plan.knobs) == dict(res.plan.knobs)


def test_a_score_head_without_pairs_is_refused_in_one_line():
    body = {"model": "qwen2.5-0.5b", "gpu": "h100", "micro_batch": 2, "seq_len": 2048, "framework": "axolotl"}
    with pytest.raises(BadInput, match="give --negatives 1") as e:
        advise.check(advise.parse(advise.CheckRequest, {**body, "task": "seq-cls"}))
    assert "\n" not in str(e.value)


@pytest.mark.sweep  # imports torch and TRL in axolotl's venv (~6 s of CPU)
@pytest.mark.skipif(not os.environ.get("MEMPLAN_AXOLOTL_PYTHON"), reason="axolotl's venv (Makefile FRAMEWORK_PYTHONS)")
def test_the_collator_axolotl_gives_a_reward_model_runs_two_rows_a_pair_padded_to_sequence_len():
    """Measured: axolotl 0.19.0's collator for reward_model (TRL 1.9.0's DataCollatorForPreference, with the
    pad_to_multiple_of its builder passes for pad_to_sequence_len, core/builders/causal.py:386-390) stacks a
    micro-batch of 2 pairs (chosen 100 and 50 tokens, rejected 300 and 7) into input_ids (4, 2048): the rows memplan
    plans (heads.rows_per_example) at seq_len 2048, exactly."""
    code = (
        "import math;from trl.trainer.reward_trainer import DataCollatorForPreference as C;"
        "c = C(pad_token_id=0, pad_to_multiple_of=64 * math.ceil(2048 / 64));"
        "x = c([{'chosen_ids': [1] * 100, 'rejected_ids': [2] * 300}, {'chosen_ids': [3] * 50, 'rejected_ids': [4] * 7}]);"
        "print(*x['input_ids'].shape)"
    )
    out = subprocess.run([os.environ["MEMPLAN_AXOLOTL_PYTHON"], "-c", code], capture_output=True, text=True, check=True)
    rows, length = map(int, out.stdout.split())
    assert (rows, length) == (2 * rows_per_example("seq-cls", 1), 2048)
