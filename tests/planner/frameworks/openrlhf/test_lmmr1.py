"""LMM-R1 (TideDra/lmm-r1 f917f18), OpenRLHF v0.7.3's package with multimodal rollouts, read as the release
openrlhf@lmm-r1 (planner.frameworks.openrlhf.lmmr1): its own example launch scripts, copied verbatim
(tests/data/frameworks/scripts/SOURCES.md), are known by the reward server they start (a module only LMM-R1 ships) and
read with their batch, lengths, GPUs, ZeRO stage, frozen tower and LMM-R1's pixel cap (16384 x 28 x 28); a flag only
LMM-R1 takes names it, --freeze_prefix alone allows LMM-R1 and MM-Eureka; --limit_mm_per_prompt puts up to N images in a
row, within the prompt vLLM admits; a `suggest` at the line is refused."""

import pytest

from planner import advise, checkconfig, intake
from planner.errors import BadInput
from tests.planner.intake.conftest import DATA

SCRIPTS = DATA / "scripts" / "lmm-r1" / "examples" / "scripts" / "lmm_r1"
# Qwen2.5-VL's worst image within LMM-R1's default max_pixels 16384 x 28 x 28 (cli/train_ppo_ray.py:488): 16,384
# tokens of 28 x 28 pixels each (a 14-pixel patch merged 2 x 2)
IMAGE_TOKENS = 16384


def _settings(path) -> dict:
    return {s.field: s for s in intake.read([str(path)]).settings}


def test_lmm_r1s_sokoban_script_is_read_as_its_release():
    s = _settings(SCRIPTS / "train_sokoban.sh")
    assert s["framework"].value == "openrlhf@lmm-r1"
    assert "python -m openrlhf.models.remote_rm.sokoban_verifier" in s["framework"].source
    got = {f: s[f].value for f in ("micro_batch", "grad_accum", "gpus_per_node", "nodes", "zero_stage", "precision")}
    assert got == {
        "micro_batch": 1,
        "grad_accum": 16,
        "gpus_per_node": 8,
        "nodes": 1,
        "zero_stage": 3,
        "precision": "bf16",
    }
    assert s["workload.num_generations"].value == 16 and s["workload.max_completion_length"].value == 8196
    # one image at LMM-R1's own cap on top of --prompt_max_len 4096 (vLLM takes the whole prompt), but vLLM's
    # max_model_len 4096 + 8196 bounds each row: the training rows (unpadded) are at most that, the completion whole
    cap = 4096 + 8196
    assert (
        s["workload.max_prompt_length"].value == cap - 8196
        and "max_model_len 12,292" in s["workload.max_prompt_length"].source
    )
    # the image at LMM-R1's pixel cap (16384 x 28 x 28, train_ppo_ray.py:488) passes the 4,096-token prompt the cap
    # leaves: vLLM refuses such a prompt, so the row's image tokens are planned at the prompt (planner.frameworks.mmlimit)
    assert "max_pixels" not in s and s["image_tokens"].value == cap - 8196
    assert "1 image(s) of 16,384 tokens at the pixel cap" in s["image_tokens"].source
    assert s["frozen"].value == "vision+projector" and "ppo_actor.py:431-440" in s["frozen"].source
    # the experience rows are padded to the rollout batch's longest prompt (at most the cap) and longest completion
    assert s["workload.roles.logprob_max_tokens_per_gpu"].value == 1 * (min(4096 + IMAGE_TOKENS, cap) + 8196)


def test_lmm_r1s_geo_script_is_planned_read_only_at_vllms_max_model_len():
    """The geometry script (no flag of LMM-R1's own: known by its math_verifier server) is planned as LMM-R1 runs
    it: vLLM's max_model_len 8,192 (--prompt_max_len + --generate_max_len) refuses a longer prompt, so a trained row
    is at most 8,192 tokens, not 4,096 text + 16,384 image + 4,096 (24,576: 105.1 GiB, "does not fit"); the
    experience rows (2) are padded to 8,192 + 4,096. It fits an H100 (56.4 GiB planned); the image at the pixel cap,
    16,384 tokens alone, is a prompt vLLM refuses (one line), so the row's image tokens are planned at the 4,096-token
    prompt the cap leaves (the tower on 4,096, not 16,384: the total does not move); nothing is written."""
    out = checkconfig.check_config([str(SCRIPTS / "train_direct_rl_geo.sh")], {"gpu": "h100"})
    assert out.plan.release == "lmm-r1" and out.plan.launch.framework_files is None
    assert (out.plan.micro_batch, out.plan.grad_accum, out.plan.zero_stage, out.plan.frozen) == (2, 16, 3, "none")
    w = out.plan.workload
    assert (w.seq_len(), w.max_completion_length, w.roles.logprob_max_tokens_per_gpu) == (8192, 4096, 2 * 12288)
    assert (out.goal["image_tokens"], out.goal["tower_tokens"], out.images) == (4096, 0, None)  # within the prompt
    assert out.limits["fits_at_max"] and out.plan.fits
    assert out.plan.memory.device_total_bytes / 2**30 == pytest.approx(56.4, abs=0.1)  # the planned figure, pinned
    assert any("16,384 tokens alone is longer than vLLM's max_model_len 8,192" in n for n in out.config["unplanned"])


