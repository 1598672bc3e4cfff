"""MiniCPM-V 2.6 (openbmb/MiniCPM-V-2_6 and its bitsandbytes build -int4; config.json model_type `minicpmv`, class
MiniCPMV): a model only its repository's own code builds (trust_remote_code; transformers has no class for it), read
here in that code's module names. The Hub's modeling_minicpmv.py, resampler.py and modeling_navit_siglip.py (as
vLLM restates them: vllm/model_executor/models/minicpmv.py, BaseResampler / Resampler2_5 and MiniCPMV2_6, commit
004202b) build three parts:

- `vpm`, the tower: SigLIP-400M as Idefics2's vision transformer (patch convolution with bias, learned positions over
  (image_size / patch_size)^2 = 70^2 patches, 27 encoder layers, post-layernorm, no pooling head); a slice goes
  through it whole (its own attention call of (448 / 14)^2 = 1,024 patches); drop_vision_last_layer false in 2.6;
- `resampler`, the projector: one cross-attention of query_num learned queries over a slice's patches: query
  (query_num x h), kv_proj Linear(tower width, h, no bias), an nn.MultiheadAttention(h, h // 128) (in_proj_weight
  3h x h and its bias, out_proj Linear with bias), ln_q, ln_kv, ln_post LayerNorms and proj (h x h, a bare
  parameter); its 2-D sin-cos positions are a buffer, not a parameter;
- `llm`, Qwen2ForCausalLM from the top-level keys (config.json is a Qwen2Config with the vision keys beside).

Each slice becomes query_num LLM tokens whatever its patches (1,024 patches a 448-pixel slice: 16 patches a token);
image_rules.minicpmv_image_tokens counts an image's slices.
"""

from __future__ import annotations

from planner.model import vlm
from planner.model.shapes import FSDP_UNITS, Tensors
from planner.model.shapes import linear as _linear

MODEL_TYPES = ("minicpmv",)
TOWER, PROJECTOR = ("vpm.",), ("resampler.",)
TEXT_MODULE = dict.fromkeys(MODEL_TYPES, "llm")
# MiniCPMVConfig's vision default (configuration_minicpm.py: SigLIP-400M as 2.6 ships it) and slice side
VISION = {
    "hidden_size": 1152,
    "image_size": 980,
    "intermediate_size": 4304,
    "num_attention_heads": 16,
    "num_hidden_layers": 27,
    "patch_size": 14,
}
SLICE_SIDE = 448  # scale_resolution: each slice (and the thumbnail) is resized to about 448 x 448
# the Idefics2 layer FSDP wraps in the tower (modeling_navit_siglip.py's SiglipEncoderLayer)
TOWER_UNITS = ("SiglipEncoderLayer",)


def resampler_tensors(queries: int, h: int, kv: int) -> list[Tensors]:
    """resampler.py's Resampler(num_queries, embed_dim h, num_heads h // 128, kv_dim kv, adaptive): query, kv_proj
    (no bias; Identity when kv == h), the MultiheadAttention's in-projection (bare parameters) and out_proj, three
    LayerNorms, proj."""
    out = [Tensors("projector", (queries, h))]
    if kv != h:
        out += _linear("projector", h, kv, 1, False)
    out += [Tensors("projector", (3 * h, h)), Tensors("projector", (3 * h,))] + _linear("projector", h, h, 1, True)
    return out + [Tensors("projector", (h,), 6), Tensors("projector", (h, h))]


def slice_patches(v: dict) -> int:
    """The tower's patches in one slice: (SLICE_SIDE / patch_size)^2 = 1,024."""
    return (SLICE_SIDE // vlm.side(v["patch_size"])) ** 2


def read(cfg: dict, vision_spec) -> tuple[dict, object, list[Tensors], tuple[str, ...]]:
    """(the language model's config for decoders' llama reader, its VisionSpec, the tower's and resampler's tensors,
    the FSDP units), as planner.model.vlm.read gives them."""
    v = {**VISION, **(cfg.get("vision_config") or {})}
    v["image_size"], v["patch_size"] = vlm.side(v["image_size"]), vlm.side(v["patch_size"])
    if cfg.get("drop_vision_last_layer"):
        v["num_hidden_layers"] -= 1  # model.encoder.layers = model.encoder.layers[:-1]
    text = {k: x for k, x in cfg.items() if k not in ("vision_config", "slice_config", "quantization_config")}
    text["model_type"] = "qwen2"
    h, queries = text["hidden_size"], int(cfg.get("query_num", 64))
    tower = vlm.siglip_tower(v, head=False)
    patches = slice_patches(v)
    spec = vision_spec(
        v["num_hidden_layers"],
        v["hidden_size"],
        v["intermediate_size"],
        v["num_attention_heads"],
        False,
        -(-patches // queries),
        TOWER,
        PROJECTOR,
        block="plain",
        attention_tokens=patches,
        input_embeddings=True,  # modeling_navit_siglip.py SiglipVisionTransformer.get_input_embeddings: patch_embedding
    )
    units = TOWER_UNITS + FSDP_UNITS.get("qwen2", ())
    return text, spec, tower + resampler_tensors(queries, h, v["hidden_size"]), units
