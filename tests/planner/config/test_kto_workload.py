"""--workload kto's inputs and refusals (planner/config/workload.py, the frameworks' runs and rules): DPO's inputs
taken, GRPO's refused, packed rows where ms-swift runs them, TRL's 2-rows-a-device rule where TRL runs it, and one line from every framework
that runs no KTO."""

import pytest

from planner.config.spec import Knobs
from planner.config.workload import Workload
from planner.errors import BadInput
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


def test_packed_kto_is_planned_where_ms_swift_runs_it_and_refused_in_one_line_elsewhere():
    """ms-swift 3.9+ runs KTO padding-free (4.6.0 swift/arguments/rlhf_args.py:710-717); TRL's KTOConfig has no
    padding_free at any release, LLaMA-Factory packs SFT only (0.9.5 data/loader.py:200-201); no framework splits KTO's
    rows over ranks (ms-swift: rlhf_args.py:719-725 grpo and dpo)."""
    packed = {"batching": "packed", "attention": "flash", "workload": Workload(kind="kto")}
    assert FRAMEWORKS["swift"].cannot(dict(Knobs.make(framework="swift", **packed))) is None
    for name, where in (("trl", "kto_config.py"), ("llamafactory", "loader.py:200-201")):
        with pytest.raises(ValueError, match=f"cannot run --batching packed with --workload kto: .*{where}"):
            Knobs.make(framework=name, **packed)
    with pytest.raises(ValueError, match="--sequence-parallel with --workload kto: .*rlhf_args.py:719-725"):
        Knobs.make(framework="swift", **{**packed, "sequence_parallel": 2})


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


@pytest.mark.parametrize("name", sorted(set(FRAMEWORKS) - RUN_KTO - {"axolotl", "trl-0"}))
def test_a_framework_without_kto_refuses_it_in_one_line(name):
    said = FRAMEWORKS[name].cannot({"workload": Workload(kind="kto")})
    assert said is not None and said[0] == "workload" and "cannot run --workload kto" in said[1]
    assert "\n" not in said[1]


def test_trl_0x_plans_kto_where_its_rows_are_cut_to_max_length():
    """TRL 0.22 .. 0.29's KTOTrainer (the trl-0 adapter) is planned with the 1.0 line's terms (planner.frameworks.trl
    .kto_zero); a max_length its max_prompt_length (512 by default) leaves rows past is refused in one line."""
    assert FRAMEWORKS["trl-0"].cannot({"workload": Workload(kind="kto")}) is None
    said = FRAMEWORKS["trl-0"].cannot({"workload": Workload(kind="kto", max_length=512)})
    assert said is not None and said[0] == "workload" and "\n" not in said[1]
    assert "KTOTrainer" in said[1] and "not planned" in said[1] and "max_prompt_length" in said[1]


def test_axolotl_runs_kto_on_trls_trainer_planned_with_an_adapter_refused_without():
    """axolotl's rl: kto is TRL's KTOTrainer (its lines 0.5 on run it); its newest line (trl 1.5.1 .. 1.9.0) plans it
    with an adapter as trl@1.7 does (tests/planner/frameworks/axolotl/test_rl_kinds.py), refuses full fine-tuning on
    lora_rank (two references, TRL's in fp32: planner.frameworks.axolotl.kto) and one row a device as TRL does."""
    with pytest.raises(BadInput) as e:
        Knobs.make(framework="axolotl", workload=Workload(kind="kto"))
    assert e.value.field == "lora_rank" and "float32" in str(e.value) and "\n" not in str(e.value)
    knobs = dict(Knobs.make(framework="axolotl", workload=Workload(kind="kto"), lora_rank=8))
    said = FRAMEWORKS["axolotl"].cannot_here(knobs, Where(micro_batch=1, grad_accum=8))
    assert said is not None and "2 or more rows per device" in said[1] and "kto_trainer.py:806-809" in said[1]
    assert FRAMEWORKS["axolotl"].cannot_here(knobs, Where(micro_batch=2, grad_accum=8)) is None
