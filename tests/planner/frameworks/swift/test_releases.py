"""ms-swift's releases as the reading plans them (planner/frameworks/swift/reader.py, reader_2.py; the releases in
planner/frameworks/swift.py): 2.x scripts' own flag names and defaults, and where a row's image goes against
--max_length (up to 3.3 after the text's check; from 3.4 inside it, a longer row deleted)."""

from pathlib import Path

import pytest

from planner import checkconfig, intake

VLM = "Qwen/Qwen2.5-VL-7B-Instruct"
CAP_TOKENS = 16384 * 28 * 28 // (28 * 28)  # qwen_vl_utils' MAX_PIXELS over 28 x 28 pixels a token


def _read(tmp_path: Path, text: str, pins: str = ""):
    if pins:
        (tmp_path / "requirements.txt").write_text(pins)
    path = tmp_path / "train.sh"
    path.write_text(text)
    return intake.read([str(path)])


def _s(reading) -> dict:
    return {s.field: s for s in reading.settings}


SWIFT2 = (
    "NPROC_PER_NODE=2 swift sft --model_type qwen2-vl-7b-instruct --model_id_or_path {model} --sft_type lora "
    "--batch_size 2 --lora_target_modules ALL --lora_dropout_p 0.1 --use_flash_attn false --dtype AUTO "
    "--deepspeed default-zero2 --check_dataset_strategy warning --dataset x.json {extra}\n"
)


def test_a_2x_script_is_read_in_2xs_names_and_defaults(tmp_path):
    """--sft_type, --batch_size, --lora_target_modules ALL, --use_flash_attn false (eager), default-zero2; 2.x's
    max_length 2048 by default (v2.5.2 argument.py:661), the image's 16,384 tokens added after it."""
    r = _read(tmp_path, SWIFT2.format(model=VLM, extra=""))
    s = _s(r)
    assert s["framework"].value == "swift@2" and "--sft_type lora" in s["framework"].source
    assert r.request["micro_batch"] == 2 and r.request["lora_rank"] == 8 and r.request["lora_targets"] == "all-linear"
    assert r.request["lora_dropout"] == 0.1 and r.request["attention"] == "eager" and r.request["zero_stage"] == 2
    assert r.request["image_tokens"] == CAP_TOKENS and r.request["seq_len"] == 2048 + CAP_TOKENS
    assert "argument.py:661" in s["seq_len"].source and "16384 * 28 * 28" in s["image_tokens"].source
    assert any("--check_dataset_strategy warning (ms-swift 2.x: does not change memory)" in u for u in r.unplanned)
    assert not any("swift refuses it" in u for u in r.unplanned)


def test_a_2x_max_length_is_the_text_and_the_image_comes_on_top(tmp_path):
    r = _read(tmp_path, SWIFT2.format(model=VLM, extra="--max_length 1024"))
    assert r.request["seq_len"] == 1024 + CAP_TOKENS


def test_max_pixels_sets_the_image_in_every_release(tmp_path):
    r = _read(tmp_path, "MAX_PIXELS=602112 " + SWIFT2.format(model=VLM, extra="--max_length 1024"))
    assert r.request["image_tokens"] == 768 and r.request["seq_len"] == 1024 + 768
    command = f"MAX_PIXELS=602112 swift sft --model {VLM} --tuner_type lora --max_length 1024 --dataset x\n"
    r = _read(tmp_path, command)
    assert r.request["image_tokens"] == 768 and r.request["seq_len"] == 1024  # 4.x: inside max_length


@pytest.mark.parametrize(("pin", "image"), [("", True), ("ms-swift==3.2.0\n", True), ("ms-swift==3.5.0\n", False)])
def test_3x_before_34_adds_the_default_image_after_the_cut(tmp_path, pin, image):
    """--train_type names 3.x; unpinned, the reading takes 3.0-3.3 (the image's tokens after the text's check);
    ms-swift 3.4 deletes a row over max_length with its image, so no cap is assumed (the headline says text only)."""
    command = f"swift sft --model {VLM} --train_type lora --max_length 2048 --dataset x\n"
    r = _read(tmp_path, command, pin)
    assert ("image_tokens" in r.request) == image
    assert r.request["seq_len"] == 2048 + (CAP_TOKENS if image else 0)


