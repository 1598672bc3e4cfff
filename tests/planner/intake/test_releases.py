"""The release a user's files target (planner/intake/releases.py) and a script's own defaults (scriptargs.py): a GRPO
fork's trainer class (VLM-R1's VLMGRPOTrainer, R1-V's Qwen2VLGRPOTrainer, in verbatim copies of their files), a
version pin beside the scripts, a flag only an older release takes, else the newest with a line saying so."""

from pathlib import Path

import pytest

from planner import checkconfig, intake
from planner.intake import scriptargs
from tests.planner.intake.conftest import DATA

VLM_R1 = DATA / "scripts" / "VLM-R1"
R1V = DATA / "scripts" / "R1-V" / "src" / "r1-v"
GRPO = (
    "accelerate launch train_grpo.py --model_name_or_path Qwen/Qwen2.5-0.5B-Instruct --per_device_train_batch_size 4 "
    "--num_generations 4 {flags}\n"
)


def _settings(reading) -> dict:
    return {s.field: s for s in reading.settings}


def _run(tmp_path: Path, pins: dict[str, str], flags: str = "", command: str = GRPO) -> Path:
    for name, text in pins.items():
        (tmp_path / name).write_text(text)
    path = tmp_path / "run.sh"
    path.write_text(command.format(flags=flags))
    return path


def test_vlm_r1s_run_script_is_read_as_its_own_trainer_and_config():
    """run_grpo_rec.sh cds into src/open-r1-multimodal and runs src/open_r1/grpo_jsonl.py, whose VLMGRPOTrainer (line
    27) and GRPOConfig are VLM-R1's own: the batch counts completions, transformers 4.49's AdamW (setup.py:65)."""
    r = intake.read([str(VLM_R1 / "run_scripts" / "run_grpo_rec.sh")])
    s = _settings(r)
    assert s["framework"].value == "trl@vlm-r1" and "grpo_jsonl.py:27 uses VLMGRPOTrainer" in s["framework"].source
    assert s["optimizer"].value == "adamw" and "transformers 4.49.0 training_args.py:1284-1293" in s["optimizer"].source
    assert r.request["micro_batch"] == 8 and not any("counts it in prompts" in u for u in r.unplanned)
    assert str(VLM_R1 / "src" / "open-r1-multimodal" / "src" / "open_r1" / "grpo_jsonl.py") in r.files


def test_vlm_r1_without_beta_keeps_a_reference_model(tmp_path):
    """VLM-R1's GRPOConfig defaults beta to 0.04 (trainer/grpo_config.py:291-292): a reference model, where today's
    TRL (beta 0.0) keeps none."""
    folder = tmp_path / "open-r1-multimodal"
    folder.mkdir()
    command = (
        "torchrun --nproc_per_node 2 src/open_r1/grpo_jsonl.py --model_name_or_path Qwen/Qwen2.5-VL-3B-Instruct "
        "--per_device_train_batch_size 2 --num_generations 4 {flags}\n"
    )
    r = intake.read([str(_run(folder, {}, command=command))])
    s = _settings(r)
    assert s["workload.beta"].value == 0.04 and "grpo_config.py:291-292" in s["workload.beta"].source
    assert s["workload.max_completion_length"].value == 256
    out = checkconfig.check_config([str(folder / "run.sh")], {"gpu": "h100"})
    assert out.plan.workload.beta == 0.04 and out.plan.knobs.release == "vlm-r1"
    assert (
        out.plan.memory.params_bytes
        > checkconfig.check_config(
            [str(folder / "run.sh")], {"gpu": "h100", "workload": {"beta": 0.0}}
        ).plan.memory.params_bytes
    )


def test_r1_vs_run_script_counts_prompts(tmp_path):
    """R1-V pins trl 0.14.0 (setup.py:65) and its Qwen2VLGRPOTrainer samples num_generations completions of each
    prompt (grpo.py:25): --per_device_train_batch_size 1 is 8 completions, with a reference model (beta 0.04)."""
    r = intake.read([str(R1V / "run_grpo.sh")])
    s = _settings(r)
    assert s["framework"].value == "trl@r1-v" and "grpo.py:25 uses Qwen2VLGRPOTrainer" in s["framework"].source
    assert s["workload.beta"].value == 0.04 and "trl v0.14.0" in s["workload.beta"].source
    assert any("counts it in prompts, 8 completions each: planned as 8 completions" in u for u in r.unplanned)
    out = checkconfig.check_config([str(R1V / "run_grpo.sh")], {"gpu": "h100", "model": "qwen2.5-vl-3b"})
    assert out.plan.micro_batch == 8 and out.plan.workload.max_completion_length == 256
    assert out.config["framework"] == "trl"


