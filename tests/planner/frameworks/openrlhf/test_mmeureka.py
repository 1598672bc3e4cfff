"""MM-Eureka (ModalMinds/MM-EUREKA bccddd7), OpenRLHF v0.6.1's package with multimodal rollouts, read as the release
openrlhf@mm-eureka (planner.frameworks.openrlhf.mmeureka): its own example launch script, copied verbatim
(tests/data/frameworks/scripts/SOURCES.md), is read by its own flags with the script's batch, lengths and GPUs, its
frozen tower and its images, and planned; a script naming only its model takes MM-Eureka's (0.6.1's) defaults. Its
internvl branch (129fc9e: OpenRLHF v0.6.0.post1, InternVL's actor) is its own release, openrlhf@mm-eureka-internvl."""

from pathlib import Path

import pytest

from planner import checkconfig, intake
from planner.errors import BadInput
from tests.planner.intake.conftest import DATA

SCRIPT = DATA / "scripts" / "MM-EUREKA" / "examples" / "scripts" / "train_mm_eureka_qwen_7b_single_node.sh"
# Qwen2.5-VL's worst image within MM-Eureka's --max_pixels 640 x 28 x 28 (cli/train_ppo_ray.py:348): 640 tokens of
# 28 x 28 pixels each (a 14-pixel patch merged 2 x 2)
IMAGE_TOKENS = 640


def _settings(path: Path) -> dict:
    return {s.field: s for s in intake.read([str(path)]).settings}


def test_mm_eurekas_own_script_is_read_as_its_release():
    s = _settings(SCRIPT)
    assert s["framework"].value == "openrlhf@mm-eureka" and "--enable_accuracy_filter" in s["framework"].source
    got = {f: s[f].value for f in ("micro_batch", "grad_accum", "gpus_per_node", "nodes", "zero_stage", "precision")}
    assert got == {
        "micro_batch": 2,
        "grad_accum": 8,
        "gpus_per_node": 8,
        "nodes": 1,
        "zero_stage": 1,
        "precision": "bf16",
    }
    assert s["workload.num_generations"].value == 8 and s["workload.max_completion_length"].value == 4096
    # --prompt_max_len 3000 read as the text, one image on top (vLLM takes the whole prompt: reader_mmeureka), but
    # vLLM's max_model_len 3000 + 4096 bounds each trained row (unpadded by the replay buffer): 3,000 + 4,096
    assert (
        s["workload.max_prompt_length"].value == 3000
        and "max_model_len 7,096" in s["workload.max_prompt_length"].source
    )
    assert s["max_pixels"].value == 640 * 28 * 28
    assert s["frozen"].value == "vision+projector" and "--freeze_prefix visual" in s["frozen"].source
    # the experience passes' rows: --micro_rollout_batch_size 2, padded to the longest prompt and completion
    assert s["workload.roles.logprob_max_tokens_per_gpu"].value == 2 * (3000 + IMAGE_TOKENS + 4096)


def test_mm_eurekas_script_is_planned_and_its_frozen_tower_saves_memory():
    """Planned (not written: its package is the user's checkout), with the tower and merger frozen: fewer bytes at
    the actor's update than with them trained (planned 59.7 GiB a GPU on an H100, 8 colocated)."""
    out = checkconfig.check_config([str(SCRIPT)], {"gpu": "h100"})
    trained = checkconfig.check_config([str(SCRIPT)], {"gpu": "h100", "frozen": "none"})
    assert out.plan.release == "mm-eureka" and out.plan.frozen == "vision+projector" and out.plan.fits
    assert out.plan.launch.framework_files is None
    assert out.plan.memory.device_total_bytes < trained.plan.memory.device_total_bytes


def test_a_script_naming_only_its_model_takes_mm_eurekas_defaults(tmp_path):
    """MM-Eureka's defaults are v0.6.1's (cli/train_ppo_ray.py:273, 301-302, 312), not OpenRLHF 0.11.2's (--bf16
    given: OpenRLHF's adapter runs bf16 or fp16 alone, so its fp32 default, :267, is planned by the bundled trainer)."""
    path = tmp_path / "run.sh"
    path.write_text(
        "python3 -m openrlhf.cli.train_ppo_ray --pretrain Qwen/Qwen2.5-VL-7B-Instruct --advantage_estimator group_norm "
        "--n_samples_per_prompt 8 --enable_accuracy_filter --bf16\n"
    )
    s = _settings(path)
    assert s["framework"].value == "openrlhf@mm-eureka"
    assert (
        s["micro_batch"].value == 4 and "MM-EUREKA bccddd7 openrlhf/cli/train_ppo_ray.py:312" in s["micro_batch"].source
    )
    assert s["attention"].value == "eager" and "train_ppo_ray.py:273 --flash_attn off" in s["attention"].source
    # 1,024 text tokens and the image, planned within vLLM's max_model_len 1024 + 1024 (cli/train_ppo_ray.py:75)
    assert s["workload.max_prompt_length"].value == 2048 - 1024
    assert s["workload.max_completion_length"].value == 1024


