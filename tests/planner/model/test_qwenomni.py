"""Qwen2.5-Omni (planner/model/qwenomni.py): its thinker counted whole, what each framework keeps of the checkpoint,
and its audio tower frozen with the vision tower and idle in rows without audio. The thinker's count equals
transformers' Qwen2_5OmniThinkerForConditionalGeneration on the meta device (tests/planner/model/test_catalog.py:
8,931,813,888 for qwen2.5-omni-7b), and its activations the sim's (tests/probes/test_family_accuracy.py: +0.26%,
-0.06%, +0.40%; +5.9%, +3.1%, +6.4% before the idle audio tower's gradient and AdamW states were left out)."""

import pytest

from planner.config.spec import Knobs
from planner.errors import BadInput
from planner.estimate.setup import Setup
from planner.estimate.trained import frozen_params, trainable_params
from planner.model import catalog
from planner.model.families import from_config
from planner.model.modelspec import frozen_roles

THINKER = catalog.model_config("qwen2.5-omni-7b")
# each whole Omni's model_type and its thinker's catalog model (Qwen3-Omni's: planner/model/qwen3omni.py)
WHOLE = [("qwen2_5_omni", "qwen2.5-omni-7b"), ("qwen3_omni_moe", "qwen3-omni-30b-a3b")]


@pytest.mark.parametrize("whole,name", WHOLE)
def test_the_whole_omni_without_its_talker_is_its_thinker(whole, name):
    cfg = {"model_type": whole, "enable_audio_output": False, "thinker_config": catalog.model_config(name)}
    assert from_config(cfg, "m").params == catalog.load_model(name).params
    assert catalog.load_model("qwen2.5-omni-7b").params == 8_931_813_888


@pytest.mark.parametrize("whole,name", WHOLE)
@pytest.mark.parametrize("flag", [{"enable_audio_output": True}, {}])  # the config classes' default is true
def test_a_whole_omni_with_its_talker_but_not_its_talker_config_is_refused_in_one_line(flag, whole, name):
    """Without its talker_config transformers would build the class defaults (a 3584-wide talker, no checkpoint's):
    refused; with it the talker is counted (tests/planner/model/test_omnitalker.py)."""
    with pytest.raises(BadInput) as e:
        from_config({"model_type": whole, "thinker_config": catalog.model_config(name), **flag}, "m")
    assert "talker_config" in str(e.value) and "ENABLE_AUDIO_OUTPUT=0" in str(e.value) and "\n" not in str(e.value)


def test_the_audio_tower_freezes_with_the_vision_tower():
    m = catalog.load_model("qwen2.5-omni-7b")
    roles = m.params_by_role()
    assert roles["audio"] == 635_056_128  # the tower without proj (4,591,104 with proj: 639,647,232 in transformers)
    assert "audio" in frozen_roles("vision") and "audio" in frozen_roles("vision+projector")
    assert m.vision.frozen("model.audio_tower.layers.0.fc1.weight", "vision")
    assert not m.vision.frozen("model.audio_tower.proj.weight", "vision")  # trained as a projector by both frameworks


def test_the_audio_tower_takes_no_gradient_on_one_gpu_and_states_under_zero3():
    m = catalog.load_model("qwen2.5-omni-7b")
    one = Setup(m, Knobs(precision="bf16-pure"), 1, 1, 2048, image_tokens=64)
    zero3 = Setup(m, Knobs(precision="bf16", zero_stage=3), 1, 1, 2048, gpus_per_node=8, image_tokens=64)
    audio = m.params_by_role()["audio"]
    assert trainable_params(one) == m.params - audio and frozen_params(one) == audio
    assert trainable_params(zero3) == m.params  # DeepSpeed allocates every parameter's states up front


def test_the_3b_thinker_is_its_checkpoints_parts():
    """Qwen2.5-Omni-3B's thinker as a user's ms-swift audit tallied its checkpoint (thinker.audio_tower 638 M,
    thinker.visual 669 M, thinker.model 3.09 B, thinker.lm_head 311 M; the library's file 56381265733, the
    Qwen2.5-Omni-3B config.json's enable_audio_output true): rounded as the audit rounds them."""
    m = catalog.load_model("qwen2.5-omni-3b")
    roles = m.params_by_role()
    audio = roles["audio"] + 2048 * 1280 + 2048  # audio_tower.proj, counted as a projector
    visual = roles["vision"] + roles["projector"] - (2048 * 1280 + 2048)
    assert (round(audio / 1e6), round(visual / 1e6), roles["head"]) == (638, 669, 151_936 * 2048)
    assert round((roles["embed"] + roles["layer"] + roles["norm"]) / 1e7) == 309
    assert m.params == 4_703_464_448  # transformers' meta build (tests/planner/model/test_catalog.py)
