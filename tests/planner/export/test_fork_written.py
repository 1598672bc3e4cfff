"""Issue 46 item 5 for TRL's lines and its GRPO forks: the files `suggest --emit` writes run the plan printed. The Slurm
script runs the printed command's words (the model included: VLM-R1's get_vlm_module(None) fails without it); a fork's
GRPO plan runs the fork's own entry script with the pixel cap its images were planned at (its own flags: unwritten,
VLM-R1 and R1-V size each image up to 12,845,056 pixels, 16,384 tokens); and the written files read back (`check
--config`) as the fork's plan. Each fork's own parser takes these files: test_old_releases_parse.py (fork_validate)."""

import shlex

import pytest

from planner import advise, intake
from planner.export import launch
from planner.frameworks import FRAMEWORKS
from planner.frameworks.trl.forks import FORK_ENTRY

BODY = {"model": "qwen2.5-vl-3b", "gpu": "h100", "gpus_per_node": 2, "global_batch": 16, "top": 1}
GRPO = {"kind": "grpo", "num_generations": 4, "max_prompt_length": 768}
IMAGES = {"images": 1, "max_pixels": 401408}  # 512 tokens an image (28 x 28 pixels a token)


def suggested(framework: str, **more):
    body = {**BODY, "framework": framework, "workload": GRPO, "evidence": "analytic", **more}
    res = advise.suggest(advise.parse(advise.SuggestRequest, body), with_nearest=False)
    return res.plans[0], res.context


def words_after(text: str, script: str) -> list[str]:
    """The words after `script` in a command, or in launch.sbatch (inside srun's bash -c '...')."""
    words = shlex.split(text.replace("\\\n", " "), comments=True)
    inner = [w for w in words if script in w and " " in w]
    words = shlex.split(inner[0]) if inner else words
    return words[words.index(script) + 1 :]


def flag(words: list[str], name: str) -> str:
    return words[words.index(name) + 1]


@pytest.mark.parametrize("line", [r.name for r in FRAMEWORKS["trl"].releases if r.name != "unsloth"])
def test_the_slurm_script_runs_the_printed_command(line):
    plan, (model, hw, goal) = suggested(f"trl@{line}", **IMAGES)
    script = FORK_ENTRY.get(line, "train.py")
    printed = words_after(plan.launch.command, script)
    sbatch = words_after(launch.files(plan, hw, model, goal.seq_len, goal)["launch.sbatch"], script)
    assert flag(sbatch, "--model_name_or_path") == "Qwen/Qwen2.5-VL-3B-Instruct"
    assert sbatch == printed


@pytest.mark.parametrize("fork", sorted(FORK_ENTRY))
def test_a_fork_plan_written_reads_back_as_that_fork_at_its_pixel_cap(fork, tmp_path):
    plan, (model, hw, goal) = suggested(f"trl@{fork}", **IMAGES)
    assert (goal.image_tokens, goal.pixels) == (512, (3136, 401408))
    launch.emit(plan, hw, model, str(tmp_path), goal.seq_len, goal)
    words = words_after((tmp_path / "launch.sbatch").read_text(), FORK_ENTRY[fork])
    assert (flag(words, "--max_pixels"), flag(words, "--max_prompt_length")) == ("401408", "256")  # text 768 - 512
    back = intake.read([str(tmp_path / "launch.sbatch")]).request
    w = back["workload"]
    assert back["framework"] == f"trl@{fork}"
    assert (back["min_pixels"], back["max_pixels"], back["images"]) == (3136, 401408, 1)
    assert (w["num_generations"], w["max_completion_length"]) == (4, plan.workload.max_completion_length)
    assert w["max_prompt_length"] == plan.workload.max_prompt_length == 768
    checked = advise.check(advise.parse(advise.CheckRequest, {**back, "gpu": "h100"}))
    assert (checked.plan.micro_batch, checked.plan.grad_accum) == (plan.micro_batch, plan.grad_accum)
    assert checked.plan.workload.logprobs == plan.workload.logprobs == "full"  # VLM-R1's trainer: the whole logits


def test_a_fork_plan_without_a_pixel_cap_says_the_scripts_cap_is_not_the_plans():
    plan, _ = suggested("trl@vlm-r1", images=1, tokens_per_image=256)
    assert "--max_pixels" not in plan.launch.command
    assert "--max_pixels (default 12,845,056" in plan.launch.note
    plan, _ = suggested("trl@1.10", **IMAGES)  # TRL's own GRPO script: no flag for the processor's bounds
    assert "max_pixels 401,408: the command has no flag" in plan.launch.note