def test_max_len_and_packed_rows_bound_mm_eurekas_rows(tmp_path):
    """--max_len sets vLLM's max_model_len where given (cli/train_ppo_ray.py:75): a trained row is at most 1,500
    tokens and the completion kept whole; packed (--packing_samples, experience_maker.py:996-1004), an experience row
    is each sample's own length, at most 1,500, 8 of them (the default --micro_rollout_batch_size)."""
    path = tmp_path / "run.sh"
    path.write_text(
        "python3 -m openrlhf.cli.train_ppo_ray --pretrain Qwen/Qwen2.5-VL-7B-Instruct --advantage_estimator group_norm "
        "--n_samples_per_prompt 8 --enable_accuracy_filter --bf16 --max_len 1500 --packing_samples\n"
    )
    s = _settings(path)
    assert (
        s["workload.max_prompt_length"].value == 1500 - 1024
        and "--max_len 1500" in s["workload.max_prompt_length"].source
    )
    assert s["workload.roles.logprob_max_tokens_per_gpu"].value == 8 * 1500


INTERNVL = SCRIPT.parent / "train_mm_eureka_8b_single_node.sh"  # the internvl branch's (129fc9e), verbatim
# InternVL2.5's worst image: 12 tiles and the thumbnail of 256 tokens each, and its two delimiters (the internvl rule)
TILES_TOKENS = 13 * 256 + 2


def test_the_internvl_branchs_script_is_its_own_release_with_the_tower_frozen():
    """MM-Eureka's internvl branch (OpenRLHF v0.6.0.post1 with InternVL's actor) is known by its reward function's
    file (no flag of its own in its scripts); its actor freezes the vision tower whatever the flags say
    (models/actor.py:87), and vLLM tiles each image (12 tiles and a thumbnail) on top of --prompt_max_len."""
    s = _settings(INTERNVL)
    assert s["framework"].value == "openrlhf@mm-eureka-internvl" and "reward_func_internvl_" in s["framework"].source
    got = {f: s[f].value for f in ("micro_batch", "grad_accum", "gpus_per_node", "nodes", "zero_stage", "offload")}
    assert got == {
        "micro_batch": 2,
        "grad_accum": 4,
        "gpus_per_node": 8,
        "nodes": 1,
        "zero_stage": 1,
        "offload": "optimizer",
    }
    assert s["workload.num_generations"].value == 8 and s["workload.kind"].value == "rloo"
    # the tiles on top of --prompt_max_len 2048 (5,378), but a trained row is at most vLLM's max_model_len 2048 + 4096
    assert (
        s["workload.max_prompt_length"].value == 2048
        and "max_model_len 6,144" in s["workload.max_prompt_length"].source
    )
    assert s["workload.roles.logprob_max_tokens_per_gpu"].value == 4 * (2048 + TILES_TOKENS + 4096)  # padded rows
    assert s["frozen"].value == "vision" and "actor.py:87" in s["frozen"].source
    out = checkconfig.check_config([str(INTERNVL)], {"gpu": "h100"})
    assert out.plan.release == "mm-eureka-internvl" and out.plan.frozen == "vision" and out.plan.fits


def test_the_branches_are_told_apart_by_their_own_flags(tmp_path):
    """--repetition_penalty is the internvl branch's alone (:319); the accuracy filter both branches take reads as the
    qwen branch, said with the other's name; --use_adora is the qwen branch's alone, whose actor loads Qwen2.5-VL
    alone (its one lmm_kit): an InternVL model there is refused in one line naming the other branch."""
    run = "python3 -m openrlhf.cli.train_ppo_ray --pretrain {} --advantage_estimator rloo --bf16 {}\n"
    path = tmp_path / "run.sh"
    for model, flag, release in (
        ("OpenGVLab/InternVL2_5-8B", "--repetition_penalty 1.05", "openrlhf@mm-eureka-internvl"),
        ("Qwen/Qwen2.5-VL-7B-Instruct", "--enable_accuracy_filter", "openrlhf@mm-eureka"),
    ):
        path.write_text(run.format(model, flag))
        s = _settings(path)
        assert s["framework"].value == release
        assert "enable_accuracy_filter" not in flag or "openrlhf@mm-eureka-internvl" in s["framework"].source
    path.write_text(run.format("OpenGVLab/InternVL2_5-8B", "--use_adora"))
    with pytest.raises(BadInput, match="qwen2_5_vl alone .*openrlhf@mm-eureka-internvl") as e:
        intake.read([str(path)])
    assert "\n" not in str(e.value) and "model_type 'internvl'" in str(e.value)
