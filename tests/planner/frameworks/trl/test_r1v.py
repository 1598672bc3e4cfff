"""R1-V's GRPO script (planner/frameworks/trl/reader_vlmr1.py, R1_V): one image a row sized within the script's
--max_pixels / --min_pixels or grpo.py's defaults (12,845,056 and 3,136: Deep-Agent/R1-V bbbbe3d
src/r1-v/src/open_r1/grpo.py:43-50), and the whole prompt in the model's forwards: Qwen2VLGRPOTrainer cuts
prompt_ids at max_prompt_length (trainer/grpo_trainer.py:377-379) but generates from the whole processed prompt (:383)
and scores what generate returned, each image's pixels repeated per generation (:400-409). Before, the images were a
line and R1-V#71 (Qwen2.5-VL-7B, no checkpointing, ZeRO-3 on 4 x A100) was planned text-only at 75.0 GiB: DANGEROUS."""

from pathlib import Path

from planner import checkconfig, intake
from planner.model import images
from tests.planner.intake.conftest import DATA

RUN_GRPO = DATA / "scripts" / "R1-V" / "src" / "r1-v" / "run_grpo.sh"
FIELD = Path(__file__).parents[3] / "field" / "r1v-71-qwen25vl7b-grpo-z3-4xa100" / "train.sh"
COMMAND = (
    "cd src/r1-v\n"
    "torchrun --nproc_per_node 4 src/open_r1/grpo.py --model_name_or_path Qwen/Qwen2.5-VL-7B-Instruct "
    "--per_device_train_batch_size 1 --num_generations 4 --max_completion_length 512 --bf16 {flags}\n"
)


def _read(tmp_path: Path, flags: str):
    path = tmp_path / "run.sh"
    path.write_text(COMMAND.format(flags=flags))
    r = intake.read([str(path)])
    return r, {s.field: s for s in r.settings}


def test_r1_vs_image_comes_on_top_of_the_prompt_text(tmp_path):
    r, s = _read(tmp_path, "--max_prompt_length 512 --max_pixels 401408")
    assert s["framework"].value == "trl@r1-v"
    assert (r.request["images"], r.request["min_pixels"], r.request["max_pixels"]) == (1, 3136, 401408)
    tokens = images.worst_case("qwen2-vl", 3136, 401408)[0]
    assert tokens == 401408 // (28 * 28) == 512  # Qwen2.5-VL: one token per 28 x 28 pixels
    assert r.request["workload"]["max_prompt_length"] == 512 + tokens
    assert "grpo_trainer.py:377-409" in s["workload.max_prompt_length"].source
    assert "grpo.py:150-166" in s["images"].source
    assert "grpo.py:47-50" in s["min_pixels"].source
    assert not any("pixel" in line for line in r.unplanned), r.unplanned


def test_without_pixels_or_prompt_length_r1_vs_defaults_size_them(tmp_path):
    """grpo.py's max_pixels default, 12,845,056 (16,384 tokens), and trl 0.14.0's max_prompt_length 512 (R1-V's pin)."""
    r, s = _read(tmp_path, "")
    assert r.request["max_pixels"] == 12845056 and "grpo.py:43-46" in s["max_pixels"].source
    assert r.request["workload"]["max_prompt_length"] == 512 + 16384
    assert "trl v0.14.0 trl/trainer/grpo_config.py:102-103" in s["workload.max_prompt_length"].source


def test_r1_vs_vllm_trainer_keeps_its_images_a_line(tmp_path):
    r, _ = _read(tmp_path, "--use_vllm true --max_pixels 401408")
    assert "images" not in r.request
    assert any("--max_pixels 401408 (the images of R1-V's vLLM trainer" in line for line in r.unplanned), r.unplanned


def test_r1_vs_run_script_and_the_field_run_plan_the_image():
    """R1-V's run_grpo.sh names its model by a placeholder: --model settles it, and the image comes with it. R1-V#71's
    run needs more than its 80 GB card with the tower's 4 x 2,048 patches trained without checkpointing."""
    out = checkconfig.check_config([str(RUN_GRPO)], {"gpu": "h100", "model": "qwen2.5-vl-3b"})
    assert out.images["tokens_per_image"] == 512 and out.plan.workload.max_prompt_length == 1024 + 512
    field = checkconfig.check_config([str(FIELD)], {"gpu": "a100-80gb"})
    assert field.images["tokens_per_image"] == 512 and not field.plan.fits
