"""The release lines a run's files allow, each planned where they pin none (issue 47 item 1) beyond TRL's: LLaMA-Factory's
(its entry point and its keys narrow them: planner.intake.releases.for_entry), ms-swift's lines that take
--train_type (3.x, 4.0.x) (planner.intake.releases.by_flags), and the Hugging Face Trainer's transformers 4 and 5 lines
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
    """On the posted 8 x 80 GB every line fits: the figure is the hungriest line's, 0.7.1's DataParallel (GPU 0
    gathers every replica's fp32 logits: 65.1 GiB against 0.9.4's DDP 34.1), named in the headline. On 8 x A100 40GB
    only 0.7.1 does not fit: it leads, naming the lines that fit."""
    assert _headline(str(LF_3612), "--gpu", "a800-80gb", *LF_FLAGS) == (
        "fits with llamafactory@0.7.1, the hungriest of the lines the files allow (0.7.1, 0.8, 0.9.1, 0.9.2, 0.9.3, "
        "0.9.4, pin none; fits with every one: --framework llamafactory@RELEASE plans the one you run)"
    )
    line = _headline(str(LF_3612), "--gpu", "a100-40gb", *LF_FLAGS)
    assert line.startswith(
        "does NOT fit with llamafactory@0.7.1 (the files allow 0.7.1, 0.8, 0.9.1, 0.9.2, 0.9.3, 0.9.4 and pin none; "
        "it fits with llamafactory@0.8, llamafactory@0.9.1, llamafactory@0.9.2, llamafactory@0.9.3, "
        "llamafactory@0.9.4: --framework llamafactory@RELEASE plans the one you run)"
    )
    pinned = _headline(str(LF_3612), "--gpu", "a100-40gb", *LF_FLAGS, "--framework", "llamafactory@0.9.4")
    assert pinned == "fits"


def test_where_every_line_fits_the_figure_is_the_hungriest_lines():
    """lf-3612 on its 8 x A800 80GB: every line fits; the plan answered is 0.7.1's (65.1 GiB on GPU 0), the same
    figure as --framework llamafactory@0.7.1 gives, not the newest line read (0.9.4: 34.1 GiB)."""
    flags = {"gpu": "a800-80gb", "gpus_per_node": 8, "model": "llama-3.1-8b"}
    swept = checkconfig.check_config([str(LF_3612)], flags)
    releases = swept.config["releases"]
    assert (releases["planned"], releases["read"], releases["does_not_fit"]) == ("0.7.1", "0.9.4", [])
    old = checkconfig.check_config([str(LF_3612)], {**flags, "framework": "llamafactory@0.7.1"}).plan.memory
    new = checkconfig.check_config([str(LF_3612)], {**flags, "framework": "llamafactory@0.9.4"}).plan.memory
    assert swept.plan.memory.device_total_bytes == old.device_total_bytes > 1.5 * new.device_total_bytes


def test_swift_train_type_allows_the_lines_taking_it_and_the_hungriest_leads(tmp_path):
    """--train_type without --tuner_type is ms-swift 3's name, kept by 4.0.x as a deprecated alias (v4.0.0
    base_args.py:73, 151-153) and refused from 4.1.0: read as 3.0-3.3 (its GRPO scores every micro-batch's rows at
    once from 3.4 on, a vision model's log-probs from its whole logits before 3.4: the 3 line needs the most), 3.4,
    3.7, 3.9 and 4 planned too. swift-3183 as posted also gives --vllm_device, which only the 3 and 3.4 lines take
    (planner/frameworks/swift/reader_3x.py): those two alone are swept; without it every --train_type line is. On
    8 x H200 the 3 line does not fit (327.8 GiB, vLLM on the eighth GPU) and the later ones do."""
    posted = intake.read([str(SWIFT_3183)])
    assert posted.releases == ("3", "3.4") and "--vllm_device: only 3, 3.4 take it" in _framework(posted)
    (tmp_path / "train.sh").write_text(
        "".join(ln for ln in SWIFT_3183.read_text().splitlines(True) if "vllm_dev" not in ln)
    )
    path = str(tmp_path / "train.sh")
    reading = intake.read([path])
    assert reading.releases == ("3", "3.4", "3.7", "3.9", "4")
    assert "release assumed: ms-swift 3, one of 3, 3.4, 3.7, 3.9, 4" in _framework(reading)
    assert "kept by 4.0.x as an alias of --tuner_type and refused from 4.1.0" in _framework(reading)
    result = checkconfig.check_config([path], {"gpu": "h200"})
    releases = result.config["releases"]
    assert (releases["fits"], releases["does_not_fit"], releases["planned"]) == (["3.4", "3.7", "3.9", "4"], ["3"], "3")
    assert _headline(path, "--gpu", "h200").startswith(
        "does NOT fit with swift@3 (the files allow 3, 3.4, 3.7, 3.9, 4 and pin none; it fits with swift@3.4, "
        "swift@3.7, swift@3.9, swift@4:"
    )


def test_swift_tuner_type_is_4_x_alone(tmp_path):
    """--tuner_type is 4.x's name (v4.0.0 base_args.py:72): no other line takes it, none is swept."""
    (tmp_path / "train.sh").write_text(SWIFT_3183.read_text().replace("--train_type", "--tuner_type"))
    reading = intake.read([str(tmp_path / "train.sh")])
    assert reading.releases == () and reading.request["framework"] == "swift"


def test_swift_pinned_beside_the_script_is_read_at_its_pin(tmp_path):
    (tmp_path / "train.sh").write_text(SWIFT_3183.read_text())
    (tmp_path / "requirements.txt").write_text("ms-swift==3.4.1\n")
    reading = intake.read([str(tmp_path / "train.sh")])
    assert reading.releases == () and reading.request["framework"] == "swift@3.4"


def test_a_trainer_script_pinning_no_transformers_plans_4_and_5_and_the_4_line_leads(tmp_path):
    """Qwen2.5-3B full fine-tuning, bf16 AMP, at 8,192 tokens on two H100s (DDP): transformers 4.54, 5.0-5.9 and 5.10 on (fused AdamW) fit,
    4.0-4.53 (foreach AdamW's step temporary, fp32 logits) does not; a key only 4.x takes narrows the lines to it."""
    (tmp_path / "train.py").write_text(SCRIPT)
    (tmp_path / "run.sh").write_text("torchrun --nproc_per_node 2 train.py\n")
    run = str(tmp_path / "run.sh")
    assert intake.read([run]).releases == ("4", "4.54", "5", "5.10")
    flags = ["--gpu", "h100", "--model", "qwen2.5-3b", "--seq-len", "8192", "--micro-batch", "1"]
    flags += ["--checkpointing", "full", "--precision", "bf16"]
    assert _headline(run, *flags).startswith(
        "does NOT fit with hf@4 (the files allow 4, 4.54, 5, 5.10 and pin none; it fits with hf@4.54, hf@5, hf@5.10"
    )
    assert _headline(run, *flags, "--framework", "hf@5.10") == "fits"
    (tmp_path / "run.sh").write_text("torchrun --nproc_per_node 2 train.py --evaluation_strategy steps\n")
    old = intake.read([run])
    assert old.releases == () and old.request["framework"] == "hf@4"


def test_a_trl_grpo_run_pinning_no_release_plans_every_line_and_0_14_leads(tmp_path):
    """A GRPO run of TRL's GRPOTrainer whose files pin no trl (and pass no flag only some lines take): every line is
    planned, 0.14 .. 1.15. On an A100 40GB 0.14 does not fit (it counts per_device_train_batch_size in prompts: 4 x 4
    generations = 16 completions a micro-batch, 63.2 GiB) and the later lines do: 0.14 leads, named."""
    (tmp_path / "run.sh").write_text(
        "accelerate launch train_grpo.py --model_name_or_path Qwen/Qwen2.5-0.5B-Instruct "
        "--per_device_train_batch_size 4 --num_generations 4\n"
    )
    run = str(tmp_path / "run.sh")
    assert intake.read([run]).releases == ("0.14", "0.15", "0.19", "0.22", "1.0", "1.6", "1.7", "1.10", "1.14", "1.15")
    assert _headline(run, "--gpu", "a100-40gb").startswith(
        "does NOT fit with trl@0.14 (the files allow 0.14, 0.15, 0.19, 0.22, 1.0, 1.6, 1.7, 1.10, 1.14, 1.15 and pin "
        "none; it fits with trl@0.15, trl@0.19, trl@0.22, trl@1.0, trl@1.6, trl@1.7, trl@1.10, trl@1.14, trl@1.15:"
    )


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


VERL_3B = FIELD.parent / "data" / "frameworks" / "verl" / "examples" / "run_qwen2.5-3b_seq_balance.sh"


def test_verl_main_ppo_pinning_none_plans_every_line_and_names_none_where_they_agree():
    """verl's example (critic.model.fsdp_config.*: verl 0.2 .. 0.7.0's names) allows the 0.5, 0.6 and 0.7 lines: each
    is planned. It sets use_remove_padding itself, so 0.5 and 0.6's padded default does not apply and every line needs
    the same 51.3 GiB on an H100: the line read (0.7) answers and the headline names none."""
    reading = intake.read([str(VERL_3B)])
    assert reading.releases == ("0.5", "0.6", "0.7")
    assert "release assumed: verl sft_trainer and main_ppo 0.7, the newest memplan lists" in _framework(reading)
    result = checkconfig.check_config([str(VERL_3B)], {"gpu": "h100"})
    releases = result.config["releases"]
    assert (releases["fits"], releases["planned"], releases["read"]) == (["0.5", "0.6", "0.7"], "0.7", "0.7")
    assert _headline(str(VERL_3B), "--gpu", "h100") == "fits"


def test_verl_critic_fsdp_is_the_0_7_lines_name_and_the_old_one_is_read_too(tmp_path):
    """critic.fsdp.* came after v0.7.0 (0.9.1 dp_critic.yaml:14 `../engine@fsdp`; v0.7.0's is
    `../engine@model.fsdp_config`): it narrows the lines to 0.7, read, not assumed. The old name is read as the critic's
    offload at every line (it was dropped before); the script's ref.fsdp_config.param_offload=True is read beside it."""
    old, new = "critic.model.fsdp_config.param_offload=False", "critic.fsdp.param_offload=True"
    (tmp_path / "run.sh").write_text(VERL_3B.read_text().replace(old, new))
    reading = intake.read([str(tmp_path / "run.sh")])
    assert reading.releases == () and "critic.fsdp.param_offload=True: taken by" in _framework(reading)
    assert reading.request["workload"]["roles"]["offload"] == ("critic-params", "ref")
    (tmp_path / "run.sh").write_text(VERL_3B.read_text().replace(old, old.replace("False", "True")))
    reading = intake.read([str(tmp_path / "run.sh")])
    assert reading.releases == ("0.5", "0.6", "0.7")
    assert reading.request["workload"]["roles"]["offload"] == ("critic-params", "ref")


def test_a_line_that_refuses_the_model_is_skipped_and_said(tmp_path):
    """--freeze_prefix alone allows LMM-R1 and MM-Eureka; MM-Eureka's actor loads Qwen2.5-VL alone and refuses
    Qwen2-VL in one line: the sweep skips that line and the headline names it with its refusal, the figure LMM-R1's."""
    path = tmp_path / "run.sh"
    path.write_text(
        "python3 -m openrlhf.cli.train_ppo_ray --pretrain Qwen/Qwen2-VL-7B-Instruct --advantage_estimator group_norm "
        "--n_samples_per_prompt 8 --bf16 --freeze_prefix visual --prompt_max_len 20000\n"
    )
    result = checkconfig.check_config([str(path)], {"gpu": "h100"})
    releases = result.config["releases"]
    assert (releases["allowed"], releases["planned"], list(releases["failed"])) == (
        ["lmm-r1", "mm-eureka"],
        "lmm-r1",
        ["mm-eureka"],
    )
    said = check._verdict(result)
    assert "(openrlhf@mm-eureka skipped: --pretrain qwen2-vl-7b (model_type 'qwen2_vl'): MM-EUREKA" in said
    assert "give --framework openrlhf@mm-eureka-internvl" in said and "\n" not in said