@pytest.mark.parametrize(
    ("framework", "config"), [("llamafactory", "llamafactory_train.yaml"), ("swift", "swift_train.sh")]
)
def test_a_vlm_plans_pixel_cap_is_written_and_read_back(framework, config, tmp_path):
    """LLaMA-Factory's image_max_pixels (unwritten: 768 x 768, 752 tokens) and ms-swift's MAX_PIXELS (unwritten:
    12,845,056, 16,384 tokens) carry the plan's cap, image_min_pixels / MIN_PIXELS its lower bound: the files read
    back at the plan's 512 image tokens."""
    body = {**BODY, "framework": framework, "seq_len": 2048, "evidence": "analytic", **IMAGES}
    res = advise.suggest(advise.parse(advise.SuggestRequest, body), with_nearest=False)
    plan, (model, hw, goal) = res.plans[0], res.context
    launch.emit(plan, hw, model, str(tmp_path), goal.seq_len, goal)
    assert intake.read([str(tmp_path / config)]).request["image_tokens"] == goal.image_tokens == 512
    low = {"llamafactory": "image_min_pixels: 3136", "swift": "\nMIN_PIXELS=3136 "}[framework]  # the lower bound too
    assert low in (tmp_path / config).read_text()


VIDEO = {"videos": 1, "max_frames": 16, "fps": 1.0, "video_max_pixels": 200704, "video_min_pixels": 50176}


@pytest.mark.parametrize(
    ("framework", "config"), [("llamafactory", "llamafactory_train.yaml"), ("swift", "swift_train.sh")]
)
def test_a_video_plans_caps_are_written_and_read_back(framework, config, tmp_path):
    """A video a row, 16 frames of at most 256 x 28 x 28 pixels (2,048 tokens; unwritten, LF samples up to 128 frames
    of 256 x 256 and ms-swift up to 768 of 768 x 28 x 28): the files carry the frame caps and fps (LF's video_*
    keys, ms-swift's VIDEO_* / FPS* environment) and read back as the same video, checked at the same tokens."""
    body = {**BODY, "framework": framework, "seq_len": 4096, "evidence": "analytic", **VIDEO}
    res = advise.suggest(advise.parse(advise.SuggestRequest, body), with_nearest=False)
    plan, (model, hw, goal) = res.plans[0], res.context
    assert (goal.video, goal.image_tokens) == ((50176, 200704, 1.0, 16), 2048)
    launch.emit(plan, hw, model, str(tmp_path), goal.seq_len, goal)
    back = intake.read([str(tmp_path / config)]).request
    assert {k: back[k] for k in VIDEO} == VIDEO and "image_tokens" not in back
    checked = advise.check(advise.parse(advise.CheckRequest, {**back, "gpu": "h100"}))
    assert checked.context[2].image_tokens == goal.image_tokens


def test_an_internvl_plans_tile_cap_is_written_and_read_back(tmp_path):
    """VLM-R1's InternVL module tiles each image up to --max_anyres_num (unwritten, 12 tiles: 3,330 tokens); a plan at
    6 tiles (7 x 256 + 2 = 1,794 tokens) writes it and reads back at the same rule and tokens."""
    body = {
        "model": "internvl2.5-8b",
        "images": 1,
        "image_rule": "internvl:6",
        "workload": {**GRPO, "max_prompt_length": 2048},
    }
    plan, (model, hw, goal) = suggested("trl@vlm-r1", **body)
    assert (goal.tiles, goal.pixels, goal.image_tokens) == (6, None, 1794)
    assert flag(words_after(plan.launch.command, FORK_ENTRY["vlm-r1"]), "--max_anyres_num") == "6"
    assert plan.launch.note is None or "max_pixels" not in plan.launch.note
    launch.emit(plan, hw, model, str(tmp_path), goal.seq_len, goal)
    back = intake.read([str(tmp_path / "launch.sbatch")]).request
    assert (back["image_rule"], back["images"]) == ("internvl:6", 1)
    checked = advise.check(advise.parse(advise.CheckRequest, {**back, "gpu": "h100"}))
    assert checked.context[2].image_tokens == goal.image_tokens


def test_ms_swifts_tile_cap_is_written_and_read_back_and_lf_says_it_has_none(tmp_path):
    """ms-swift's InternVL template tiles each image up to MAX_NUM (unwritten, 12): the script carries the plan's 6 and
    reads back at the same 1,794 tokens; LLaMA-Factory's YAML has no tile key, so its plan says so."""
    body = {**BODY, "model": "internvl2.5-8b", "seq_len": 4096, "evidence": "analytic", "images": 1}
    body["image_rule"] = "internvl:6"
    res = advise.suggest(advise.parse(advise.SuggestRequest, {**body, "framework": "swift"}), with_nearest=False)
    plan, (model, hw, goal) = res.plans[0], res.context
    launch.emit(plan, hw, model, str(tmp_path), goal.seq_len, goal)
    assert "\nMAX_NUM=6 " in (tmp_path / "swift_train.sh").read_text()
    assert intake.read([str(tmp_path / "swift_train.sh")]).request["image_tokens"] == goal.image_tokens == 1794
    res = advise.suggest(advise.parse(advise.SuggestRequest, {**body, "framework": "llamafactory"}), with_nearest=False)
    assert "each image is planned within 6 tiles: llamafactory's files here set no such cap" in res.plans[0].launch.note