def test_a_model_given_beside_the_files_sets_the_default_image(tmp_path):
    """The script's model is a folder not found here; --model beside --config is the model the image is planned on."""
    path = tmp_path / "train.sh"
    path.write_text(SWIFT2.format(model="/data/models/unknown-folder", extra="--max_length 1024"))
    overrides = {"model": "qwen2.5-vl-7b", "gpu": "a100-80gb"}
    out = checkconfig.check_config([str(path)], overrides)
    assert out.context[2].image_tokens == CAP_TOKENS and out.context[2].seq_len == 1024 + CAP_TOKENS
    text = checkconfig.check_config([str(path)], {"model": "qwen2.5-7b", "gpu": "a100-80gb"})
    assert text.context[2].image_tokens == 0 and text.context[2].seq_len == 1024


def test_a_files_target_that_matches_no_module_is_skipped_as_peft_does(tmp_path):
    """PEFT raises only when no target matches (peft 0.20 tuners_utils.py:990-1006): a file's typo beside real names
    is skipped with a line; typed as a flag it stays an error."""
    from planner.errors import BadInput

    path = tmp_path / "train.sh"
    path.write_text("swift sft --model Qwen/Qwen2.5-7B-Instruct --tuner_type lora --target_modules qproj v_proj\n")
    out = checkconfig.check_config([str(path)], {"gpu": "a100-80gb", "seq_len": 1024})
    s = {x["field"]: x for x in out.config["settings"]}
    assert s["lora_targets"]["value"] == "v_proj" and "PEFT skips qproj" in s["lora_targets"]["source"]
    with pytest.raises(BadInput, match="--lora-targets qproj: not a linear"):
        checkconfig.check_config([str(path)], {"gpu": "a100-80gb", "seq_len": 1024, "lora_targets": "qproj,v_proj"})
    path.write_text("swift sft --model Qwen/Qwen2.5-7B-Instruct --tuner_type lora --target_modules qproj\n")
    with pytest.raises(BadInput, match="--lora-targets qproj: not a linear"):
        checkconfig.check_config([str(path)], {"gpu": "a100-80gb", "seq_len": 1024})


def test_grpos_prompt_takes_the_image_on_top_where_the_length_counts_the_text(tmp_path):
    """GRPO's --max_length is the prompt's: up to 3.3 the image's tokens come after the check, from 3.4 inside."""
    command = (
        f"MAX_PIXELS=602112 swift rlhf --rlhf_type grpo --model {VLM} --train_type full --max_length 2048 "
        "--num_generations 4 --dataset x\n"
    )
    assert _read(tmp_path, command).request["workload"]["max_prompt_length"] == 2048 + 768
    assert _read(tmp_path, command, "ms-swift==3.5.0\n").request["workload"]["max_prompt_length"] == 2048


def test_3x_before_34_generates_each_micro_steps_rows_as_it_comes():
    """ms-swift 3.2-3.3 keep trl 0.16's GRPOTrainer._prepare_inputs (a generation per micro-step); from 3.4 its own
    generates the micro-batch x accumulation rows at once (v3.4.1 grpo_trainer.py:1016-1018)."""
    from planner.config.release import in_memplan_terms

    grpo = {"workload": {"kind": "grpo"}}
    assert in_memplan_terms({"framework": "swift@3", **grpo})["workload"]["steps_per_generation"] == 1
    assert "steps_per_generation" not in in_memplan_terms({"framework": "swift@3.4", **grpo})["workload"]
    assert "steps_per_generation" not in in_memplan_terms({"framework": "swift@3.7", **grpo})["workload"]


