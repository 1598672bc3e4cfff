"""Run under an older release line's venv (.fwenv-old/swift-*: the transformers ms-swift 3.x pins) by
test_frozen_tower_hook.py: for each VLM family's vision tower class, whether ms-swift's call takes
(`vision_tower.enable_input_require_grads()` inside `try: ... except NotImplementedError: pass`, v2.5.2
swift/llm/sft.py:262-272, v3.0.0 swift/llm/train/sft.py:46-51, v3.12.6 swift/trainers/mixin.py:839-846), and, for a
tower that takes it and one that does not, a frozen checkpointed forward's saved bytes after that call. Prints JSON."""

import importlib
import json

import torch
import transformers

SMALL = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2}
ROTARY = {"hidden_size": 32, "out_hidden_size": 32, "intermediate_size": 64, "depth": 2, "num_heads": 2}
# memplan model_type: (module, config class, tower class, config), the class transformers builds as the tower
CASES = {
    "qwen2_vl": (
        "qwen2_vl",
        "Qwen2VLVisionConfig",
        "Qwen2VisionTransformerPretrainedModel",
        {"embed_dim": 32, "hidden_size": 32, "depth": 2, "num_heads": 2},
    ),
    "qwen2_5_vl": ("qwen2_5_vl", "Qwen2_5_VLVisionConfig", "Qwen2_5_VisionTransformerPretrainedModel", ROTARY),
    "qwen3_vl": ("qwen3_vl", "Qwen3VLVisionConfig", "Qwen3VLVisionModel", {**ROTARY, "deepstack_visual_indexes": []}),
    "glm4v": ("glm4v", "Glm4vVisionConfig", "Glm4vVisionModel", ROTARY),
    "qwen2_5_omni_thinker": ("qwen2_5_omni", "Qwen2_5OmniVisionEncoderConfig", "Qwen2_5OmniVisionEncoder", ROTARY),
    "qwen3_omni_moe_thinker": (
        "qwen3_omni_moe",
        "Qwen3OmniMoeVisionEncoderConfig",
        "Qwen3OmniMoeVisionEncoder",
        {**ROTARY, "deepstack_visual_indexes": []},
    ),
    "llava": ("clip", "CLIPVisionConfig", "CLIPVisionModel", SMALL),
    "gemma3": ("siglip", "SiglipVisionConfig", "SiglipVisionModel", SMALL),
    "idefics3": ("idefics3", "Idefics3VisionConfig", "Idefics3VisionTransformer", SMALL),
    "internvl": ("internvl", "InternVLVisionConfig", "InternVLVisionModel", SMALL),
    "mllama": (
        "mllama",
        "MllamaVisionConfig",
        "MllamaVisionModel",
        {
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_global_layers": 1,
            "attention_heads": 2,
            "vision_output_dim": 96,
            "intermediate_layers_indices": [0],
        },
    ),
    "llama4": (
        "llama4",
        "Llama4VisionConfig",
        "Llama4VisionModel",
        {**SMALL, "vision_output_dim": 32, "projector_input_dim": 32, "projector_output_dim": 32},
    ),
}


def build(module: str, config: str, tower: str, kw: dict):
    """The tower at this transformers, or None where the class is not in it yet."""
    try:
        mod = importlib.import_module(f"transformers.models.{module}.modeling_{module}")
        cfg = getattr(importlib.import_module(f"transformers.models.{module}.configuration_{module}"), config)
        return getattr(mod, tower)._from_config(cfg(**kw))
    except (ImportError, AttributeError):
        return None


def swift_hook(tower) -> bool:
    """ms-swift's call: whether the hook was registered (NotImplementedError: passed over)."""
    if not hasattr(tower, "enable_input_require_grads"):
        return False
    try:
        tower.enable_input_require_grads()
    except NotImplementedError:
        return False
    return True


def saved_bytes(tower, call) -> tuple[bool, int]:
    """(the output requires a gradient, the bytes of the distinct storages autograd saved) of a frozen,
    checkpointed forward in bf16."""
    tower.to(torch.bfloat16).train().requires_grad_(False)
    tower.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    hooked = swift_hook(tower)
    seen = {}

    def pack(t):
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = call(tower)
    return hooked, out.requires_grad, sum(seen.values())


def mllama_saved(checkpointed: bool) -> dict:
    """A frozen Mllama tower (2 local layers and 1 global, 32 wide, 2 heads, MLP 64) after ms-swift's call, its
    checkpointing on where `checkpointed`, over one image of 4 tiles of 56 x 56 (4 x (16 patches + the class token,
    padded to 24) = 96 tokens): the bytes of the storages autograd saved that are not parameters."""
    kw = {**CASES["mllama"][3], "image_size": 56, "patch_size": 14, "max_num_tiles": 4}
    tower = build("mllama", "MllamaVisionConfig", "MllamaVisionModel", kw).to(torch.bfloat16).train()
    tower.requires_grad_(False)
    if checkpointed:
        tower.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    hooked = swift_hook(tower)
    params = {q.untyped_storage().data_ptr() for q in tower.parameters()}
    seen = {}

    def pack(t):
        if t.untyped_storage().data_ptr() not in params:
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    pixels = torch.randn(1, 1, 4, 3, 56, 56, dtype=torch.bfloat16)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = tower(pixel_values=pixels, aspect_ratio_ids=torch.tensor([[6]]), aspect_ratio_mask=torch.ones(1, 1, 4))
    recorded = out[0].requires_grad
    return {"hooked": hooked, "recorded": recorded, "saved": sum(seen.values()), "patches": 96, "tiles": 4}


def forwards() -> dict:
    """A tower that takes the hook (CLIP's, LLaVA's) and one that does not (Qwen2-VL's), each frozen, checkpointed,
    after ms-swift's call: `layers` blocks 32 wide over `patches` patches."""
    torch.manual_seed(0)
    torch.set_num_threads(1)
    out = {}
    qwen = build(*CASES["qwen2_vl"])
    grid = torch.tensor([[1, 8, 8]])  # 64 patches of 3 x 2 x 14 x 14
    pixels = torch.randn(64, 3 * 2 * 14 * 14, dtype=torch.bfloat16)
    hooked, recorded, saved = saved_bytes(qwen, lambda t: t(pixels, grid_thw=grid))
    out["qwen2_vl"] = {"hooked": hooked, "recorded": recorded, "saved": saved, "patches": 64, "layers": 2}
    clip = build(*CASES["llava"][:3], {**SMALL, "num_hidden_layers": 4, "image_size": 112, "patch_size": 14})
    images = torch.randn(2, 3, 112, 112, dtype=torch.bfloat16)  # 2 x (64 patches + the CLS)
    hooked, recorded, saved = saved_bytes(clip, lambda t: t(pixel_values=images).last_hidden_state)
    out["llava"] = {"hooked": hooked, "recorded": recorded, "saved": saved, "patches": 130, "layers": 4}
    out["mllama"] = {"checkpointed": mllama_saved(True), "plain": mllama_saved(False)}
    return out


def main() -> None:
    hooks = {}
    for family, case in CASES.items():
        tower = build(*case)
        hooks[family] = None if tower is None else swift_hook(tower)
    print(json.dumps({"transformers": transformers.__version__, "hooks": hooks, "forwards": forwards()}))


if __name__ == "__main__":
    main()
