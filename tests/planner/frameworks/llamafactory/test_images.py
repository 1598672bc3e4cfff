"""LLaMA-Factory's images as its 0.9.5 reader plans them (planner/frameworks/llamafactory/reader.py): image_max_pixels is a
bound, not a count, where it is over cutoff_len (the tower runs on the image's patches, the text is cut after:
data/processor/supervised.py:62, 73-78), and freeze_vision_tower false beside LoRA puts adapters on the tower
(model/model_utils/misc.py:40-41)."""

from planner import checkconfig, intake

YAML = """model_name_or_path: Qwen/Qwen2.5-VL-3B-Instruct
stage: sft
finetuning_type: lora
lora_target: all
cutoff_len: {cutoff}
image_max_pixels: {pixels}
per_device_train_batch_size: 1
{extra}
"""


def _write(tmp_path, cutoff=2048, pixels=262144, extra=""):
    path = tmp_path / "train.yaml"
    path.write_text(YAML.format(cutoff=cutoff, pixels=pixels, extra=extra))
    return path


def test_a_pixel_cap_under_the_cutoff_is_the_images_tokens(tmp_path):
    r = intake.read([str(_write(tmp_path))])
    assert r.request["image_tokens"] == 262144 // 784 and "images" not in r.request


def test_a_pixel_cap_over_the_cutoff_is_a_bound_and_the_tower_runs_on_its_patches(tmp_path):
    path = _write(tmp_path, cutoff=24576, pixels=67108864, extra="image_min_pixels: 1024")
    r = intake.read([str(path)])
    assert r.request["images"] == 1 and r.request["max_pixels"] == 67108864 and r.request["min_pixels"] == 1024
    assert "image_tokens" not in r.request
    out = checkconfig.check_config([str(path)], {"gpu": "h100-80gb"})
    goal = out.context[2]
    assert goal.seq_len == 24576 and goal.image_tokens == 24576 and goal.tower_tokens > 80000


def test_an_unfrozen_tower_beside_lora_takes_adapters(tmp_path):
    r = intake.read([str(_write(tmp_path, extra="freeze_vision_tower: false"))])
    s = {x.field: x for x in r.settings}
    assert r.request["lora_vision"] is True and "misc.py:40-41" in s["lora_vision"].source
    assert "lora_vision" not in intake.read([str(_write(tmp_path))]).request
    frozen = intake.read([str(_write(tmp_path, extra="freeze_vision_tower: false\nlora_target: q_proj,v_proj"))])
    assert "lora_vision" not in frozen.request