@pytest.mark.parametrize(("targets", "tower"), [("ALL", True), ("DEFAULT", None), ("", None)])
def test_2x_lora_reaches_the_vit_through_all_alone(tmp_path, targets, tower):
    """2.x's LoRA never reads --freeze_vit (v2.5.2 argument.py:1037-1050; only full fine-tuning does, :1051-1056):
    ALL adapts every Linear by name, the ViT's too (tuner.py:29-31 find_all_linears); DEFAULT (the default) the
    language model's alone (model.py:7232-7235)."""
    script = SWIFT2.format(model=VLM, extra="").replace("--lora_target_modules ALL", "")
    extra = f"--lora_target_modules {targets}" if targets else ""
    r = _read(tmp_path, script.replace("--dataset x.json", f"--dataset x.json {extra}"))
    assert r.request.get("lora_vision") is tower and r.request["lora_targets"] == "all-linear"


def test_2x_minicpm_v_plans_one_image_at_its_slices(tmp_path):
    """MiniCPM-V 2.6 int4 under 2.x: one image a row at the whole and 9 slices of 64 queries (640 tokens), added
    after the text's --max_length as 2.x does; MAX_SLICE_NUMS (the template's get_env_args) caps the slices."""
    script = "NPROC_PER_NODE=8 swift sft --model_id_or_path OpenBMB/MiniCPM-V-2_6-int4 --sft_type lora --dataset x\n"
    r = _read(tmp_path, script)
    assert r.request["model"] == "minicpm-v-2_6-int4" and r.request["image_tokens"] == 640
    assert r.request["seq_len"] == 2048 + 640 and r.request.get("lora_vision") is None
    r = _read(tmp_path, "MAX_SLICE_NUMS=4 " + script)
    assert r.request["image_tokens"] == 64 * 5 and r.request["seq_len"] == 2048 + 320


def test_a_transformers_pin_beside_the_command_decides_the_optimizer(tmp_path):
    """ms-swift 3.7 pins transformers <4.56 (v3.7.0 requirements/framework.txt), read at pip's 4.55.4 (fused AdamW): a
    pin of 4.51.3 beside the command runs adamw_torch (fused only from 4.54), the source naming the pin; a default the
    line did not move names the line, as at the newest (line_defaults.restate)."""
    command = "swift sft --model Qwen/Qwen2.5-0.5B-Instruct --output_dir out\n"
    r = _s(_read(tmp_path, command, pins="ms-swift==3.7.3\ntransformers==4.51.3\n"))
    assert r["optimizer"].value == "adamw" and "transformers==4.51.3" in r["optimizer"].source, r["optimizer"]
    assert r["micro_batch"].source.startswith("swift@3.7 default, as at ms-swift 4.6.0: per_device_train_batch_size")
    assert _s(_read(tmp_path, command, pins="ms-swift==3.7.3\n"))["optimizer"].value == "adamw-fused"


QWEN_VL_UTILS_PIXELS = 16384 * 28 * 28  # qwen_vl_utils' MAX_PIXELS: 12,845,056, not transformers' 1,280 x 28 x 28
# each line's 3.x command without MAX_PIXELS: (the pin, each image's cap under --images 2, the row's length)
NO_MAX_PIXELS = [
    pytest.param("", QWEN_VL_UTILS_PIXELS, 2048 + 2 * CAP_TOKENS, id="3.0-3.3"),  # the images after the text
    pytest.param("ms-swift==3.5.0\n", 2048 * 28 * 28, 2048, id="3.4"),  # a row over max_length deleted
    pytest.param("ms-swift==3.8.3\n", 2048 * 28 * 28, 2048, id="3.7"),
    pytest.param("ms-swift==3.12.6\n", 2048 * 28 * 28, 2048, id="3.9"),
]


