"""--frozen (a VLM's vision tower, its projector or its language model frozen in full fine-tuning; issue 29's knob
acceptance, issue 33 item 3): the
planner's trainable and frozen counts against the real transformers model the one builder (recipe/model.py) makes
for the probes and the trainer, and the frozen modules' bytes in the model's dtype."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
from planner.config.spec import Knobs
from planner.estimate.setup import Setup
from planner.estimate.state_terms import params_bytes
from planner.estimate.trained import frozen_params, frozen_weight_bytes_per_param, trainable_params
from planner.model import catalog
from planner.model.families import from_config
from recipe.model import build_model


def _vlm(name: str) -> dict:
    cfg = catalog.model_config(name)
    if "text_config" in cfg:
        return {**cfg, "text_config": {**cfg["text_config"], "num_hidden_layers": 2}}
    return {**cfg, "num_hidden_layers": 2}


@pytest.mark.parametrize("frozen", ["none", "vision", "vision+projector", "language", "language+vision"])
@pytest.mark.parametrize(
    "name",
    ["qwen2.5-vl-3b", "internvl2.5-8b", "llava-1.5-7b", "llava-v1.6-mistral-7b", "gemma-3-4b", "smolvlm-instruct"]
    + ["qwen3-vl-8b"],
)
def test_the_planners_frozen_split_is_the_real_models(name, frozen):
    cfg = _vlm(name)
    knobs = Knobs(precision="bf16", frozen=frozen)  # torch AMP: the whole model in fp32, frozen modules too
    # with images (text-only rows on one GPU leave the tower idle: memory.frozen_modules)
    s = Setup(from_config(cfg, name), knobs, 1, 1, 64, image_tokens=16)
    with torch.device("meta"):
        model = build_model(cfg, knobs)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    frozen_n = sum(p.numel() for p in model.parameters() if not p.requires_grad)
    assert (trainable, frozen_n) == (trainable_params(s), frozen_params(s))
    held = sum(p.numel() * p.element_size() for p in model.parameters())
    assert held == params_bytes(s) and frozen_weight_bytes_per_param(knobs) == 4
    if frozen.startswith("vision"):
        assert frozen_n > 0 and all(
            "language_model" not in n for n, p in model.named_parameters() if not p.requires_grad
        )
    if frozen.startswith("language"):  # every decoder and head parameter frozen; the projector trained
        text = [p for n, p in model.named_parameters() if "language_model" in n or n.startswith("lm_head")]
        assert text and not any(p.requires_grad for p in text) and trainable > 0


def test_frozen_needs_a_vision_tower_and_full_fine_tuning():
    from planner import advise
    from planner.errors import BadInput

    base = {"model": "llama-3.2-1b", "gpu": "h100", "micro_batch": 1, "seq_len": 256, "frozen": "vision"}
    with pytest.raises(BadInput, match="has no vision tower"):
        advise.check(advise.parse(advise.CheckRequest, base))
    with pytest.raises(BadInput, match="already freezes every base weight"):
        advise.check(advise.parse(advise.CheckRequest, {**base, "model": "qwen2.5-vl-3b", "lora_rank": 16}))


@pytest.mark.parametrize("name", ["qwen2.5-vl-3b", "gemma-3-4b", "llama-3.2-11b-vision"])
def test_lora_vision_trains_the_adapters_the_real_model_gets(name):
    """--lora-vision: the one builder's PEFT model (recipe/model.py, all-linear over the whole model) trains exactly
    the adapters the plan counts, the tower's and projector's among them, and the tower then saves activations."""
    from planner.estimate.activation_terms import activations_bytes

    cfg = _vlm(name)
    knobs = Knobs(precision="bf16", lora_rank=8, lora_vision=True)
    spec = from_config(cfg, name)
    s = Setup(spec, knobs, 1, 1, 64, image_tokens=16)
    with torch.device("meta"):
        model = build_model(cfg, knobs)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert trainable == trainable_params(s) > spec.lora_params(8)
    without = Setup(spec, Knobs(precision="bf16", lora_rank=8), 1, 1, 64, image_tokens=16)
    assert activations_bytes(s) > activations_bytes(without)


def test_lora_vision_needs_a_vision_tower():
    from planner import advise
    from planner.errors import BadInput

    base = {
        "model": "llama-3.2-1b",
        "gpu": "h100",
        "micro_batch": 1,
        "seq_len": 256,
        "lora_rank": 8,
        "lora_vision": True,
    }
    with pytest.raises(BadInput, match="--lora-vision: model 'llama-3.2-1b' has no vision tower"):
        advise.check(advise.parse(advise.CheckRequest, base))


def test_vit_checkpointing_off_leaves_the_towers_layers_unwrapped_and_saves_more():
    """--vit-checkpointing off (ms-swift's --vit_gradient_checkpointing false): the one builder checkpoints the
    decoder's layers and not the tower's, and the plan's tower saves every activation."""
    from transformers.modeling_layers import GradientCheckpointingLayer

    from planner.estimate.activation_terms import activations_bytes

    cfg = _vlm("qwen2.5-vl-3b")
    spec = from_config(cfg, "qwen2.5-vl-3b")
    knobs = Knobs(precision="bf16", checkpointing="full", vit_checkpointing="off")
    with torch.device("meta"):
        model = build_model(cfg, knobs)
    wrapped = {
        n.split(".")[1]
        for n, m in model.named_modules()
        if isinstance(m, GradientCheckpointingLayer) and m.gradient_checkpointing
    }
    bare = {
        n.split(".")[1]
        for n, m in model.named_modules()
        if isinstance(m, GradientCheckpointingLayer) and not m.gradient_checkpointing
    }
    assert (wrapped, bare) == ({"language_model"}, {"visual"})
    on = Setup(spec, Knobs(precision="bf16", checkpointing="full"), 1, 1, 2048, image_tokens=1024)
    off = Setup(spec, knobs, 1, 1, 2048, image_tokens=1024)
    assert activations_bytes(off) > activations_bytes(on)
