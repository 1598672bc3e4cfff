"""The VLM families planner.model.vlm reads, counted against the model transformers 5.23 builds from the same config on
the meta device: in total and by role (the tower's and the projector's modules, the rest), for each config class's
defaults (a config.json that says only its model_type) and for the catalog entries (checkpoints' own configs, whose
totals equal the Hub's: llava-1.5-7b 7,063,427,072; gemma-3-4b 4,300,079,472), and Llama-3.2-Vision's beside them
(planner/model/mllama.py; llama-3.2-11b-vision 10,670,220,835)."""

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from planner.model import catalog, vlm
from planner.model.families import from_config
from tests.planner.model.vlms import VLMS

CATALOG = [n for n in VLMS if catalog.model_config(n)["model_type"] in (*vlm.FAMILIES, "mllama")]


def built(cfg: dict):
    conf = transformers.AutoConfig.for_model(cfg["model_type"], **{k: v for k, v in cfg.items() if k != "model_type"})
    with torch.device("meta"):
        return transformers.AutoModelForImageTextToText.from_config(conf)


def by_role(model, spec) -> dict[str, int]:
    out = {"vision": 0, "projector": 0, "text": 0}
    v = spec.vision
    for name, p in model.named_parameters():
        name = name.removeprefix("model.")
        if any(name.startswith(m) for m in v.projector_modules):
            out["projector"] += p.numel()
        elif any(name.startswith(m) for m in v.tower_modules):
            out["vision"] += p.numel()
        else:
            out["text"] += p.numel()
    return out


@pytest.mark.parametrize("cfg", [{"model_type": mt} for mt in (*vlm.FAMILIES, "mllama")] + CATALOG, ids=str)
def test_counts_are_the_built_models(cfg):
    cfg = catalog.model_config(cfg) if isinstance(cfg, str) else cfg
    spec = from_config(cfg, "model")
    roles = spec.params_by_role()
    want = by_role(built(cfg), spec)
    assert (roles.get("vision", 0), roles.get("projector", 0)) == (want["vision"], want["projector"])
    assert spec.params == sum(want.values())


def test_the_tie_flag_is_the_composites():
    """LLaVA takes text_config's tie_word_embeddings too; Gemma-3's text ties by default; Qwen3-VL only at the top."""
    base = catalog.model_config("llava-1.5-7b")
    tied = {**base, "text_config": {**base["text_config"], "tie_word_embeddings": True}}
    assert from_config(base, "a").params - from_config(tied, "b").params == 32064 * 4096
    assert sum(p.numel() for p in built(tied).parameters()) == from_config(tied, "b").params


@pytest.mark.parametrize("name", ["internvl2.5-8b", "internvl3-8b"])
def test_internvl_ties_its_head_by_the_top_level_flag_as_transformers_5_does(name):
    """Issue 49 item 4: a config.json without the top-level tie_word_embeddings ties the head (InternVLConfig's default
    True), though text_config says false; memplan had counted the head twice (+4.9% and +7.3% here)."""
    cfg = {k: v for k, v in catalog.model_config(name).items() if k != "tie_word_embeddings"}
    assert cfg["text_config"]["tie_word_embeddings"] is False
    assert from_config(cfg, "a").params == sum(p.numel() for p in built(cfg).parameters())


QWEN2_VL_TOWERS = [{}, {"embed_dim": 640, "mlp_ratio": 2, "depth": 3, "hidden_size": 1024}, {"in_channels": 4}]


@pytest.mark.parametrize("vision", QWEN2_VL_TOWERS, ids=str)
def test_qwen2_vl_tower_is_embed_dim_wide_with_an_mlp_ratio_mlp(vision):
    """Issue 49 item 4: Qwen2-VL's tower is embed_dim wide, its MLP int(embed_dim * mlp_ratio), its merger writes
    vision_config's hidden_size (the checkpoint's in_chans is not read); the reader had taken hidden_size (3584) for
    the tower's width and needed an intermediate_size Qwen2-VL's config does not have."""
    cfg = catalog.model_config("qwen2-vl-7b")
    cfg = {**cfg, "vision_config": {**cfg["vision_config"], **vision}}
    spec = from_config(cfg, "model")
    roles, want = spec.params_by_role(), by_role(built(cfg), spec)
    assert (roles["vision"], roles["projector"]) == (want["vision"], want["projector"])
    assert spec.params == sum(want.values())
