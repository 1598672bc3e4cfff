"""The release lines a run's files allow, each planned where they pin none (issue 47 item 1) beyond TRL's: LLaMA-Factory's
(its entry point and its keys narrow them: planner.intake.releases.for_entry), ms-swift's 3.x lines that take
--train_type (planner.intake.releases.by_flags), and the Hugging Face Trainer's transformers 4 and 5 lines
(planner.intake.releases.for_script). The headline gives the hungrier verdict and names the release that decides it.
On the field corpus's files as posted, and one plain Trainer script."""

from pathlib import Path

from planner import checkconfig, intake
from planner.cli import build_parser, check

FIELD = Path(__file__).parents[2] / "field"
LF_3612 = FIELD / "lf-3612-llama3-8b-lora-8k-ddp-8xa800" / "train.sh"  # llamafactory-cli, no pin, 2024-05
LF_FLAGS = ["--gpus-per-node", "8", "--model", "llama-3.1-8b"]
SWIFT_3183 = FIELD / "swift-3183-qwen2vl7b-grpo-lora-unsloth-8xa800" / "train.sh"  # swift rlhf --train_type lora
SCRIPT = """from transformers import AutoModelForCausalLM, Trainer, TrainingArguments
model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-3B")
Trainer(model=model, args=TrainingArguments(output_dir="out")).train()
"""


def _headline(*argv: str) -> str:
    _, result = check.gather(build_parser().parse_args(["check", "--config", *argv]))
    return check._verdict(result)


def _framework(reading) -> str:
    return next(s.source for s in reading.settings if s.field == "framework")


def test_lf_3612_allows_the_lines_of_llamafactory_cli_that_take_evaluation_strategy():
    """llamafactory-cli came at v0.7.1 and --evaluation_strategy (transformers' name through 4.45) went after v0.9.4:
    the newest of those lines is read, each is planned."""
    reading = intake.read([str(LF_3612)])
    assert reading.releases == ("0.7.1", "0.8", "0.9.1", "0.9.2", "0.9.3", "0.9.4")
    said = _framework(reading)
    assert "release assumed: LLaMA-Factory 0.9.4, the newest of 0.7.1, 0.8, 0.9.1, 0.9.2, 0.9.3, 0.9.4" in said
    assert "llamafactory-cli: LLaMA-Factory 0.7.1 .. 0.9.5's" in said and "--evaluation_strategy steps" in said


def test_lf_3612_headline_names_0_7_1_where_its_dataparallel_decides():
    """On the posted 8 x 80 GB every line fits (0.7.1's DataParallel 65.1 GiB on GPU 0, 0.9.4's DDP 34.1): the
    headline names no release. On 8 x A100 40GB only 0.7.1 does not fit: it leads, naming the lines that fit."""
    assert _headline(str(LF_3612), "--gpu", "a800-80gb", *LF_FLAGS) == "fits"
    line = _headline(str(LF_3612), "--gpu", "a100-40gb", *LF_FLAGS)
    assert line.startswith(
        "does NOT fit with llamafactory@0.7.1 (the files allow 0.7.1, 0.8, 0.9.1, 0.9.2, 0.9.3, 0.9.4 and pin none; "
        "it fits with llamafactory@0.8, llamafactory@0.9.1, llamafactory@0.9.2, llamafactory@0.9.3, "
        "llamafactory@0.9.4: --framework llamafactory@RELEASE plans the one you run)"
    )
    pinned = _headline(str(LF_3612), "--gpu", "a100-40gb", *LF_FLAGS, "--framework", "llamafactory@0.9.4")
    assert pinned == "fits"


