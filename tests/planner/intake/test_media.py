"""planner.intake.media: the media a row was assumed to hold, as check --config's condition (issue 47 items 5 and 6).
A VLM run read from files is planned at one image a row at the pixel cap, or one video a row, where the files do not
say how many; the answer says so, and says nothing where a flag or --data gives the count (field run swift-2753)."""

from pathlib import Path

import pytest

from planner import checkconfig, intake
from planner.cli import advising, printout

ROOT = Path(__file__).resolve().parents[3]
SWIFT_2753 = ROOT / "tests/field/swift-2753-qwen2vl7b-lora-z2-4xa6000/train.sh"
VIDEO = ROOT / "tests/data/frameworks/swift/examples/train/multimodal/video.sh"
CAPTION = ROOT / "docs/examples/configs/swift/caption.sh"
FIELD = {"gpu": "rtx-a6000", "model": "qwen2.5-vl-7b"}  # the field run's flags (tests/field/.../run.toml)


def test_one_image_a_row_at_max_pixels_is_the_verdicts_condition():
    """ms-swift 2.x, MAX_PIXELS=602112, no --data: one image a row of 602112 // 784 = 768 tokens, said as such."""
    result = checkconfig.check_config([str(SWIFT_2753)], FIELD)
    source = next(s.source for s in intake.read([str(SWIFT_2753)]).settings if s.field == "image_tokens")
    assert result.media == {
        "images_per_row": 1,
        "tokens_per_image": 768,
        "videos": 0,
        "source": source,
        "condition": "the files do not say how many images a row holds: planned for one image of at most 768 tokens "
        "(MAX_PIXELS); rows with more images, or with videos, are not planned: give --images N, --videos N or --data; "
        "this configuration fits rows of up to 6 such images (7 do not fit)",
        "fits_up_to_images": 6,
    }
    assert source.startswith("train.sh:1 MAX_PIXELS=602112 (one image a row: 602112 // 784")
    assert result.plan.fits and result.context[2].image_tokens == 768  # the verdict and the plan as before
    assert printout.media_mark(result.media) == ", one image a row of at most 768 tokens (assumed)"


@pytest.mark.parametrize("n,fits", [(6, True), (7, False)])
def test_the_most_images_a_row_holds_is_what_check_says_for_that_many(n, fits):
    """The condition's 6 images of 768 tokens (ms-swift 2.x inserts them after the text's cut: each lengthens the
    row) against check with --images N --tokens-per-image 768 itself: 6 fit, 7 do not."""
    told = {**FIELD, "images": n, "tokens_per_image": 768}
    result = checkconfig.check_config([str(SWIFT_2753)], told)
    assert result.plan.fits is fits and result.context[2].seq_len == 2048 + n * 768


def test_where_the_length_holds_the_images_the_most_is_what_it_holds(tmp_path):
    """LLaMA-Factory's cutoff_len holds the images' tokens (field run lf-9331, 2,048 tokens, 334 an image): at most
    6 images a row whatever the memory, said so."""
    run = ROOT / "tests/field/lf-9331-qwen25vl7b-lora-5090/qwen2_5vl_lora_sft.yaml"
    result = checkconfig.check_config([str(run)], {"gpu": "rtx5090", "gpus_per_node": 1})
    assert result.media["fits_up_to_images"] == 6 == 2048 // result.media["tokens_per_image"]
    assert result.media["condition"].endswith("fits rows of up to 6 such images (the row's length holds no more)")


@pytest.mark.parametrize(
    "told",
    [
        {"images": 2},
        {"videos": 1, "video_seconds": 10, "video_max_pixels": 602112, "seq_len": 10496},
        pytest.param(  # a dataset scanned: 4.5 s
            {"data": str(ROOT / "docs/examples/vlm-chat.jsonl"), "tokenizer": str(ROOT / "docs/examples/tokenizer")},
            marks=pytest.mark.sweep,
        ),
    ],
)
def test_no_condition_where_a_flag_or_the_data_gives_the_rows_media(told):
    """--images, --videos or --data beside the files: the rows' media are the user's; no assumption is said (and
    the reading's derived image no longer stands against a count given: --images 2 beside --model was refused)."""
    result = checkconfig.check_config([str(SWIFT_2753)], {**FIELD, **told}, scanner=advising.scanner)
    assert result.media is None and printout.media_mark(result.media) == ""


