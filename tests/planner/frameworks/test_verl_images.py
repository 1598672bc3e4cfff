"""verl's images where the files set no processor kwargs (planner/frameworks/verl/reader_media.py own_bounds): a run
of a Qwen-VL model whose files name the dataset's image column (data.image_key) or an image limit plans the images
verl feeds, each within verl's own cap (qwen_vl_utils' 16,384 tokens an image, the checkpoint processor's
preprocessor_config.json: 12,845,056 pixels at factor 28), a row's image tokens at most data.max_prompt_length;
files that name no image stay text only, and a VLM family memplan restates no pixel rule of is a line."""

from pathlib import Path

from planner import checkconfig, intake
from planner.model import images
from planner.model.image_rules import QWEN2_VL_CHECKPOINT_PIXELS

EXAMPLE = Path(__file__).parents[2] / "data" / "frameworks" / "verl" / "examples" / "run_qwen2_5_vl-7b.sh"
RUN = (
    "python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo actor_rollout_ref.model.path={model} "
    "data.max_prompt_length={prompt} data.max_response_length=1024 "
)


def _read(tmp_path, text: str):
    path = tmp_path / "run.sh"
    path.write_text(text + "\n")
    reading = intake.read([str(path)])
    return reading, {s.field: s for s in reading.settings}


def test_qwen_vl_worst_image_is_16384_tokens_at_verls_own_cap():
    """The bounds own_bounds plans: the checkpoints' 3,136 .. 12,845,056 pixels, whose worst image is qwen_vl_utils'
    IMAGE_MAX_TOKEN_NUM, 16,384 tokens (qwen_vl_utils 0.0.14 vision_process.py:27; exact)."""
    assert QWEN2_VL_CHECKPOINT_PIXELS == (3136, 16384 * 28 * 28)
    assert images.worst_case("qwen2-vl", *QWEN2_VL_CHECKPOINT_PIXELS)[0] == 16384
    assert images.worst_case("qwen3-vl")[0] == 16384  # 16,777,216 pixels at factor 32


def test_an_image_key_plans_one_image_at_verls_cap_within_the_prompt(tmp_path):
    """data.image_key with no mm_processor_kwargs: one image a row (assumed) of at most 16,384 tokens; past the
    20,000-token prompt it is not, so the row is planned as one such image, its bounds cited as verl's default."""
    run = RUN.format(model="Qwen/Qwen2.5-VL-3B-Instruct", prompt=20000)
    _, s = _read(tmp_path, run + "data.image_key=images")
    assert s["images"].value == 1 and "memplan assumption: one image a row" in s["images"].source
    assert s["images"].key == "data.image_key" and "image_tokens" not in s
    assert (s["min_pixels"].value, s["max_pixels"].value) == QWEN2_VL_CHECKPOINT_PIXELS
    assert "verl 0.9.1 default max_pixels 12,845,056, 16,384 tokens of 28 x 28 pixels" in s["max_pixels"].source
    assert "qwen_vl_utils fetch_image" in s["max_pixels"].source


def test_the_verl_qwen25vl_grpo_example_plans_its_images_not_text_only():
    """verl v0.7.0's examples/grpo_trainer/run_qwen2_5_vl-7b.sh (data.image_key=images, data.max_prompt_length=1024,
    no pixel bounds): a row's image tokens planned at the prompt's 1,024 (the agent loop refuses a longer multimodal
    prompt), so its headline is no longer text only: one image a row of at most 1,024 tokens, assumed (the count is
    memplan's: the verdict's condition, planner.intake.media), under data.image_key."""
    reading = intake.read([str(EXAMPLE)])
    s = {x.field: x for x in reading.settings}
    assert s["image_tokens"].value == 1024 and "images" not in s
    assert s["image_tokens"].key == "data.image_key" and "image_tokens" in reading.media_assumed
    assert "data.image_key=images (memplan assumption: one image a row" in s["image_tokens"].source
    assert "1 image(s) of 16,384 tokens at the pixel cap (max_pixels 12,845,056: verl 0.9.1 default" in (
        s["image_tokens"].source
    )
    result = checkconfig.check_config([str(EXAMPLE)], {"gpu": "h100"})
    assert result.context[2].image_tokens == 1024  # planned into the step (printout.text_only_mark: no text only)
    assert (result.media["images_per_row"], result.media["tokens_per_image"]) == (1, 1024)
    assert "planned for one image of at most 1,024 tokens (data.image_key)" in result.media["condition"]


def test_a_limit_alone_says_the_rows_hold_images(tmp_path):
    """rollout.limit_images=2 with no bounds: up to 2 images a row at verl's cap, 2 x 16,384 past the 1,024-token
    prompt: planned at the prompt (the limit's source kept), no line left for the limit."""
    run = RUN.format(model="Qwen/Qwen2.5-VL-3B-Instruct", prompt=1024)
    reading, s = _read(tmp_path, run + "actor_rollout_ref.rollout.limit_images=2")
    assert s["image_tokens"].value == 1024 and "rollout.limit_images=2 (up to 2 a row" in s["image_tokens"].source
    assert not [x for x in reading.unplanned if "limit_" in x]
    assert "image_tokens" not in reading.media_assumed  # the limit says the count: no condition


def test_files_naming_no_image_stay_text_only(tmp_path):
    """No image key, limit or bounds: verl would feed an `images` column the dataset has, which the files do not say:
    nothing planned, the headline's text only (planner.cli.printout.text_only_mark) stands."""
    _, s = _read(tmp_path, RUN.format(model="Qwen/Qwen2.5-VL-3B-Instruct", prompt=1024))
    assert not {"images", "image_tokens", "min_pixels", "max_pixels"} & set(s)


def test_a_family_without_a_pixel_rule_is_a_line(tmp_path):
    """A text model named with an image key (verl builds no processor for it: utils/tokenizer/tokenizer.py:199-200)
    plans no image, in one line."""
    reading, s = _read(tmp_path, RUN.format(model="Qwen/Qwen2.5-7B-Instruct", prompt=1024) + "data.image_key=images")
    assert "images" not in s and "image_tokens" not in s
    (line,) = [x for x in reading.unplanned if "data.image_key" in x]
    assert "(images not planned: memplan sizes a verl run's images for the Qwen-VL families only)" in line
