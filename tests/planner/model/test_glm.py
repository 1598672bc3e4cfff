"""GLM-4, GLM-4.5, GLM-4.1V and GLM-4.5V (model_type glm4, glm4_moe, glm4v, glm4v_moe) against transformers 5.25's meta-device build of the same config:
the config class's defaults a config.json leaves out (GLM-4's attention_bias True, GLM-4.5's use_qk_norm), and the
rotated dims of each head (partial_rotary_factor, 0.5 by default, at the top level or in rope_parameters)."""

import pytest

from planner.model import catalog
from planner.model.families import from_config


def _built(cfg: dict) -> int:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    conf = transformers.AutoConfig.for_model(cfg["model_type"], **{k: v for k, v in cfg.items() if k != "model_type"})
    with torch.device("meta"):
        return sum(p.numel() for p in transformers.AutoModelForCausalLM.from_config(conf).parameters())


def _small(name: str, **extra) -> dict:
    cfg = {**catalog.model_config(name), "num_hidden_layers": 2, **extra}
    return {k: v for k, v in cfg.items() if v is not None}


@pytest.mark.parametrize(
    "cfg",
    [
        _small("glm-4-9b", attention_bias=None),  # GLM-4's default: biased q/k/v, o_proj without
        _small("glm-4-9b", attention_bias=False),
        _small("glm-4.5-air", use_qk_norm=True),
        _small("glm-4.5-air", attention_bias=False, first_k_dense_replace=0, n_shared_experts=2),
    ],
    ids=["glm4-default-bias", "glm4-no-bias", "glm4_moe-qk-norm", "glm4_moe-all-routed"],
)
def test_counts_are_the_built_models(cfg):
    assert from_config(cfg, "glm").params == _built(cfg)


def test_the_rotated_dims_follow_partial_rotary_factor():
    base = catalog.model_config("glm-4-9b")
    assert from_config(base, "a").text.rotary_cat_dim == 64
    top = {k: v for k, v in base.items() if k != "partial_rotary_factor"}
    assert from_config(top, "b").text.rotary_cat_dim == 64  # Glm4Config's default 0.5
    nested = {**top, "rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.25}}
    assert from_config(nested, "c").text.rotary_cat_dim == 32
    assert from_config(catalog.model_config("qwen3-8b"), "d").text.rotary_cat_dim == 0


def _built_vlm(model_type: str = "glm4v", **kw) -> tuple[dict, int]:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    conf = transformers.AutoConfig.for_model(model_type, **kw)
    with torch.device("meta"):
        model = transformers.AutoModelForImageTextToText.from_config(conf)
    return conf.to_dict(), sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(
    "kw",
    [
        {"text_config": {"num_hidden_layers": 2}, "vision_config": {"depth": 2}},
        # the text model's tie flag reaches the composite (configuration_glm4v.py:178); q/k/v biased whatever it says
        {"text_config": {"num_hidden_layers": 2, "tie_word_embeddings": True, "attention_bias": False}},
        {"vision_config": {"depth": 3, "attention_bias": True, "image_size": 448, "spatial_merge_size": 1}},
    ],
    ids=["defaults", "tied-text", "tower-options"],
)
def test_glm4v_counts_are_the_built_models(kw):
    cfg, real = _built_vlm(**kw)
    spec = from_config(cfg, "glm4v")
    assert spec.params == real and spec.exact and spec.vision is not None
    assert spec.text.rotary_cat_dim == 0 and spec.text.biases[:2] == (True, False)


def test_glm4v_catalog_entry_is_the_published_size():
    """GLM-4.1V-9B-Thinking: 10.3B parameters on its model card; the tower's merger is the projector."""
    spec = catalog.load_model("glm-4.1v-9b")
    assert round(spec.params / 1e9, 1) == 10.3
    assert spec.params_by_role()["projector"] == 185_081_856


_OPTIONS = {"num_hidden_layers": 3, "head_dim": 64, "tie_word_embeddings": True, "use_qk_norm": True}
_OPTIONS.update(first_k_dense_replace=0, n_shared_experts=2, attention_bias=False)


@pytest.mark.parametrize(
    "kw",
    [
        {"text_config": {"num_hidden_layers": 3}, "vision_config": {"depth": 2}},  # head_dim hidden // heads (42)
        {"text_config": {"num_hidden_layers": 3, "head_dim": 128}, "vision_config": {"depth": 2}},
        # use_qk_norm builds no norm here (modeling_glm4v_moe.py:200-222); tied through the text model; all routed
        {"text_config": _OPTIONS, "vision_config": {"depth": 2, "attention_bias": True}},
    ],
    ids=["defaults", "head-dim", "options"],
)
def test_glm4v_moe_counts_are_the_built_models(kw):
    cfg, real = _built_vlm("glm4v_moe", **kw)
    spec = from_config(cfg, "glm4v_moe")
    assert spec.params == real and spec.exact and spec.vision is not None and spec.text.moe is not None
    assert spec.text.rotary_cat_dim == spec.text.head_dim // 2  # partial_rotary_factor 0.5 by default
    assert spec.fsdp_units == ("Glm4vMoeTextDecoderLayer", "Glm4vMoeVisionBlock")


def test_glm45v_catalog_entry_is_the_published_checkpoint():
    """zai-org/GLM-4.5V's 46 safetensors hold 107,710,933,120 values, 45 x 128 of them the routers' fp32
    e_score_correction_bias buffers (not parameters); its language model routes 8 of 128 experts past one dense
    layer (a weight listing of the checkpoint as transformers 5.7 loads it, whose config the catalog entry is)."""
    spec = catalog.load_model("glm-4.5v")
    assert spec.params == 107_710_933_120 - 45 * 128
    m = spec.text.moe
    assert (m.experts, m.top_k, m.moe_layers, m.shared_inter) == (128, 8, 45, 1408)
    assert spec.params_by_role()["projector"] == 151_265_280  # the merger: 4096^2 + LayerNorm + 3 x 4096 x 10944


def test_glm45v_hub_and_modelscope_ids_resolve_to_the_catalog_entry():
    """The ids LLaMA-Factory (extras/constants.py:968-970) and ms-swift (swift/model/models/glm.py:455) download."""
    from planner.intake.models import hf_id_of

    assert hf_id_of("zai-org/GLM-4.5V")[0] == hf_id_of("ZhipuAI/GLM-4.5V")[0] == "glm-4.5v"
    assert hf_id_of("zai-org/GLM-4.5V-FP8") is None  # a prequantized checkpoint is not this entry
