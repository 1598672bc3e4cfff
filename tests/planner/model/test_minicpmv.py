"""MiniCPM-V 2.6 (planner/model/minicpmv.py), counted in its repository's module names: the tower as transformers'
Idefics2 vision transformer (the navit SigLIP MiniCPM-V's modeling_navit_siglip.py copies), the resampler built here
from resampler.py's modules (torch's own MultiheadAttention, LayerNorm, Linear), the language model Qwen2ForCausalLM:
each part's meta-device count equals memplan's, exactly (tolerance 0), at the published shapes."""

import pytest

from planner.model import catalog
from planner.model.families import from_config

# openbmb/MiniCPM-V-2_6: the Hub's safetensors metadata shows 8.1B (rounded); the count is its modules' (minicpmv.py)
MINICPM_V_2_6 = 8_099_175_152


def _resampler(torch, queries: int, h: int, kv: int):
    """resampler.py's Resampler(num_queries, embed_dim, num_heads = h // 128, kv_dim, adaptive=True) parameters."""
    nn = torch.nn
    m = nn.Module()
    m.query = nn.Parameter(torch.zeros(queries, h))
    m.kv_proj = nn.Linear(kv, h, bias=False) if kv != h else nn.Identity()
    m.attn = nn.MultiheadAttention(h, max(1, h // 128))
    m.ln_q, m.ln_kv, m.ln_post = nn.LayerNorm(h), nn.LayerNorm(h), nn.LayerNorm(h)
    m.proj = nn.Parameter(torch.zeros(h, h))
    m.register_buffer("pos_embed", torch.zeros(70, 70, h), persistent=False)  # the 2-D sin-cos cache: no parameter
    return m


def test_minicpm_v_2_6_equals_its_modules_built_on_meta():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    idefics2 = pytest.importorskip("transformers.models.idefics2.modeling_idefics2")
    cfg = catalog.model_config("minicpm-v-2_6")
    m = catalog.load_model("minicpm-v-2_6")
    count = lambda mod: sum(p.numel() for p in mod.parameters())
    v = {k: x for k, x in cfg["vision_config"].items() if k != "model_type"}
    text = {k: x for k, x in cfg.items() if k not in ("vision_config", "slice_config", "model_type")}
    with torch.device("meta"):
        vpm = idefics2.Idefics2VisionTransformer(transformers.Idefics2VisionConfig(**v))
        resampler = _resampler(torch, cfg["query_num"], cfg["hidden_size"], v["hidden_size"])
        llm = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**text))
    roles = lambda *r: sum(t.numel for t in m.tensors if t.role in r)
    assert roles("vision") == count(vpm) == 417_792_240
    assert roles("projector") == count(resampler) == 68_619_264
    assert roles("embed", "layer", "norm", "head") == count(llm)
    assert m.params == count(vpm) + count(resampler) + count(llm) == MINICPM_V_2_6 and round(m.params / 1e8) == 81
    assert m.exact and m.vision.patches_per_token == 16 and m.vision.attention_tokens == 1024


def test_minicpm_v_lora_targets_the_llm_only():
    """ms-swift 2.x's DEFAULT LoRA on MiniCPM-V: the language model's linears (llm.model.layers), never vpm's."""
    m = catalog.load_model("minicpm-v-2_6")
    h, kv, ff, L = 3584, 512, 18944, 28
    assert m.lora_params(8, "all-linear") == 8 * L * (2 * (h + h) + 2 * (h + kv) + 2 * (h + ff) + (ff + h))


def test_resampler_kv_proj_is_identity_at_equal_widths():
    cfg = {**catalog.model_config("minicpm-v-2_6"), "num_hidden_layers": 1}
    wide = from_config(cfg, "a")
    same = from_config({**cfg, "vision_config": {**cfg["vision_config"], "hidden_size": 3584}}, "b")
    proj = lambda m: sum(t.numel for t in m.tensors if t.role == "projector")
    assert proj(wide) - proj(same) == 1152 * 3584  # kv_proj, no bias


def test_int4_is_the_bitsandbytes_build_of_the_same_modules():
    m = catalog.load_model("minicpm-v-2_6-int4")
    assert m.params == MINICPM_V_2_6 and m.config["quantization_config"]["quant_method"] == "bitsandbytes"


@pytest.mark.parametrize(
    ("size", "slices"),
    [
        ((448, 448), 0),  # one square's area: the whole alone, upscaled
        ((449, 448), 2),  # multiple 2: grids of 2 and 3, (1, 2) the first of the nearest (log 2 off either way)
        ((896, 896), 4),  # multiple 4: 2 x 2 exact
        ((1344, 1344), 9),  # multiple 9: 3 x 3
        ((1000, 300), 3),  # area 1.49 squares -> multiple 2: grids of 2 and 3, 3 x 1 nearest 3.33 : 1
        ((4096, 300), 8),  # area 6.12 squares -> multiple 7: grids of 6 to 8, 8 x 1 nearest 13.65 : 1
    ],
)
def test_minicpmv_slices_follow_slice_image(size, slices):
    from planner.model import image_rules

    assert image_rules.minicpmv_slices(*size) == slices
    assert image_rules.minicpmv_image_tokens(*size) == 64 * (1 + slices)


def test_minicpmv_worst_case_is_every_slice():
    from planner.model import image_rules, images

    assert images.worst_case("minicpm-v")[0] == image_rules.minicpmv_worst_tokens() == 640
    assert images.family_rule("minicpmv") == "minicpm-v" and image_rules.minicpmv_worst_tokens(1) == 64


def test_minicpmv_slices_cap_at_max_slice_nums():
    from planner.model import image_rules

    assert image_rules.minicpmv_slices(4096, 4096) == 9  # 83.6 squares, capped at 9: 3 x 3
    assert image_rules.minicpmv_slices(4096, 4096, max_slices=4) == 4  # grids of 3 and 4: 2 x 2 exact