@pytest.mark.parametrize(("pin", "pixels", "length"), NO_MAX_PIXELS)
def test_images_n_without_max_pixels_is_sized_within_qwen_vl_utils_cap(tmp_path, pin, pixels, length):
    """No MAX_PIXELS: ms-swift resizes each image with qwen_vl_utils alone (fetch_image, then the processor with
    do_resize=False: v3.0.3 template/qwen.py:205, 245), within 16,384 tokens' pixels; --images 2 is planned there.
    Up to 3.3 both images' tokens come after the text's --max_length (the row 2,048 + 2 x 16,384); from 3.4 a row
    over --max_length is deleted (v3.4.0 template/base.py:421-425), so no image passes 2,048 tokens."""
    command = f"swift sft --model {VLM} --train_type lora --max_length 2048 --dataset x\n"
    body = checkconfig.config_body(_read(tmp_path, command, pin), {"images": 2}).body
    assert (body["max_pixels"], body["seq_len"]) == (pixels, length)


def test_images_n_without_max_pixels_in_2x_and_4x(tmp_path):
    """2.x resizes within the same cap, then its processor within the checkpoint's own 12,845,056 (v2.5.2
    swift/llm/utils/template.py:1530-1553, 1611); 4.x deletes a longer row, as 3.4 does."""
    r = _read(tmp_path, SWIFT2.format(model=VLM, extra="--max_length 1024"))
    body = checkconfig.config_body(r, {"images": 2}).body
    assert (body["max_pixels"], body["seq_len"]) == (QWEN_VL_UTILS_PIXELS, 1024 + 2 * CAP_TOKENS)
    r = _read(tmp_path, f"swift sft --model {VLM} --tuner_type lora --max_length 20000 --dataset x\n")
    body = checkconfig.config_body(r, {"images": 2}).body
    assert (body["max_pixels"], body["seq_len"]) == (QWEN_VL_UTILS_PIXELS, 20000)  # the length over the cap
    assert "max_pixels" not in checkconfig.config_body(r, {}).body  # no --images: the files' own count (none)


def test_max_pixels_flag_rescales_then_qwen_vl_utils_rounds_each_side():
    """--max_pixels P: int sides of area at most P (rescale_image), then each side rounded to 28, which can pass P:
    a 71 x 14,134 image (1,003,514 pixels) rounds to 3 x 505 = 1,515 tokens, 18% over 1,003,520 // 784. Brute force
    over every (height, width) checks the scan's widest width a height."""
    from planner.frameworks.swift.reader_pixels import rescaled_worst_tokens

    assert rescaled_worst_tokens(1003520, 28, 16384) == 3 * 505 == 1515
    assert rescaled_worst_tokens(1003520, 28, 1280) == 1280  # MAX_PIXELS' floor within its own cap
    p = 12544  # 16 blocks of 28 x 28
    brute = max(
        max(1, round(h / 28)) * max(1, round(w / 28))
        for h in range(1, p + 1)
        for w in range(1, p // h + 1)
        if max(h, w) <= 200 * min(h, w)
    )
    assert rescaled_worst_tokens(p, 28, 16384) == brute == 56


@pytest.mark.parametrize(("pin", "row"), [("", 2048 + 1515), ("ms-swift==3.5.0\n", 2048)])
def test_max_pixels_flag_is_each_images_cap(tmp_path, pin, row):
    """ms-swift's template --max_pixels (v3.0.0 template_args.py:35): one image a row at its worst case, 1,515 tokens
    at 1,003,520, after the text up to 3.3, inside the row from 3.4; --images 2 sizes each image within it."""
    command = f"swift sft --model {VLM} --train_type lora --max_length 2048 --max_pixels 1003520 --dataset x\n"
    r = _read(tmp_path, command, pin)
    assert (r.request["image_tokens"], r.request["seq_len"]) == (1515, row)
    assert "--max_pixels 1003520 (rescaled to at most 1,003,520 pixels" in _s(r)["image_tokens"].source
    body = checkconfig.config_body(r, {"images": 2}).body
    assert body["max_pixels"] == 1515 * 784 and body["seq_len"] == (2048 + 2 * 1515 if not pin else 2048)
