"""The task knobs' rules between knobs alone (planner.config.knobfields `task`, `num_labels`, `negatives`): what a
task head is trained with, and what each task has no use for. Its memory is planner.estimate.heads'."""

from __future__ import annotations

from planner.errors import BadInput

# the tasks without the vocabulary head: a score head (seq-cls, reranker) or none (embedding)
SCORE_TASKS = ("seq-cls", "reranker")
NO_VOCABULARY = (*SCORE_TASKS, "embedding")


def check_task_knobs(k) -> None:
    """BadInput for a task knob the other knobs leave no meaning (`k`: Knobs' fields)."""
    if k.num_labels > 1 and k.task != "seq-cls":
        why = "a one-output score head" if k.task == "reranker" else "no score head"
        raise BadInput(
            f"--num-labels {k.num_labels} is a seq-cls score head's outputs; --task {k.task} has {why}: give --task "
            "seq-cls or --num-labels 1",
            "num_labels",
        )
    if k.negatives and k.task == "causal-lm":
        raise BadInput(
            f"--negatives {k.negatives} are rows of an embedding, reranker or reward-model (seq-cls) example: give "
            "--task embedding, reranker, generative-reranker or seq-cls",
            "negatives",
        )
    if k.task != "causal-lm" and k.workload.kind != "sft":
        raise BadInput(
            f"--task {k.task} is trained by a supervised step; --workload {k.workload.kind} trains a causal LM: give "
            "--task causal-lm or --workload sft",
            "task",
        )
    if k.task in NO_VOCABULARY and k.loss != "standard":
        raise BadInput(
            f"--loss {k.loss} splits the vocabulary head's loss; --task {k.task} has no vocabulary head: give --loss "
            "standard",
            "loss",
        )


def task_text(k) -> str:
    """The task for a plan's recipe line: `seq-cls (2 labels)`, `embedding (3 negatives)`."""
    labels = f"{k.num_labels} label{'s' if k.num_labels > 1 else ''}" if k.task == "seq-cls" else ""
    negatives = f"{k.negatives} negative{'s' if k.negatives > 1 else ''}" if k.negatives else ""
    more = ", ".join(p for p in (labels, negatives) if p)
    return f"{k.task} ({more})" if more else k.task
