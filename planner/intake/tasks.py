"""The task a framework's configuration trains (planner.config.knobfields `task`, `num_labels`, `negatives`):
ms-swift 4.6.0's `--task_type` / `--num_labels` and the environment its collators and losses read."""

from __future__ import annotations

from planner.intake.collect import SWIFT, Collector, as_int, default, one
from planner.intake.flags import Flag

S = "swift/"
# --task_type (swift/arguments/base_args/model_args.py:72) -> memplan's task
SWIFT_TASKS = {
    "causal_lm": "causal-lm",
    "seq_cls": "seq-cls",
    "embedding": "embedding",
    "reranker": "reranker",
    "generative_reranker": "generative-reranker",
}
RERANKER_NEGATIVES = 7  # MAX_NEGATIVE_SAMPLES' default (swift/template/base.py:1948-1949), one positive


def read_swift(c: Collector, f: dict[str, Flag], env: dict[str, str], where: str) -> None:
    """--task_type, or seq_cls where --num_labels is given without it (swift/model/model_meta.py:299-307); the rows
    an example brings: an embedding's hard negatives (INFONCE_HARD_NEGATIVES, else the dataset's), a reranker's
    negative documents (MAX_NEGATIVE_SAMPLES)."""
    labels = f.get("num_labels")
    if "task_type" in f:
        given, src = str(one(f["task_type"].value)), f["task_type"].source
    elif labels is not None:
        given, src = "seq_cls", default(SWIFT, f"{S}model/model_meta.py:299-305", "task_type seq_cls with num_labels")
    else:
        return
    task = SWIFT_TASKS.get(given)
    if task is None:
        c.note(f"{src} (--task_type {given} is not planned yet; planned as causal_lm)")
        return
    c.set("task", task, src, "--task_type")
    if labels is not None and task == "seq-cls":
        c.number("num_labels", as_int(one(labels.value)), labels.source, "--num_labels")
    if task == "embedding":
        _negatives(c, env, "INFONCE_HARD_NEGATIVES", None, where)
    elif task in ("reranker", "generative-reranker"):
        _negatives(c, env, "MAX_NEGATIVE_SAMPLES", RERANKER_NEGATIVES, where)


def _negatives(c: Collector, env: dict[str, str], name: str, fallback: int | None, where: str) -> None:
    if name in env:
        c.number("negatives", as_int(env[name]), f"{where} ({name}={env[name]})", name, minimum=0)
    elif fallback is not None:
        c.set("negatives", fallback, default(SWIFT, f"{S}template/base.py:1948-1949", f"{name} {fallback}"), name)
    else:
        c.note(
            f"{where} (an embedding example's hard negatives are its dataset's rejected_response, unless {name} "
            "fixes them: planned with none, give --negatives N)"
        )


def read_reward(c: Collector, where: str) -> None:
    """TRL 1.16's RewardTrainer (`where`: its RewardConfig call): AutoModelForSequenceClassification with num_labels
    1 (trl/trainer/reward_trainer.py:396), each pair's chosen and rejected rows in one batch (:209)."""
    c.set("task", "seq-cls", f"{where} (trl 1.16 trl/trainer/reward_trainer.py:396: num_labels 1)", "RewardConfig")
    c.set("negatives", 1, f"{where} (chosen and rejected rows: trl/trainer/reward_trainer.py:209)", "RewardConfig")