@pytest.mark.parametrize(
    ("pins", "release", "beta", "counts_prompts"),
    [
        ({"requirements.txt": "torch==2.5.1\ntrl==0.14.0\n"}, "0.14", 0.04, True),
        ({"setup.py": 'install_requires=["trl>=0.16.0", "peft"]\n'}, "0.15", 0.04, False),
        ({"pyproject.toml": 'dependencies = ["trl~=0.19.1"]\n'}, "0.19", 0.0, False),
        ({"environment.yml": "dependencies:\n  - pip:\n    - trl==0.29.1\n"}, "0.22", 0.0, False),
        ({"pip_freeze.txt": "trl @ git+https://github.com/huggingface/trl@v0.14.0\n"}, "0.14", 0.04, True),
    ],
)
def test_a_version_pin_beside_the_script_decides_the_trl_release(tmp_path, pins, release, beta, counts_prompts):
    r = intake.read([str(_run(tmp_path, pins))])
    s = _settings(r)
    assert s["framework"].value == f"trl@{release}", s["framework"]
    assert s["workload.beta"].value == beta
    assert any("counts it in prompts" in u for u in r.unplanned) == counts_prompts
    out = checkconfig.check_config([str(tmp_path / "run.sh")], {"gpu": "h100"})
    assert out.plan.micro_batch == (16 if counts_prompts else 4)


def test_no_pin_plans_the_newest_release_and_says_so(tmp_path):
    s = _settings(intake.read([str(_run(tmp_path, {}))]))["framework"]
    assert s.value == "trl" and "release assumed: TRL (SFT, DPO, GRPO trainers) 1.15" in s.source
    assert "the files pin none; another: --framework trl@RELEASE" in s.source


def test_a_flag_trl_dropped_narrows_the_releases_to_those_taking_it(tmp_path):
    """GRPOConfig dropped max_prompt_length at v0.28.0 (#4847, 89070d241): a run passing it is on 0.27 or before,
    the 0.22 line the newest it allows; every line it allows is planned by check --config (Reading.releases)."""
    r = intake.read([str(_run(tmp_path, {}, "--max_prompt_length 256"))])
    s = _settings(r)["framework"]
    assert s.value == "trl@0.22" and r.releases == ("0.14", "0.15", "0.19", "0.22")
    assert "run.sh:1 --max_prompt_length 256: taken by TRL (SFT, DPO, GRPO trainers) 0.14 .. 0.22 only" in s.source


def test_a_pin_older_than_the_releases_listed_is_said(tmp_path):
    s = _settings(intake.read([str(_run(tmp_path, {"requirements.txt": "trl==0.12.2\n"}))]))["framework"]
    assert s.value == "trl" and "requirements.txt:1 trl==0.12.2: older than the releases memplan lists" in s.source


def test_a_git_checkout_pin_is_no_release_and_is_said(tmp_path):
    """open-r1's first setup.py pinned `trl @ git+https://github.com/huggingface/trl.git@main` (open-r1 02b9c0e
    setup.py:64): which release that was is not in the files."""
    pin = {"setup.py": '_deps = [\n    "trl @ git+https://github.com/huggingface/trl.git@main",\n]\n'}
    s = _settings(intake.read([str(_run(tmp_path, pin))]))["framework"]
    assert (
        s.value == "trl"
        and "setup.py:2 trl @ git+https://github.com/huggingface/trl.git@main: a git checkout" in s.source
    )


def test_a_flag_beside_config_overrides_the_release_read(tmp_path):
    path = _run(tmp_path, {"requirements.txt": "trl==0.14.0\n"})
    out = checkconfig.check_config([str(path)], {"gpu": "h100", "framework": "trl@0.19"})
    assert out.plan.micro_batch == 4 and out.plan.knobs.release == "0.19"


def test_transformers_pin_decides_the_hf_trainers_optimizer(tmp_path):
    command = "torchrun --nproc_per_node 2 train.py --model_name_or_path Qwen/Qwen2.5-0.5B-Instruct {flags}\n"
    for pin, optimizer in (("transformers==4.46.0", "adamw"), ("transformers==4.57.1", "adamw-fused")):
        (tmp_path / "requirements.txt").write_text(pin + "\n")
        s = _settings(intake.read([str(_run(tmp_path, {}, command=command))]))
        assert s["optimizer"].value == optimizer and s["framework"].value.startswith("hf@4"), (pin, s["optimizer"])


def test_ms_swift_3s_flag_names_the_release_unless_a_pin_says_4(tmp_path):
    command = "swift sft --model Qwen/Qwen2.5-0.5B-Instruct --train_type lora --dataset x {flags}\n"
    assert _settings(intake.read([str(_run(tmp_path, {}, command=command))]))["framework"].value == "swift@3"
    (tmp_path / "requirements.txt").write_text("ms-swift==4.2.0\n")
    assert _settings(intake.read([str(_run(tmp_path, {}, command=command))]))["framework"].value == "swift"


def test_openrlhfs_flat_flags_name_its_release():
    r = intake.read([str(DATA / "openrlhf" / "ppo_flat_names.sh")])
    assert _settings(r)["framework"].value == "openrlhf@0.10"


