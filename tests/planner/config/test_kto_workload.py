"""--workload kto's inputs and refusals (planner/config/workload.py, the frameworks' runs and rules): DPO's inputs
taken, GRPO's refused, padded rows only, TRL's 2-rows-a-device rule where TRL runs it, and one line from every framework
that runs no KTO."""

import pytest

from planner.config.spec import Knobs
from planner.config.workload import Workload
from planner.frameworks import FRAMEWORKS
from planner.frameworks.rules import Where

RUN_KTO = {"trl", "swift", "llamafactory"}


def test_kto_takes_dpos_inputs_and_one_completion_a_row():
    w = Workload(kind="kto", max_length=2048, max_prompt_length=512, precompute_ref_log_probs=True)
    assert (w.rows(4), w.seq_len(), w.scored_tokens(), w.has_reference(False)) == (4, 2048, 1536, False)
    assert Workload(kind="kto").has_reference(False) and not Workload(kind="kto").has_reference(True)
    with pytest.raises(ValueError, match="--num-generations is a GRPO input"):
        Workload(kind="kto", num_generations=4)
    with pytest.raises(ValueError, match="leaves no completion"):
        Workload(kind="kto", max_length=512, max_prompt_length=512)


def test_kto_runs_padded_rows_only():
    with pytest.raises(ValueError, match="--batching packed with --workload kto"):
        Knobs.make(framework="trl", batching="packed", workload=Workload(kind="kto"))


def test_trl_refuses_one_row_a_device_where_llamafactory_and_ms_swift_run_it():
    """TRL's KTOTrainer.__init__ raises on per_device_train_batch_size 1 (trl/trainer/kto_trainer.py:844-847);
    LLaMA-Factory calls Trainer.__init__ instead (0.9.5 train/kto/trainer.py) and ms-swift deletes that __init__
    (rlhf_trainers/kto_trainer.py:21): its own example runs one row a device."""

    def says(framework: str, micro: int):
        knobs = dict(Knobs.make(framework=framework, workload=Workload(kind="kto")))
        return FRAMEWORKS[framework].cannot_here(knobs, Where(micro_batch=micro, grad_accum=8))

    said = [says("trl", 1), says("trl", 2), says("llamafactory", 1), says("swift", 1)]
    assert said[0] is not None and "2 or more rows per device" in said[0][1] and "kto_trainer.py:844-847" in said[0][1]
    assert said[1:] == [None, None, None]


@pytest.mark.parametrize("name", sorted(set(FRAMEWORKS) - RUN_KTO))
def test_a_framework_without_kto_refuses_it_in_one_line(name):
    said = FRAMEWORKS[name].cannot({"workload": Workload(kind="kto")})
    assert said is not None and said[0] == "workload" and "cannot run --workload kto" in said[1]
    assert "\n" not in said[1]
