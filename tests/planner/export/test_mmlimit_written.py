"""vLLM's limit_mm_per_prompt written (planner.frameworks.mmlimit): a GRPO plan whose rows hold more than one image
or video writes the colocated rollout's limit, ms-swift 4.6.0's --vllm_limit_mm_per_prompt (writer_media.vllm_limit;
verl's +actor_rollout_ref.rollout.limit_images: test_rl_exports), and the script reads back as the same rows; without
it, a row of one image (vLLM refuses the second)."""

import json

import pytest

from planner import advise, intake
from planner.frameworks.swift import writer as swift
from tests.planner.export.test_frameworks_export import swift_flags, written

VLM_GRPO = {
    "model": "qwen2.5-vl-3b",
    "gpu": "h100",
    "gpus_per_node": 4,
    "micro_batch": 2,
    "grad_accum": 2,
    "max_pixels": 401408,  # 512 tokens an image
    "workload": {
        "kind": "grpo",
        "num_generations": 4,
        "max_prompt_length": 5120,
        "max_completion_length": 512,
        "generation": "vllm-colocate",
    },
}
VIDEO = {"max_frames": 16, "fps": 1.0, "video_max_pixels": 200704}  # 16 frames, 2,048 tokens a video


@pytest.mark.parametrize(
    ("media", "limit"),
    [
        ({"images": 1}, None),
        ({"images": 2}, {"image": 2}),
        ({"images": 1, "videos": 2, **VIDEO}, {"video": 2}),
    ],
)
def test_swift_writes_the_colocated_vllms_limit_and_reads_it_back(tmp_path, media, limit):
    """Two images a row of 512 tokens: '{"image": 2}', read back as 1,024 image tokens (unwritten: 512); two videos
    of 16 frames: '{"video": 2}', read back as two videos. One a row writes no limit."""
    w = written("swift", "vlm_grpo", tmp_path, {**VLM_GRPO, **media})
    _, _, flags = swift_flags((w.dir / swift.SCRIPT_NAME).read_text())
    written_limit = flags.get("vllm_limit_mm_per_prompt")
    assert (json.loads(written_limit) if written_limit else None) == limit
    back = intake.read([str(w.dir / swift.SCRIPT_NAME)]).request
    assert back.get("videos") == media.get("videos")
    checked = advise.check(advise.parse(advise.CheckRequest, {**back, "gpu": "h100"}))
    assert (
        checked.context[2].image_tokens
        == w.goal.image_tokens
        == 512 * media["images"] + 2048 * (media.get("videos") or 0)
    )


@pytest.mark.parametrize(
    ("framework", "generation", "said"),
    [("swift", "vllm-server", True), ("swift", "vllm-colocate", False), ("swift@3.4", "vllm-server", False)],
)
def test_a_rollout_whose_limit_is_not_written_is_a_line(tmp_path, framework, generation, said):
    """A rollout server takes its own --vllm_limit_mm_per_prompt (`swift rollout`), which the trainer's script does
    not start: two images a row are said in the plan's note, with the limit to set. 3.4.x's trainer builds its engine
    on a GPU of its own with the flag (v3.4.1 grpo_trainer.py:499): written, and read back as 1,024 image tokens
    (3.4.1's parser takes the script: swift_old_validate.py, by hand)."""
    workload = {**VLM_GRPO["workload"], "generation": generation}
    w = written(framework, "server", tmp_path, {**VLM_GRPO, "images": 2, "workload": workload})
    note = w.plan.launch.note or ""
    head = "rows of up to 2 images are planned: the files here give the vllm-server rollout no limit_mm_per_prompt"
    assert (head in note and 'set {"image": 2} where the engine starts' in note) == said
    back = intake.read([str(w.dir / swift.SCRIPT_NAME)]).request
    assert back["image_tokens"] == (512 if said else 1024)
