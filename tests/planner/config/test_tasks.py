"""The task knobs' rules (planner/config/tasks.py) and the frameworks' refusals of the tasks they do not run."""

import pytest

from planner.config.spec import Knobs
from planner.errors import BadInput


@pytest.mark.parametrize(
    "kw, field, says",
    [
        ({"num_labels": 3}, "num_labels", "--num-labels 3"),
        ({"task": "reranker", "framework": "swift", "num_labels": 2}, "num_labels", "one-output score head"),
        ({"negatives": 2}, "negatives", "--negatives 2"),
        ({"task": "seq-cls", "framework": "swift", "workload": {"kind": "dpo"}}, "task", "--workload dpo"),
        ({"task": "embedding", "framework": "swift", "loss": "fused"}, "loss", "no vocabulary head"),
        ({"task": "seq-cls"}, "task", "--framework memplan"),
        ({"task": "embedding", "framework": "llamafactory"}, "task", "it runs causal-lm, seq-cls"),
        # LLaMA-Factory's seq-cls is its stage rm's reward model: pairs of one value a row
        ({"task": "seq-cls", "framework": "llamafactory"}, "task", "give --num-labels 1 --negatives 1"),
        ({"task": "seq-cls", "framework": "llamafactory", "num_labels": 3}, "num_labels", "--num-labels 3: it runs 1"),
        ({"task": "embedding", "framework": "trl"}, "task", "it runs causal-lm, seq-cls"),
    ],
)
def test_a_task_knob_without_meaning_is_refused_in_one_line(kw, field, says):
    with pytest.raises(BadInput) as e:
        Knobs.make(**kw)
    assert e.value.field == field and says in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("task", ["seq-cls", "embedding", "reranker", "generative-reranker"])
def test_ms_swift_runs_every_task(task):
    assert Knobs.make(task=task, framework="swift", negatives=1).task == task
