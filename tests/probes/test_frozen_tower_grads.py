"""A frozen vision tower whose input is made to require a gradient (ms-swift v2.5.0-v2.6.1 swift/llm/sft.py:262-272
calls `vision_tower.enable_input_require_grads()` under --gradient_checkpointing, whatever the tower's freezing):
measured on a real CPU forward of transformers' Idefics2 vision transformer (the navit SigLIP MiniCPM-V 2.6's
modeling_navit_siglip.py copies, tests/planner/model/test_minicpmv.py), frozen, with HF's gradient checkpointing on.
Without the hook the tower records no graph and saves nothing; with it the graph is recorded and the tower keeps its
checkpointed blocks' inputs, each block's exactly (planner.estimate.vision.frozen_tower_checkpoint_bytes counts
these; the post-layernorm's own input and statistics beside them are left out, under 1/layers of the term)."""

import pytest

torch = pytest.importorskip("torch")
idefics2 = pytest.importorskip("transformers.models.idefics2.modeling_idefics2")
from transformers import Idefics2VisionConfig

from planner.estimate.vision import frozen_tower_checkpoint_bytes
from planner.model.modelspec import VisionSpec

LAYERS, HIDDEN, SIDE, PATCH, SLICES = 4, 64, 224, 14, 3


pytestmark = pytest.mark.usefixtures("one_thread")  # one torch thread (tests/probes/conftest.py)


def _saved_storage_bytes(tower, pixels, hook: bool) -> tuple[bool, int]:
    """(whether the output requires a gradient, the bytes of the distinct storages autograd saved)."""
    if hook:
        tower.enable_input_require_grads()
    seen = {}

    def pack(t):
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = tower(pixel_values=pixels).last_hidden_state
    if hook:
        tower.disable_input_require_grads()
    return out.requires_grad, sum(seen.values())


def test_the_input_hook_makes_a_frozen_checkpointed_tower_keep_each_blocks_input():
    cfg = Idefics2VisionConfig(
        hidden_size=HIDDEN,
        intermediate_size=4 * HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=4,
        image_size=SIDE,
        patch_size=PATCH,
    )
    tower = idefics2.Idefics2VisionTransformer(cfg).to(torch.bfloat16).train()
    tower.requires_grad_(False)
    tower.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    # transformers 5's checkpointing switch hooks the input itself where main_input_name is input_ids (this class's
    # default; modeling_utils.py PreTrainedModel._activation_checkpointing_enable): start from no hook, as MiniCPM's
    # SiglipVisionTransformer (main_input_name pixel_values) and transformers 4.x's switch leave it
    tower.disable_input_require_grads()
    pixels = torch.randn(SLICES, 3, SIDE, SIDE, dtype=torch.bfloat16)
    assert _saved_storage_bytes(tower, pixels, hook=False) == (False, 0)
    recorded, saved = _saved_storage_bytes(tower, pixels, hook=True)
    patches = SLICES * (SIDE // PATCH) ** 2
    v = VisionSpec(LAYERS, HIDDEN, 4 * HIDDEN, 4, False, 1)
    term = frozen_tower_checkpoint_bytes(v, patches, "half")
    assert recorded and term == LAYERS * patches * HIDDEN * 2
    assert term <= saved <= term * (1 + 1 / LAYERS) + 4096  # the post-layernorm's input and stats, the weights' views
