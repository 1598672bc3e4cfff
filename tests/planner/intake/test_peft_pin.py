"""--peft-release (Knobs.peft_release) from a peft pin beside a LoRA run's files (planner.intake.peft_pin), what it
changes (planner.frameworks.peft: Qwen1.5-MoE's experts are mapped from PEFT 0.22, and TRL's default LoRA dropout
0.05 then stops get_peft_model), and the pin memplan writes beside a plan's files, read back."""

import pytest

from planner import advise, intake
from planner.errors import BadInput
from planner.export import launch
from planner.intake.peft_pin import knob_of

SCRIPT = """accelerate launch --num_processes 8 train.py \\
  --model_name_or_path Qwen/Qwen1.5-MoE-A2.7B \\
  --use_peft --lora_r 16 --lora_target_modules all-linear \\
  --per_device_train_batch_size 1 --gradient_accumulation_steps 4 --max_length 2048 --bf16
"""


@pytest.mark.parametrize(
    "version,knob", [("0.22.0", "0.22"), ("0.23.1", "0.22"), ("0.21.1", "0.21"), ("0.20.0", "0.20"), ("0.19.1", "0.18")]
)
def test_a_pin_plans_as_the_release_measured_at_or_below_it(version, knob):
    assert knob_of(version) == knob


def test_an_older_pin_is_said_and_not_planned():
    assert knob_of("0.17.1") is None and knob_of("main") is None


def run(tmp_path, pin: str):
    folder = tmp_path / "a" / "b" / "c"  # no pin file of another test above it
    folder.mkdir(parents=True)
    (folder / "train.sh").write_text(SCRIPT)
    (folder / "train.py").write_text("from trl import SFTTrainer, SFTConfig, ModelConfig, TrlParser\n")
    (folder / "requirements.txt").write_text(f"trl==1.16.0\n{pin}")
    return intake.read([str(folder / "train.sh")])


def test_the_pinned_peft_decides_whether_the_experts_and_so_the_dropout_are_refused(tmp_path):
    """TRL 1.16's default lora_dropout 0.05 (model_config.py:115): PEFT 0.21 maps no Qwen1.5-MoE expert, so LoRA on
    its linears runs; 0.22 maps them onto ParamWrapper, which refuses any dropout (measured: get_peft_model raises)."""
    reading = run(tmp_path / "old", "peft==0.21.1\n")
    assert reading.request["peft_release"] == "0.21"
    request = {**reading.request, "gpu": "h100"}
    assert advise.check(advise.parse(advise.CheckRequest, request)).plan.peft_release == "0.21"
    newest = run(tmp_path / "new", "")
    assert "peft_release" not in newest.request
    with pytest.raises(BadInput, match="PEFT's ParamWrapper refuses any dropout"):
        advise.check(advise.parse(advise.CheckRequest, {**newest.request, "gpu": "h100"}))


def test_an_unmeasured_pin_is_a_not_planned_line(tmp_path):
    reading = run(tmp_path, "peft==0.17.1\n")
    assert "peft_release" not in reading.request
    assert any("peft==0.17.1 (a PEFT memplan did not measure" in str(u) for u in reading.unplanned)


def test_the_plans_requirements_pin_its_peft_and_are_read_back(tmp_path):
    body = {"model": "qwen1.5-moe-a2.7b", "gpu": "h100", "gpus_per_node": 8, "micro_batch": 1, "seq_len": 1024}
    knobs = {"framework": "trl", "lora_rank": 8, "peft_release": "0.20", "zero_stage": 2}
    result = advise.check(advise.parse(advise.CheckRequest, {**body, **knobs}))
    model, hw, goal = result.context
    files = launch.files(result.plan, hw, model, goal.seq_len, goal)
    assert "peft==0.20.0\n" in files[launch.PIN_NAME]
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    back = intake.read([str(tmp_path / "launch.sbatch")]).request
    assert (back["lora_rank"], back["peft_release"]) == (8, "0.20")