@pytest.mark.parametrize(
    ("flag", "release"),
    [
        ("--processor_kwargs '{\"max_pixels\": 1003520}'", "openrlhf@lmm-r1"),
        ("--freeze_prefix visual", "openrlhf@lmm-r1"),
        ("--enable_accuracy_filter", "openrlhf@mm-eureka"),
    ],
)
def test_a_forks_own_flag_names_its_release(tmp_path, flag, release):
    """LMM-R1's --processor_kwargs (cli/train_ppo_ray.py:345) names it, with the pixels it gives (its image of 1,280
    tokens on the default 1,024 text tokens: 8 experience rows padded to the max_model_len 2,048 and 1,024); --freeze_prefix,
    which LMM-R1 and MM-Eureka take, allows both (LMM-R1 assumed); MM-Eureka's own flag names MM-Eureka."""
    path = tmp_path / "run.sh"
    path.write_text(
        "python3 -m openrlhf.cli.train_ppo_ray --pretrain Qwen/Qwen2.5-VL-7B-Instruct --advantage_estimator "
        f"group_norm --n_samples_per_prompt 8 --bf16 {flag}\n"
    )
    s = _settings(path)
    assert s["framework"].value == release
    if "processor_kwargs" in flag:
        rows = s["workload.roles.logprob_max_tokens_per_gpu"].value
        # its image of 1,280 tokens passes the 1,024-token prompt vLLM's max_model_len leaves: planned at the prompt
        assert s["image_tokens"].value == 1024 and rows == 8 * (min(1024 + 1280, 2048) + 1024)
        assert (
            s["micro_batch"].value == 4
            and "lmm-r1 f917f18 openrlhf/cli/train_ppo_ray.py:306" in s["micro_batch"].source
        )
    if "freeze_prefix" in flag:
        assert "lmm-r1, mm-eureka" in s["framework"].source


# Qwen2.5-VL's worst image within --processor_kwargs' max_pixels 1,003,520 (1280 x 28 x 28): 1,280 tokens
SMALL = "--processor_kwargs '{\"max_pixels\": 1003520}'"


@pytest.mark.parametrize(
    ("limit", "lengths", "images", "prompt"),
    [
        (None, "--prompt_max_len 4096 --generate_max_len 1024", 1, 4096),  # vLLM's limit 1
        ("'{\"image\": 3}'", "--prompt_max_len 4096 --generate_max_len 1024", 3, 4096),
        ('\'{"image": 4, "video": 1}\'', "--prompt_max_len 4096 --generate_max_len 1024", None, 4096),
        ("'{\"image\": 2}'", "--prompt_max_len 1024 --generate_max_len 1024 --max_len 16384", 2, 1024 + 2 * 1280),
    ],
)
def test_limit_mm_per_prompt_puts_up_to_n_images_in_a_row_within_the_cap(tmp_path, limit, lengths, images, prompt):
    """--limit_mm_per_prompt (lmm-r1 f917f18 cli/train_ppo_ray.py:235, :492-497, :64): a row holds up to N images of
    1,280 tokens, on the prompt's text; where they pass what vLLM's max_model_len leaves the prompt (4 x 1,280 over
    4,096 - text), the row's image tokens are planned at the prompt (images and pixels dropped). Its "video" is a line:
    the rollout passes vLLM images only (experience_maker.py:683-686)."""
    path = tmp_path / "run.sh"
    flag = f"--limit_mm_per_prompt {limit}" if limit else ""
    path.write_text(
        "python3 -m openrlhf.cli.train_ppo_ray --pretrain Qwen/Qwen2.5-VL-7B-Instruct --advantage_estimator "
        f"group_norm --n_samples_per_prompt 8 --bf16 {SMALL} {lengths} {flag}\n"
    )
    reading = intake.read([str(path)])
    s = {x.field: x for x in reading.settings}
    said = "(video of limit_mm_per_prompt not planned: lmm-r1 f917f18 passes vLLM a row's images only, "
    assert any(said in line and "--limit_mm_per_prompt" in line for line in reading.unplanned) == ("video" in flag)
    assert s["framework"].value == "openrlhf@lmm-r1" and s["workload.max_prompt_length"].value == prompt
    if images is None:
        assert "images" not in s and s["image_tokens"].value == prompt and "4 image(s)" in s["image_tokens"].source
        return
    assert s["images"].value == images and s["max_pixels"].value == 1003520 and "image_tokens" not in s
    assert s["images"].source.startswith("memplan assumption") == (limit is None)


def test_a_limit_memplan_cannot_read_is_refused_in_one_line(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text(
        "python3 -m openrlhf.cli.train_ppo_ray --pretrain Qwen/Qwen2.5-VL-7B-Instruct --advantage_estimator "
        "group_norm --bf16 --limit_mm_per_prompt image=4\n"
    )
    with pytest.raises(BadInput, match="'image=4' is not a limit memplan can plan; accepted: a JSON object") as e:
        _settings(path)
    assert "\n" not in str(e.value)


def test_a_suggest_at_lmm_r1_is_refused_in_one_line():
    req = {"model": "qwen2.5-0.5b", "gpu": "h100", "gpus_per_node": 8, "global_batch": 64, "top": 1}
    req |= {"framework": "openrlhf@lmm-r1", "evidence": "analytic", "seq_len": 1024}
    with pytest.raises(BadInput, match="LMM-R1's launch scripts are read, not written") as e:
        advise.suggest(advise.parse(advise.SuggestRequest, req))
    assert "\n" not in str(e.value)