def test_a_scripts_own_defaults_are_read_from_its_syntax_tree(tmp_path):
    own = scriptargs.defaults(VLM_R1 / "src" / "open-r1-multimodal" / "src" / "open_r1" / "grpo_jsonl.py")
    assert (own["max_pixels"].value, own["min_pixels"].value, own["max_anyres_num"].value) == (12845056, 3136, 12)
    assert own["max_pixels"].source.startswith("grpo_jsonl.py:89-92 default max_pixels 12845056 (GRPOScriptArguments")
    script = tmp_path / "train.py"
    script.write_text(
        "import argparse\nfrom dataclasses import dataclass, field\n@dataclass\nclass Args:\n"
        "    max_prompt_length: int = field(default=2048)\n    beta: float = 0.1\n    name: str = 'x'\n"
        "p = argparse.ArgumentParser()\np.add_argument('--num-generations', type=int, default=6)\n"
        "p.add_argument('--max_completion_length', default=compute())\n"
    )
    own = scriptargs.defaults(script)
    assert {k: f.value for k, f in own.items()} == {"max_prompt_length": 2048, "beta": 0.1, "num_generations": 6}
    command = "torchrun --nproc_per_node 2 train.py --model_name_or_path Qwen/Qwen2.5-0.5B-Instruct --use_vllm false\n"
    (tmp_path / "run.sh").write_text(command)
    s = _settings(intake.read([str(tmp_path / "run.sh")]))
    assert s["workload.num_generations"].value == 6 and s["workload.beta"].value == 0.1
    assert (
        s["workload.num_generations"].source == "train.py:9 default num_generations 6 (its argparse, the script's own)"
    )


def test_video_r1s_own_flags_name_r1_vs_trainer(tmp_path):
    """Video-R1's grpo.py (not among the files) takes --temporal and --len_control (src/r1-v/src/open_r1/grpo.py:
    55-60); its trainer is R1-V's, repeating each prompt num_generations times: the batch counts prompts."""
    command = GRPO.replace("train_grpo.py", "src/open_r1/grpo.py")
    r = intake.read([str(_run(tmp_path, {}, "--temporal true --len_control true", command))])
    assert _settings(r)["framework"].value == "trl@r1-v" and "--temporal true (Video-R1's flag" in str(r.unplanned)
    assert _settings(intake.read([str(_run(tmp_path, {}, "", command))]))["framework"].value != "trl@r1-v"


def test_a_relative_cd_into_r1_vs_folder_names_the_fork(tmp_path):
    """`cd src/r1-v` from a folder the reading does not know still says whose script runs (R1-V's run_grpo.sh)."""
    command = "cd src/r1-v\n" + GRPO.replace("train_grpo.py", "src/open_r1/grpo.py")
    r = intake.read([str(_run(tmp_path, {}, "--max_pixels 401408", command))])
    assert _settings(r)["framework"].value == "trl@r1-v"
    # R1-V's images (trl/test_r1v.py) need a vision model: Qwen2.5-0.5B's is said
    assert any("--max_pixels 401408 (R1-V's images are not planned: a text model)" in u for u in r.unplanned)
    plain = GRPO.replace("train_grpo.py", "src/open_r1/grpo.py")
    assert _settings(intake.read([str(_run(tmp_path, {}, "", "cd /elsewhere\n" + plain))]))["framework"].value == "trl"


@pytest.mark.parametrize(
    ("pin", "flags", "generation"),
    [
        ("trl==0.19.1", "--use_vllm true", "vllm-server"),  # v0.19.0 grpo_config.py:361-362 vllm_mode='server'
        ("trl==0.14.0", "--use_vllm true", "vllm-server"),  # v0.14.0 grpo_config.py:131 vllm_device='auto'
        ("trl==1.2.0", "--use_vllm true", "vllm-colocate"),  # v1.0.0 grpo_config.py:502 vllm_mode='colocate'
        ("trl==0.19.1", "--use_vllm true --vllm_mode colocate", "vllm-colocate"),  # the script's own word
        ("trl==0.19.1", "", "hf"),  # no vLLM: generate() on the training GPUs, whatever the release
    ],
)
def test_vllm_without_a_mode_generates_where_the_release_puts_it(tmp_path, pin, flags, generation):
    """TRL before 1.0 ran vLLM on GPUs of its own when `use_vllm` named no mode (the next GPU, then `trl vllm-serve`,
    then vllm_mode='server'); 1.0 made colocate the default."""
    r = intake.read([str(_run(tmp_path, {"requirements.txt": pin + "\n"}, flags))])
    s = _settings(r)["workload.generation"] if generation != "hf" else None
    assert (s.value if s else r.request.get("workload", {}).get("generation", "hf")) == generation
    if generation == "vllm-server" and "vllm_mode" not in flags:
        assert "(with use_vllm)" in s.source and "trl v0." in s.source
