"""The task a configuration trains (planner/intake/tasks.py): ms-swift's --task_type, --num_labels and the rows its
collators and losses put in an example; TRL's RewardConfig as a one-label seq-cls head over chosen and rejected rows."""

import pytest

from planner import intake

SWIFT = "swift sft --model Qwen/Qwen2.5-0.5B --tuner_type lora {flags}\n"


def read(tmp_path, text: str, name: str = "train.sh") -> dict:
    p = tmp_path / name
    p.write_text(text)
    return intake.read([str(p)])


@pytest.mark.parametrize(
    "text, want",
    [
        (SWIFT.format(flags="--num_labels 3"), {"task": "seq-cls", "num_labels": 3}),  # task_type follows num_labels
        (SWIFT.format(flags="--task_type reranker"), {"task": "reranker", "negatives": 7}),  # MAX_NEGATIVE_SAMPLES
        ("MAX_NEGATIVE_SAMPLES=3 " + SWIFT.format(flags="--task_type reranker"), {"task": "reranker", "negatives": 3}),
        (
            "INFONCE_HARD_NEGATIVES=4 " + SWIFT.format(flags="--task_type embedding"),
            {"task": "embedding", "negatives": 4},
        ),
        (SWIFT.format(flags="--task_type generative_reranker"), {"task": "generative-reranker", "negatives": 7}),
    ],
)
def test_swift_task_type_and_its_rows(tmp_path, text, want):
    r = read(tmp_path, text)
    assert {k: r.request.get(k) for k in want} == want


def test_swift_embedding_without_fixed_negatives_says_so(tmp_path):
    r = read(tmp_path, SWIFT.format(flags="--task_type embedding"))
    assert r.request["task"] == "embedding" and "negatives" not in r.request
    assert any("INFONCE_HARD_NEGATIVES" in line for line in r.unplanned)


def test_swift_decision_task_is_named_not_planned(tmp_path):
    r = read(tmp_path, SWIFT.format(flags="--task_type decision"))
    assert "task" not in r.request and any("--task_type decision is not planned" in line for line in r.unplanned)


def test_trl_reward_config_is_a_one_label_score_head_over_pairs(tmp_path):
    script = (
        "from trl import RewardConfig, RewardTrainer\n"
        "args = RewardConfig(output_dir='o', per_device_train_batch_size=4)\n"
        "RewardTrainer(model='Qwen/Qwen2.5-0.5B', args=args).train()\n"
    )
    r = read(tmp_path, script, "train_rm.py")
    assert r.framework == "trl"
    assert {k: r.request.get(k) for k in ("task", "negatives", "seq_len")} == {
        "task": "seq-cls",
        "negatives": 1,
        "seq_len": 1024,  # RewardConfig's max_length (trl/trainer/reward_config.py:144)
    }
