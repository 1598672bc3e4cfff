"""vLLM's limit_mm_per_prompt as memplan plans it (planner.frameworks.mmlimit): a row's image tokens are its images at
the pixel cap, each as the real Qwen2-VL processor counts them, at most the planned prompt; a limit is read from
LMM-R1's JSON text, a dict or verl's whole number, and anything else is refused in one line."""

import pytest

from planner.errors import BadInput
from planner.frameworks import mmlimit
from planner.model import images

ACCEPTED = "a JSON object such as '{\"image\": 4}'"


def test_a_rows_image_tokens_are_the_processors_for_n_images_within_the_prompt():
    """Three images at the worst case of max_pixels 200,704 (256 x 28 x 28) through transformers' Qwen2-VL image
    processor (the PIL one, CPU): 3 x 256 merged tokens (the grid's patches over 2 x 2), exactly; a 512-token prompt
    holds 512 of them."""
    pytest.importorskip("transformers")
    from PIL import Image
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    each, size = images.worst_case("qwen2-vl", None, 200704)
    proc = Qwen2VLImageProcessorPil(min_pixels=3136, max_pixels=200704)
    grids = proc([Image.new("RGB", size, (90, 140, 20))] * 3, return_tensors="np")["image_grid_thw"]
    measured = int(grids.prod(axis=1).sum()) // 4
    assert each == 256 and mmlimit.row_image_tokens(3, each, 10**6) == measured == 768  # exact
    assert mmlimit.row_image_tokens(3, each, 512) == 512


@pytest.mark.parametrize(
    ("value", "n"), [('{"image": 4}', 4), ({"image": 2, "video": 1}, 2), ('{"video": 2}', 1), (3, 3), ("0", 0)]
)
def test_a_limit_is_read_from_json_a_dict_or_a_number(value, n):
    assert mmlimit.image_limit(value, "run.sh:1", ACCEPTED) == n


@pytest.mark.parametrize("value", ["image=4", '{"image": -1}', '{"image": "4"}', True, [4]])
def test_a_limit_memplan_cannot_plan_is_refused_in_one_line(value):
    with pytest.raises(BadInput, match=r"is not a limit memplan can plan; accepted: a JSON object") as e:
        mmlimit.image_limit(value, "run.sh:1", ACCEPTED)
    assert str(e.value).startswith(f"run.sh:1: {value!r} ") and "\n" not in str(e.value)


VERL = (
    "python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo actor_rollout_ref.model.path="
    "Qwen/Qwen2.5-VL-3B-Instruct data.max_prompt_length=1024 data.max_response_length=1024 "
    "+data.mm_processor_kwargs.min_pixels=3136 +data.mm_processor_kwargs.max_pixels=401408 "
)


@pytest.mark.parametrize(
    ("limit", "n", "tokens"),
    [
        ("", 1, None),  # no limit: one image a row (memplan's assumption, the dataset decides)
        ("actor_rollout_ref.rollout.limit_images=2", 2, None),  # 2 x 512 within the 1,024-token prompt
        ("+actor_rollout_ref.rollout.engine_kwargs.vllm.limit_mm_per_prompt.image=3", None, 1024),
        (
            (
                "actor_rollout_ref.rollout.limit_images=0 +actor_rollout_ref.rollout.engine_kwargs.vllm."
                "limit_mm_per_prompt='{\"image\": 4}'"
            ),
            None,
            1024,
        ),  # 0 leaves the engine kwargs' limit (vllm_async_server.py:289)
    ],
)
def test_verls_image_limit_puts_up_to_n_images_in_a_row_within_the_prompt(tmp_path, limit, n, tokens):
    """verl 0.9.1's rollout.limit_images (or its vLLM engine kwargs' limit_mm_per_prompt): up to N images of 512
    tokens (401,408 pixels) a row, planned at most at data.max_prompt_length 1,024 (the agent loop refuses more)."""
    from planner import intake

    path = tmp_path / "run.sh"
    path.write_text(VERL + limit + "\n")
    s = {x.field: x for x in intake.read([str(path)]).settings}
    if n is not None:
        assert s["images"].value == n and s["max_pixels"].value == 401408 and "image_tokens" not in s
        assert ("assumption" in s["images"].source) == (not limit)
        return
    assert "images" not in s and "max_pixels" not in s and s["image_tokens"].value == tokens
    assert "of 512 tokens at the pixel cap (max_pixels 401,408: " in s["image_tokens"].source


SWIFT = (
    "MAX_PIXELS=401408 NPROC_PER_NODE=4 swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-VL-3B-Instruct --use_vllm "
    "true --max_length 1024 --max_completion_length 512 --num_generations 4 --per_device_train_batch_size 2 "
)


