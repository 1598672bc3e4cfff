"""VLM-R1's GRPO scripts (planner/frameworks/trl/reader_vlmr1.py): one image a row, sized by the script's --max_pixels / --min_pixels
or VLM-R1's defaults (12,845,056 and 3,136: src/open_r1/grpo_jsonl.py:89-96 at 90052f4), and a prompt that holds the
image tokens (VLM-R1's trainer does not cut prompts), planned through check --config to the image tokens."""

import json
from pathlib import Path

from planner import checkconfig, intake
from planner.model import images
from tests.planner.intake.conftest import DATA

REC = DATA / "scripts" / "VLM-R1" / "run_scripts" / "run_grpo_rec.sh"
COMMAND = (
    "cd src/open-r1-multimodal\n"
    "torchrun --nproc_per_node 8 src/open_r1/{script} --model_name_or_path {model} --per_device_train_batch_size 1 "
    "--gradient_accumulation_steps 2 --num_generations 8 --max_completion_length 1024 --bf16 {flags}\n"
)


def _script(tmp_path: Path, flags: str = "", script: str = "grpo_jsonl.py", model: str = "Qwen/Qwen2.5-VL-3B-Instruct"):
    path = tmp_path / "run.sh"
    path.write_text(COMMAND.format(script=script, model=model, flags=flags))
    return str(path)


def _settings(reading) -> dict:
    return {s.field: s for s in reading.settings}


def test_the_run_scripts_images_are_vlm_r1s_defaults_one_a_row():
    """run_grpo_rec.sh sets no pixels: VLM-R1's defaults, 16,384 tokens an image at Qwen2.5-VL's 28 x 28 pixels a
    token, and the prompt the image and VLM-R1's 512 text tokens."""
    r = intake.read([str(REC)])
    assert {k: r.request[k] for k in ("images", "min_pixels", "max_pixels")} == {
        "images": 1,
        "min_pixels": 3136,
        "max_pixels": 12845056,
    }
    assert r.request["workload"]["max_prompt_length"] == 16384 + 512
    s = _settings(r)
    # the script it runs is beside it (a verbatim copy): its own dataclass's defaults, read from its syntax tree
    own = "(GRPOScriptArguments, the script's own)"
    assert s["max_pixels"].source == f"grpo_jsonl.py:89-92 default max_pixels 12845056 {own}"
    assert s["min_pixels"].source == f"grpo_jsonl.py:93-96 default min_pixels 3136 {own}"
    assert "one image a row" in s["images"].source and "grpo_jsonl.py:967-977" in s["images"].source
    prompt = s["workload.max_prompt_length"].source
    assert "does not cut prompts, src/open_r1/trainer/grpo_trainer.py:366-369" in prompt
    assert "grpo_config.py:164-169" in prompt and "16,384 tokens at the qwen2-vl rule's worst case" in prompt
    out = checkconfig.check_config([str(REC)], {"gpu": "h100"})
    assert out.images["tokens_per_image"] == 16384 and out.images["max_pixels"] == 12845056
    assert out.context[2].image_tokens == 16384 and out.plan.workload.max_prompt_length == 16896


def test_the_scripts_own_pixels_and_prompt_length_size_the_images(tmp_path):
    """VLM-R1's own run scripts under src/open-r1-multimodal/run_scripts/ give --max_prompt_length 1024, which its
    trainer does not apply: it is the prompt's text, and the image comes on top."""
    r = intake.read([_script(tmp_path, "--max_pixels 401408 --min_pixels 6272 --max_prompt_length 1024")])
    assert (r.request["images"], r.request["min_pixels"], r.request["max_pixels"]) == (1, 6272, 401408)
    assert r.request["workload"]["max_prompt_length"] == 1024 + 401408 // 784
    s = _settings(r)
    assert s["max_pixels"].source == "run.sh:2 --max_pixels 401408"
    assert s["workload.max_prompt_length"].source.startswith("run.sh:2 --max_prompt_length 1024 (VLM-R1's trainer")
    out = checkconfig.check_config([r.files[0]], {"gpu": "h100"})
    assert out.context[2].image_tokens == 512 == out.images["tokens_per_image"]
    assert not r.unplanned


def test_grpo_rec_cites_its_own_defaults_and_an_unknown_value_is_said(tmp_path):
    r = intake.read([_script(tmp_path, '--max_pixels "$MAXP"', script="grpo_rec.py")])
    s = _settings(r)
    assert r.request["max_pixels"] == 12845056 and "src/open_r1/grpo_rec.py:63-66" in s["max_pixels"].source
    assert "grpo_rec.py:67-70" in s["min_pixels"].source
    said = "run.sh:2 --max_pixels (not a whole number known from the script: planned at VLM-R1's default 12845056)"
    assert said in r.unplanned, r.unplanned


def test_an_internvl_model_takes_its_tiles_and_not_the_pixels(tmp_path):
    """VLM-R1's InternVL module caps the tiles (--max_anyres_num, vlm_modules/internvl_module.py:67); the pixel
    settings go to Qwen-VL processors only, so a --max_pixels here is a line of its own."""
    r = intake.read([_script(tmp_path, "--max_anyres_num 6 --max_pixels 401408", model="OpenGVLab/InternVL2_5-8B")])
    assert (r.request["images"], r.request["image_rule"]) == (1, "internvl:6") and "max_pixels" not in r.request
    assert any("--max_pixels 401408 (VLM-R1 does not apply it" in line for line in r.unplanned), r.unplanned
    tokens = images.worst_case("internvl:6")[0]  # 6 tiles and the thumbnail, 256 tokens each, and <img> </img>
    out = checkconfig.check_config([r.files[0]], {"gpu": "h100"})
    assert out.context[2].image_tokens == out.images["tokens_per_image"] == tokens == 7 * 256 + 2
    assert r.request["workload"]["max_prompt_length"] == 512 + tokens


