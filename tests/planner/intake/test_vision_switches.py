"""A VLM's freeze switches as each framework runs them (issue 47 item 9's fixes): LLaMA-Factory's and ms-swift's LoRA
reach the tower when its switch is off, VLM-R1 freezes the tower and merger in full fine-tuning and never puts LoRA
on them, and a switch given for a model not known here is one line, not dropped."""

from pathlib import Path

from planner import intake

LF = "model_name_or_path: Qwen/Qwen2.5-VL-7B-Instruct\nstage: sft\nfinetuning_type: lora\nlora_target: all\n"
SWIFT = "swift sft --model Qwen/Qwen2.5-VL-7B-Instruct --tuner_type lora --target_modules all-linear --max_length 512"


def _read(tmp_path: Path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return intake.read([str(path)])


def _setting(reading, field: str):
    return next(s for s in reading.settings if s.field == field)


def test_llamafactory_lora_with_the_tower_unfrozen_adapts_it(tmp_path):
    """src/llamafactory/model/model_utils/visual.py:196-211: the targets keep the tower's modules unless frozen."""
    on = _read(tmp_path, "a.yaml", LF + "freeze_vision_tower: false\ncutoff_len: 512\n")
    assert on.request["lora_vision"] is True
    assert _setting(on, "lora_vision").source.startswith("a.yaml: freeze_vision_tower: False (LoRA's targets")
    off = _read(tmp_path, "b.yaml", LF + "freeze_vision_tower: true\ncutoff_len: 512\n")
    assert off.request["lora_vision"] is False
    assert "lora_vision" not in _read(tmp_path, "c.yaml", LF + "cutoff_len: 512\n").request  # LF's default: frozen


def test_swift_lora_with_the_vit_unfrozen_adapts_it(tmp_path):
    """swift/pipelines/train/tuner.py:92-104: all-linear on a multimodal model follows freeze_vit."""
    assert _read(tmp_path, "a.sh", SWIFT + " --freeze_vit false\n").request["lora_vision"] is True
    assert _read(tmp_path, "b.sh", SWIFT + " --freeze_vit true\n").request["lora_vision"] is False


def test_vlm_r1_freezes_the_tower_and_merger_in_full_fine_tuning(tmp_path):
    text = (
        "torchrun --nproc_per_node 2 src/open-r1-multimodal/src/open_r1/grpo_jsonl.py --model_name_or_path "
        "Qwen/Qwen2.5-VL-3B-Instruct --num_generations 2 --per_device_train_batch_size 2 --freeze_vision_modules true\n"
    )
    reading = _read(tmp_path, "run.sh", text)
    assert reading.request["frozen"] == "vision+projector"
    assert "--freeze_vision_modules true (the tower and its merger)" in _setting(reading, "frozen").source


def test_vision_switches_for_a_model_not_known_here_are_one_line(tmp_path):
    text = "model_name_or_path: /data/my-vlm\nstage: sft\nfinetuning_type: full\nfreeze_vision_tower: false\n"
    reading = _read(tmp_path, "a.yaml", text + "image_max_pixels: 262144\ncutoff_len: 512\n")
    lines = [line for line in reading.unplanned if "a VLM's settings" in line]
    said = (
        "a.yaml: freeze_vision_tower: False; a.yaml: image_max_pixels: 262144 (a VLM's settings, for a model not known "
        "here: not planned; pass --model with the model's id or its config.json)"
    )
    assert lines == [said]