@pytest.mark.parametrize(
    ("flags", "tokens"),
    [
        ("--vllm_mode colocate", 512),  # one image a row at MAX_PIXELS: 512 tokens
        ("--vllm_mode colocate --vllm_limit_mm_per_prompt '{\"image\": 2}'", 1024),
        ("--vllm_mode colocate --vllm_limit_mm_per_prompt '{\"image\": 3}'", 1024),  # 1,536 within --max_length
        ("--vllm_mode server --vllm_limit_mm_per_prompt '{\"image\": 3}'", 512),  # the server takes its own: a line
    ],
)
def test_swifts_vllm_limit_puts_up_to_n_images_in_a_row_within_max_length(tmp_path, flags, tokens):
    """ms-swift 4.6.0's --vllm_limit_mm_per_prompt (rlhf_trainers/args_mixin.py:45, rollout_mixin.py:517) on a
    colocated rollout: up to N images of 512 tokens a row, within the 1,024 tokens --max_length leaves (a longer row
    is deleted from 3.4); a rollout server's trainer does not apply it (a line)."""
    from planner import intake

    path = tmp_path / "run.sh"
    path.write_text(SWIFT + flags + "\n")
    reading = intake.read([str(path)])
    s = {x.field: x for x in reading.settings}
    assert s["image_tokens"].value == tokens
    assert ("limit_mm_per_prompt" in s["image_tokens"].source) == ("colocate --vllm_limit" in flags)
    assert any("(not applied: only a colocated" in n for n in reading.unplanned) == ("server" in flags)


E = "actor_rollout_ref.rollout.engine_kwargs.vllm.limit_mm_per_prompt"


@pytest.mark.parametrize(
    ("pixels", "limit", "n", "said"),
    [
        (True, f'+{E}=\'{{"image": 2, "video": 1}}\'', 2, "(video of limit_mm_per_prompt not planned: verl 0.9.1 "),
        (True, f"+{E}.video=2", 1, "(video of limit_mm_per_prompt not planned: verl 0.9.1 passes vLLM videos"),
        # without bounds and a model memplan sizes no verl image of (text only), the limit plans nothing: a line
        (False, "actor_rollout_ref.rollout.limit_images=2", None, "(not planned: memplan sizes a verl run's images"),
    ],
)
def test_what_verls_limit_does_not_plan_is_a_line(tmp_path, pixels, limit, n, said):
    """verl 0.9.1 hands vLLM a row's videos and audios too (vllm_async_server.py:636-642), which memplan does not read
    from a verl run: a limit's video is a line, its image planned; where no image is planned (no bounds, a text
    model: reader_media.own_bounds), the limit is a line."""
    from planner import intake

    path = tmp_path / "run.sh"
    text = VERL if pixels else VERL.split(" +data.")[0].replace("-VL-3B", "-3B") + " "
    path.write_text(text + limit + "\n")
    reading = intake.read([str(path)])
    s = {x.field: x for x in reading.settings}
    assert (s["images"].value if "images" in s else None) == n
    (line,) = [x for x in reading.unplanned if "limit_" in x]
    assert said in line and line.startswith("run.sh:1 ")


@pytest.mark.parametrize(
    ("env", "limit", "videos", "said"),
    [
        ("", '{"image": 2, "audio": 1}', None, "(audio of limit_mm_per_prompt not planned: ms-swift hands vLLM"),
        ("FPS_MAX_FRAMES=16 ", '{"image": 1, "video": 2}', 2, None),
        ("", '{"video": 2}', None, "(video 2) (video frames are not planned: no frame sampling set"),
    ],
)
def test_swifts_vllm_limit_plans_its_videos_and_names_the_rest(tmp_path, env, limit, videos, said):
    """ms-swift 4.6.0's colocated engine takes a row's images, videos and audios (swift/infer_engine/vllm_engine.py:
    468-483): the limit's video is the row's videos where they are planned (frame sampling set), else a line; its
    audio is a line (memplan plans no audio)."""
    from planner import intake

    path = tmp_path / "run.sh"
    path.write_text(f"{env}{SWIFT}--vllm_mode colocate --vllm_limit_mm_per_prompt '{limit}'\n")
    reading = intake.read([str(path)])
    s = {x.field: x for x in reading.settings}
    assert (s["videos"].value if "videos" in s else None) == videos
    if videos:
        assert "(up to 2 videos a row: vLLM refuses more" in s["videos"].source
    lines = [x for x in reading.unplanned if "--vllm_limit_mm_per_prompt" in x]
    assert len(lines) == (said is not None) and all(said in x for x in lines)