def test_without_the_model_the_images_are_a_line_not_a_guess(tmp_path):
    r = intake.read([_script(tmp_path, "--max_pixels 401408", model="$MODEL")])
    assert "images" not in r.request and "max_pixels" not in r.request
    assert any("VLM-R1's images, one a row, are not planned without the model" in line for line in r.unplanned)
    assert any("--max_pixels 401408 (VLM-R1's images are not planned" in line for line in r.unplanned)


def test_a_flags_image_count_replaces_the_configurations():
    """check --config's --image-tokens replaces VLM-R1's images and their pixels (advise takes one way to count them),
    and --images replaces LLaMA-Factory's image tokens; the settings say which the flag replaced."""
    out = checkconfig.check_config([str(REC)], {"gpu": "h100", "image_tokens": 1000})
    assert out.context[2].image_tokens == 1000 and out.images is None
    s = {x["field"]: x for x in out.config["settings"]}
    assert s["images"]["value"] is None and s["images"]["source"].startswith("a flag (the config: 1, memplan")
    assert s["max_pixels"]["value"] is None
    lf = DATA / "llamafactory" / "user" / "qwen2_5vl_lora_sft.yaml"
    out = checkconfig.check_config([str(lf)], {"gpu": "h100", "images": 2})
    assert out.images["images"] == 2 and out.context[2].image_tokens == 2 * out.images["tokens_per_image"]


def test_a_workload_flag_alone_overrides_that_field_of_the_reading():
    """Issue 47 item 7: --beta, --num-generations, --max-prompt-length beside --config each replace the one field
    read (the CLI no longer needs --workload grpo to pass them), the rest of the workload stays as read, and the
    settings name the flag as the source."""
    flags = {"gpu": "h20", "workload": {"beta": 0.0, "num_generations": 4, "max_prompt_length": 17000}}
    out = checkconfig.check_config([str(REC)], flags)
    w = out.plan.workload
    assert (w.beta, w.num_generations, w.max_prompt_length, w.max_completion_length) == (0.0, 4, 17000, 2048)
    s = {x["field"]: x for x in out.config["settings"]}
    assert s["workload.beta"]["value"] == 0.0
    assert s["workload.beta"]["source"].startswith("a flag (the config: 0.04, run_grpo_rec.sh:52")
    assert s["workload.max_completion_length"]["source"].startswith("run_grpo_rec.sh:50")


def test_the_cli_passes_workload_flags_beside_config_without_workload():
    from tests.planner.cli.helpers import planner

    out = planner("check", "--config", str(REC), "--gpu", "h20", "--beta", "0", "--num-generations", "4", "--json")
    got = json.loads(out.stdout)
    assert (got["plan"]["workload"]["beta"], got["plan"]["workload"]["num_generations"]) == (0.0, 4)


def test_a_pixel_flag_derives_the_uncut_prompt_again():
    """The reading derived the prompt from VLM-R1's default cap (512 text tokens and 16,384 image tokens); --max-pixels
    401408 beside --config gives 512 + 512, said as derived again (before: 16,896 stayed, and the plan with it)."""
    out = checkconfig.check_config([str(REC)], {"gpu": "h20", "max_pixels": 401408})
    assert out.plan.workload.max_prompt_length == 512 + images.worst_case("qwen2-vl", 3136, 401408)[0] == 1024
    s = {x["field"]: x for x in out.config["settings"]}["workload.max_prompt_length"]
    assert s["value"] == 1024 and s["source"].startswith("derived again from the flags (the config: 16896")
    given = checkconfig.check_config(
        [str(REC)], {"gpu": "h20", "max_pixels": 401408, "workload": {"max_prompt_length": 900}}
    )
    assert given.plan.workload.max_prompt_length == 900  # the flag's own value is never derived over


def test_an_image_token_flag_derives_the_uncut_prompt_again():
    """--image-tokens (a sample's) and --tokens-per-image (each image's) beside --config size the uncut prompt as
    --max-pixels does: 512 text tokens and the flag's image tokens (before: 16,896 stayed, so the plan and its
    image search said no image size fits, the prompt keeping the worst-case image)."""
    for flag, n in (("image_tokens", 400), ("tokens_per_image", 300)):
        out = checkconfig.check_config([str(REC)], {"gpu": "h20", flag: n})
        assert out.plan.workload.max_prompt_length == 512 + n, flag
        s = {x["field"]: x for x in out.config["settings"]}["workload.max_prompt_length"]
        assert s["source"].startswith("derived again from the flags (the config: 16896"), s


def test_the_image_search_shrinks_the_prompt_with_its_images():
    """VLM-R1's REC run on one H100 at the default cap does not fit; the largest square image that fits is found with
    the prompt holding that image (512 text tokens + its tokens), and the plan at that count fits (before: the
    prompt kept the 16,384-token worst case at every size tried, and the answer was 'no image size fits')."""
    out = checkconfig.check_config([str(REC)], {"gpu": "h100"})
    up = out.images["fits_up_to"]
    assert not out.plan.fits and up is not None and 784 < up["tokens_per_image"] < 16384
    at = checkconfig.check_config([str(REC)], {"gpu": "h100", "tokens_per_image": up["tokens_per_image"]})
    assert at.plan.fits and at.plan.workload.max_prompt_length == 512 + up["tokens_per_image"]