def test_one_video_a_row_where_the_environment_sets_frame_sampling():
    """FPS_MAX_FRAMES without MAX_PIXELS: one video a row assumed (reader_video.video), no image planned beside it."""
    assert intake.read([str(VIDEO)]).media_assumed == ("videos",)
    media = checkconfig.check_config([str(VIDEO)], {"gpu": "h100"}).media
    assert (media["images_per_row"], media["tokens_per_image"], media["videos"]) == (0, None, 1)
    assert media["condition"].startswith("the files do not say how many videos a row holds: planned for one video")
    assert "rows with more videos, or with images, are not planned" in media["condition"]
    assert printout.media_mark(media) == ", one video a row (assumed)"


def test_a_vlm_read_text_only_says_text_only_and_no_image_count(tmp_path):
    """ms-swift 4.x without MAX_PIXELS assumes no image (reader_media.image): the headline's text-only mark, not a
    condition on images never planned (issue 47 item 5)."""
    script = tmp_path / "run.sh"
    script.write_text("".join(line for line in CAPTION.read_text().splitlines(True) if "MAX_PIXELS" not in line))
    result = checkconfig.check_config([str(script)], {"gpu": "h100"})
    assert result.media is None and result.text_only  # the API's JSON says it too (CheckResult.text_only)
    assert checkconfig.check_config([str(CAPTION)], {"gpu": "h100"}).media["tokens_per_image"] == 1280


def test_llamafactorys_pixel_cap_is_one_image_a_row_assumed(tmp_path):
    """LLaMA-Factory's image_max_pixels (reader_media._image): one image a row, its count assumed."""
    path = tmp_path / "sft.yaml"
    path.write_text(
        "model_name_or_path: Qwen/Qwen2.5-VL-7B-Instruct\nstage: sft\nfinetuning_type: lora\nlora_target: all\n"
        "cutoff_len: 2048\nimage_max_pixels: 262144\n"
    )
    reading = intake.read([str(path)])
    assert reading.media_assumed == ("image_tokens",) and reading.request["image_tokens"] == 262144 // 784


def _planned(paths, told: dict):
    """(the goal's image tokens, its pixel bounds, the plan's peak bytes) of check --config with the flags `told`."""
    result = checkconfig.check_config([str(p) for p in paths], told, scanner=advising.scanner)
    goal = result.context[2]
    return goal.image_tokens, goal.pixels, result.plan.memory.peak_allocated_bytes


def test_images_n_beside_max_pixels_sizes_each_image_within_the_files_cap():
    """Issue 47 items 5 and 7: --images 2 replaces the count, not the cap. MAX_PIXELS=602112 (train.sh:1) sizes each
    image at 602112 // 784 = 768 tokens (qwen2-vl rule's worst case), not Qwen2.5-VL's processor cap (1,003,520: 1,280
    tokens); the tower's patches follow: the plan is the one --max-pixels 602112 gives, not the model's own cap's."""
    told = {**FIELD, "images": 2}
    tokens, pixels, peak = _planned([SWIFT_2753], told)
    assert (tokens, pixels) == (2 * 768, (3136, 602112))
    assert peak == _planned([SWIFT_2753], {**told, "max_pixels": 602112})[2]
    assert peak < _planned([SWIFT_2753], {**told, "max_pixels": 1003520})[2]
    # the files' own count is unchanged without the flag; --tokens-per-image keeps its own way of counting
    assert _planned([SWIFT_2753], FIELD)[:2] == (768, None)
    assert _planned([SWIFT_2753], {**told, "tokens_per_image": 100})[:2] == (200, None)


def test_images_n_with_a_model_that_has_no_pixel_rule_drops_the_cap():
    """--model naming a tiling VLM beside MAX_PIXELS: its rule has no pixel budget, the cap is not handed to it (it
    was refused before: the files' derived image stood against --images)."""
    tokens, pixels, _ = _planned([SWIFT_2753], {**FIELD, "model": "internvl2.5-8b", "images": 2})
    assert pixels is None and tokens == 2048  # two images' tiles, over the length: cut at the row's 2,048


