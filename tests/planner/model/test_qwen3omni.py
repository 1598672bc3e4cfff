"""Qwen3-Omni-MoE (planner/model/qwen3omni.py): its thinker counted whole, its audio tower frozen with the vision tower
and idle in rows without audio (a whole config with its talker resident: tests/planner/model/test_qwenomni.py). The count equals transformers'
Qwen3OmniMoeThinkerForConditionalGeneration on the meta device (tests/planner/model/test_catalog.py: 31,719,205,488
for qwen3-omni-30b-a3b, from the checkpoint's config.json as transformers 5.7 loaded it: the library's file
62494955826), and its activations the sim's (tests/probes/test_family_accuracy.py: +0.05%, -0.09%, -0.02%)."""

from planner.config.spec import Knobs
from planner.estimate.setup import Setup
from planner.estimate.trained import frozen_params, trainable_params
from planner.model import catalog
from planner.model.modelspec import frozen_roles


def test_the_towers_are_the_technical_reports():
    """Qwen3-Omni's technical report (Table 1): audio encoder 650 M, vision encoder 540 M (SigLIP2-So400M), a
    30B-A3B thinker; the checkpoint's 15 shards hold 35,259,818,545 parameters with the talker and code2wav."""
    m = catalog.load_model("qwen3-omni-30b-a3b")
    roles = m.params_by_role()
    proj = 1280 * 1280 + 1280 + 2048 * 1280 + 2048  # audio_tower.proj1, proj2: projectors
    assert roles["audio"] + proj == 647_927_168 and round((roles["audio"] + proj) / 1e7) == 65
    assert round((roles["vision"] + roles["projector"] - proj) / 1e7) == 54
    assert m.text.moe.experts == 128 and m.text.moe.top_k == 8 and m.text.moe.moe_layers == 48
    assert m.params == 31_719_205_488 and 35_259_818_545 - m.params == 3_540_613_057  # the talker and code2wav


def test_the_audio_tower_freezes_with_the_vision_tower_and_its_projections_train():
    m = catalog.load_model("qwen3-omni-30b-a3b")
    assert "audio" in frozen_roles("vision")
    assert m.vision.frozen("model.audio_tower.layers.0.fc1.weight", "vision")
    assert m.vision.frozen("model.visual.blocks.0.attn.qkv.weight", "vision")
    for name in ("model.audio_tower.proj2.weight", "model.visual.merger_list.0.mlp.0.weight"):
        assert not m.vision.frozen(name, "vision")  # LLaMA-Factory's projector keys (model_utils/visual.py:409-418)
    one = Setup(m, Knobs(precision="bf16-pure"), 1, 1, 2048, image_tokens=64)
    audio = m.params_by_role()["audio"]
    assert trainable_params(one) == m.params - audio and frozen_params(one) == audio
