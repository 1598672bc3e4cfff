"""VILA / NVILA (planner/model/vila.py) counted against the parts built on the meta device: the language model and the
SigLIP or CLIP tower as transformers builds them from the sub-configs, and the projector as VILA's
multimodal_projector/base_projector.py (NVlabs/VILA b760c34, lines 145-174) builds it, restated here in torch
modules; the totals of NVILA-8B and VILA1.5-3b equal their Hub files' sizes. PEFT with the planned targets adapts
the `llm` module's linears alone."""

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")
from torch import nn

from planner.errors import BadInput
from planner.model.families import from_config
from planner.model.lora_targets import peft_target_modules

# NVILA-8B's config.json, its keys that count (TensorRT-LLM test_modeling_vila.py NVILA_8B_CONFIG, a full copy)
NVILA_8B = json.loads(
    (Path(__file__).parents[3] / "docs" / "examples" / "models" / "NVILA-8B" / "config.json").read_text()
)

# VILA1.5-3b's config.json (TensorRT-LLM tests/unittest/_torch/modeling/test_modeling_vila.py VILA_1_5_3B_CONFIG;
# its vision_tower/config.json has no vision_use_head key: the head is built)
VILA15_3B = {
    "model_type": "llava_llama",
    "hidden_size": 2560,
    "mm_hidden_size": 1152,
    "image_aspect_ratio": "resize",
    "s2": False,
    "s2_scales": "336,672,1008",
    "llm_cfg": {
        "model_type": "llama",
        "hidden_size": 2560,
        "intermediate_size": 6912,
        "num_hidden_layers": 32,
        "num_attention_heads": 20,
        "num_key_value_heads": 20,
        "vocab_size": 32000,
        "tie_word_embeddings": False,
    },
    "vision_tower_cfg": {
        "model_type": "siglip_vision_model",
        "hidden_size": 1152,
        "intermediate_size": 4304,
        "num_hidden_layers": 27,
        "num_attention_heads": 16,
        "image_size": 384,
        "patch_size": 14,
    },
    "mm_projector_cfg": {"model_type": "v2l_projector", "mm_projector_type": "mlp_downsample"},
}
# NVILA-Lite's projector (scripts/NVILA-Lite/sft.sh: mlp_downsample_3x3_fix, no S2) on NVILA-8B's parts
NVILA_LITE = {
    **NVILA_8B,
    "dynamic_s2": False,
    "mm_hidden_size": 1152,
    "mm_projector_cfg": {"mm_projector_type": "mlp_downsample_3x3_fix"},
}
CLIP_MLP2X = {
    **VILA15_3B,
    "mm_hidden_size": 1024,
    "vision_tower_cfg": {
        "model_type": "clip_vision_model",
        "hidden_size": 1024,
        "num_attention_heads": 16,
        "num_hidden_layers": 2,
    },
    "mm_projector_cfg": {"mm_projector_type": "mlp2x_gelu"},
}


def projector(kind: str, m: int, h: int) -> nn.Module:
    """base_projector.py's modules (the DownSample blocks and GELUs have no parameters)."""
    if kind == "mlp2x_gelu":
        return nn.Sequential(nn.Linear(m, h), nn.GELU(), nn.Linear(h, h))
    if kind == "mlp_downsample":
        return nn.Sequential(nn.LayerNorm(4 * m), nn.Linear(4 * m, h), nn.GELU(), nn.Linear(h, h))
    assert kind == "mlp_downsample_3x3_fix"
    return nn.Sequential(
        nn.LayerNorm(9 * m),
        nn.Linear(9 * m, 3 * m),
        nn.GELU(),
        nn.LayerNorm(3 * m),
        nn.Linear(3 * m, h),
        nn.GELU(),
        nn.Linear(h, h),
    )


class Vila(nn.Module):
    """VILA's LlavaLlamaModel as far as its parameters go: llm, vision_tower, mm_projector."""

    def __init__(self, cfg: dict) -> None:
        super().__init__()
        llm, tower = dict(cfg["llm_cfg"]), dict(cfg["vision_tower_cfg"])
        self.llm = transformers.AutoModelForCausalLM.from_config(
            transformers.AutoConfig.for_model(llm.pop("model_type"), **llm)
        )
        tower_cfg = transformers.AutoConfig.for_model(tower.pop("model_type"), **tower)
        cls = (
            transformers.SiglipVisionModel
            if tower_cfg.model_type == "siglip_vision_model"
            else transformers.CLIPVisionModel
        )
        self.vision_tower = cls(tower_cfg)
        self.mm_projector = projector(
            cfg["mm_projector_cfg"]["mm_projector_type"], cfg["mm_hidden_size"], cfg["hidden_size"]
        )


def built(cfg: dict) -> Vila:
    with torch.device("meta"):
        return Vila(cfg)


def numel(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize(
    "cfg",
    [NVILA_8B, VILA15_3B, NVILA_LITE, CLIP_MLP2X],
    ids=["nvila-8b", "vila1.5-3b", "nvila-lite", "clip-mlp2x"],
)
def test_counts_are_the_built_parts(cfg):
    spec, model = from_config(cfg, "vila"), built(cfg)
    roles = spec.params_by_role()
    assert roles["vision"] == numel(model.vision_tower)
    assert roles["projector"] == numel(model.mm_projector)
    assert spec.params == numel(model)


def test_totals_are_the_hubs():
    """NVILA-8B: 827 MB tower, 125 MB projector, 15.2 GB LLM in bf16; VILA1.5-3b: 857 MB tower (with its head)."""
    assert from_config(NVILA_8B, "a").params == 8_088_386_800
    assert from_config(VILA15_3B, "b").params == 3_148_150_336
    assert from_config(VILA15_3B, "b").params_by_role()["vision"] == 428_225_600


def test_patches_per_token_follow_the_projector_and_dynamic_s2():
    """2 x 2 fold: 4; 3 x 3 over 32 x 32 patches: 1024 / 121 rounds up to 9; 27 x 27 patches into 14 x 14: 4;
    NVILA's dynamic S2 over a square image: 14 tiles of 1,024 patches for 2,304 tokens, 6.2 rounded up to 7."""
    ppt = lambda cfg: from_config(cfg, "x").vision.patches_per_token
    assert (ppt(NVILA_8B), ppt(NVILA_LITE), ppt(VILA15_3B)) == (7, 9, 4)


def test_peft_adapts_the_llm_alone():
    cfg = {**VILA15_3B, "llm_cfg": {**VILA15_3B["llm_cfg"], "num_hidden_layers": 2}}
    spec = from_config(cfg, "vila")
    lora = peft.get_peft_model(built(cfg), peft.LoraConfig(r=8, target_modules=peft_target_modules("all-linear", spec)))
    names = {n for n, _ in lora.named_modules() if n.endswith(".lora_A")}
    assert names and all(".llm." in n for n in names)
    assert sum(p.numel() for n, p in lora.named_parameters() if ".lora_" in n) == spec.lora_params(8, "all-linear")


@pytest.mark.parametrize(
    "change, said",
    [
        ({"llm_cfg": "./llm"}, "llm_cfg is './llm'"),
        ({"mm_projector_cfg": {"mm_projector_type": "mlp_downsample_3x3_s2"}}, "mlp_downsample_3x3_s2"),
        ({"vision_tower_cfg": {"model_type": "intern_vit_6b"}}, "intern_vit_6b"),
    ],
)
def test_what_is_not_counted_is_said(change, said):
    with pytest.raises(BadInput, match=said):
        from_config({**VILA15_3B, **change}, "vila")