def test_videos_n_beside_a_2x_script_takes_max_pixels_as_each_frames_cap(tmp_path):
    """ms-swift 2.x reads a frame's cap as VIDEO_MAX_PIXELS, else MAX_PIXELS (v2.6.1 swift/llm/utils/vision_utils.py:315
    ['max_pixels']): --videos 1 beside MAX_PIXELS=200704 plans each frame within it, not qwen_vl_utils' 602112."""
    script = tmp_path / "train.sh"
    script.write_text(SWIFT_2753.read_text().replace("MAX_PIXELS=602112", "MAX_PIXELS=200704"))
    told = {**FIELD, "videos": 1, "video_seconds": 10, "seq_len": 10496}
    result = checkconfig.check_config([str(script)], told)
    assert result.context[2].video[1] == 200704


def test_llamafactorys_image_max_pixels_sizes_images_n(tmp_path):
    """LLaMA-Factory resizes each image within image_max_pixels (src/llamafactory/data/mm_plugin.py:218-235): --images 2
    beside it is planned within 262144 pixels, as --max-pixels 262144 is."""
    path = tmp_path / "sft.yaml"
    path.write_text(
        "model_name_or_path: Qwen/Qwen2.5-VL-7B-Instruct\nstage: sft\nfinetuning_type: lora\nlora_target: all\n"
        "cutoff_len: 2048\nimage_max_pixels: 262144\n"
    )
    told = {"gpu": "h100", "images": 2}
    tokens, pixels, peak = _planned([path], told)
    assert pixels[1] == 262144 and (tokens, peak) == _planned([path], {**told, "max_pixels": 262144})[::2]


@pytest.mark.sweep  # a dataset scanned: 4.5 s
def test_data_beside_max_pixels_sizes_the_datas_images_within_the_files_cap():
    """--data's rows carry their own images (the files' one image a row yields to them), each sized within
    MAX_PIXELS=602112 as ms-swift resizes it: the example's largest image row is 768 tokens there (2,691 at
    the checkpoint's own cap, 12,845,056; 1,242 at the class's 1,003,520)."""
    data = {"data": str(ROOT / "docs/examples/vlm-chat.jsonl"), "tokenizer": str(ROOT / "docs/examples/tokenizer")}
    result = checkconfig.check_config([str(SWIFT_2753)], {**FIELD, **data}, scanner=advising.scanner)
    assert result.context[2].pixels == (3136, 602112) and result.data["image_tokens"] == 768


@pytest.mark.parametrize(
    "script",
    [
        "MAX_NUM=2 swift sft --model OpenGVLab/InternVL2_5-8B --tuner_type lora --max_length 4096\n",  # 2 tiles
        "IMAGE_MAX_TOKEN_NUM=256 swift sft --model Qwen/Qwen2.5-VL-7B-Instruct --tuner_type lora --max_length 4096\n",
    ],
)
def test_images_n_beside_a_tile_or_token_cap_is_n_images_at_it(tmp_path, script):
    """ms-swift's MAX_NUM (InternVL's tiles, swift/template/templates/internvl.py:28) and IMAGE_MAX_TOKEN_NUM (TOKEN_CAP)
    kept under --images 2: two images each at the files' one-image count."""
    path = tmp_path / "train.sh"
    path.write_text(script)
    one = _planned([path], {"gpu": "h100"})[0]
    assert one in (770, 256) and _planned([path], {"gpu": "h100", "images": 2})[0] == 2 * one


@pytest.mark.parametrize("n,fits", [(4, True), (5, False)])
def test_images_n_lengthen_a_2x_row_of_a_models_own_images_as_its_condition_says(n, fits):
    """Field run swift-1613 (ms-swift 2.x, MiniCPM-V 2.6: its own 640-token image after the text's 2,048): --images N
    lengthens the row by N images, as the pixel path's rows (it kept the one-image 2,688 tokens, and refused 5 images
    as over that length); the condition's most images, 4, is what check says for 4 and 5."""
    run = ROOT / "tests/field/swift-1613-minicpmv26-int4-lora-8x4090/train.sh"
    result = checkconfig.check_config([str(run)], {"gpu": "rtx4090", "images": n})
    assert result.context[2].seq_len == 2048 + n * 640 and result.plan.fits is fits
    assert checkconfig.check_config([str(run)], {"gpu": "rtx4090"}).media["fits_up_to_images"] == 4