def test_swift_train_type_allows_the_3_x_lines_and_the_hungriest_leads():
    """--train_type without --tuner_type is ms-swift 3's name: read as 3.0-3.3 (its GRPO scores every micro-batch's
    rows at once from 3.4 on, a vision model's log-probs from its whole logits before 3.4: the 3 line needs the most),
    3.4 and 3.7 planned too. On 8 x H200 the 3 line does not fit and the later ones do."""
    reading = intake.read([str(SWIFT_3183)])
    assert reading.releases == ("3", "3.4", "3.7")
    assert "release assumed: ms-swift 3, one of 3, 3.4, 3.7" in _framework(reading)
    result = checkconfig.check_config([str(SWIFT_3183)], {"gpu": "h200"})
    releases = result.config["releases"]
    assert (releases["fits"], releases["does_not_fit"], releases["planned"]) == (["3.4", "3.7"], ["3"], "3")
    assert _headline(str(SWIFT_3183), "--gpu", "h200").startswith(
        "does NOT fit with swift@3 (the files allow 3, 3.4, 3.7 and pin none; it fits with swift@3.4, swift@3.7"
    )


def test_swift_pinned_beside_the_script_is_read_at_its_pin(tmp_path):
    (tmp_path / "train.sh").write_text(SWIFT_3183.read_text())
    (tmp_path / "requirements.txt").write_text("ms-swift==3.4.1\n")
    reading = intake.read([str(tmp_path / "train.sh")])
    assert reading.releases == () and reading.request["framework"] == "swift@3.4"


def test_a_trainer_script_pinning_no_transformers_plans_4_and_5_and_the_4_line_leads(tmp_path):
    """Qwen2.5-3B full fine-tuning, bf16 AMP, at 8,192 tokens on two H100s (DDP): transformers 4.54 and 5 (fused AdamW) fit,
    4.0-4.53 (foreach AdamW's step temporary, fp32 logits) does not; a key only 4.x takes narrows the lines to it."""
    (tmp_path / "train.py").write_text(SCRIPT)
    (tmp_path / "run.sh").write_text("torchrun --nproc_per_node 2 train.py\n")
    run = str(tmp_path / "run.sh")
    assert intake.read([run]).releases == ("4", "4.54", "5")
    flags = ["--gpu", "h100", "--model", "qwen2.5-3b", "--seq-len", "8192", "--micro-batch", "1"]
    flags += ["--checkpointing", "full", "--precision", "bf16"]
    assert _headline(run, *flags).startswith(
        "does NOT fit with hf@4 (the files allow 4, 4.54, 5 and pin none; it fits with hf@4.54, hf@5"
    )
    assert _headline(run, *flags, "--framework", "hf@5") == "fits"
    (tmp_path / "run.sh").write_text("torchrun --nproc_per_node 2 train.py --evaluation_strategy steps\n")
    old = intake.read([run])
    assert old.releases == () and old.request["framework"] == "hf@4"


def test_a_line_planned_by_memplans_own_adapter_is_named_as_the_line_read():
    """LLaMA-Factory#1408's train_bash.py run (0.5 or 0.6) asks --flash_attn, which 0.6's key spells sdpa only: the plan
    falls back to memplan's adapter, and the line the answer names is the one read, 0.6, not the newest (0.9.5)."""
    path = FIELD / "lf-1408-qwen14b-lora-2k-3xa100-40g" / "train.sh"
    releases = checkconfig.check_config([str(path)], {"gpu": "a100-40gb"}).config["releases"]
    assert (releases["allowed"], releases["planned"]) == (["0.5", "0.6"], "0.6")


def test_eval_strategy_narrows_llamafactory_to_the_lines_on_transformers_4_41():
    """LLaMA-Factory#4453's YAML says eval_strategy (transformers' name from 4.41.0, which LLaMA-Factory requires from
    v0.8.0): the lines before 0.8, where flash_attn unset reads as eager at 0.5, are not among those its files allow."""
    yaml = FIELD / "lf-4453-qwen2-72b-lora-z3off-8k-8xa800" / "qwen2_72b_lora_sft.yaml"
    reading = intake.read([str(yaml)])
    assert reading.releases == ("0.8", "0.9.1", "0.9.2", "0.9.3", "0.9.4", "0.9.5")
