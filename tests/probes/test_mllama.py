"""Llama-3.2-Vision's cross-attention term (planner.estimate.activations.cross_attention_bytes) against what a tiny
MllamaForConditionalGeneration saves for backward on CPU: every tensor the autograd graph saves whose shape has the
image's key length (the projected image states, the text x image mask, the cross-attention layers' keys and values
and their norm), counted once each by storage (the projector's input, the tower's, left out), in fp32, in bf16 and under bf16
autocast, with and without grouped-query attention. Tolerance 1%; equal when pinned. Under a checkpoint the term
keeps the layers' inputs (the mask and the states), which saved-tensor hooks do not see: not pinned here."""

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from planner.config.spec import Knobs
from planner.estimate import activations as act
from planner.estimate.activation_terms import activation_profile
from planner.model.families import from_config

TEXT = {
    "vocab_size": 128,
    "hidden_size": 128,
    "intermediate_size": 96,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "cross_attention_layers": [1, 2],
    "pad_token_id": 0,
}
VISION = {
    "hidden_size": 32,
    "intermediate_size": 48,
    "num_hidden_layers": 2,
    "num_global_layers": 1,
    "attention_heads": 4,
    "image_size": 56,
    "patch_size": 14,
    "max_num_tiles": 4,
    "vision_output_dim": 64,
    "intermediate_layers_indices": [0],
}
BATCH, SEQ, TILES = 2, 40, 4
KEYS = BATCH * TILES * ((56 // 14) ** 2 + 1)  # 136: a dimension no other saved tensor has


def config(kv_heads: int) -> dict:
    text = {**TEXT, "model_type": "mllama_text_model", "num_key_value_heads": kv_heads}
    return {"model_type": "mllama", "image_token_index": 127, "text_config": text, "vision_config": VISION}


def measured(cfg: dict, precision: str) -> int:
    torch.manual_seed(0)
    conf = transformers.AutoConfig.for_model("mllama", **{k: v for k, v in cfg.items() if k != "model_type"})
    conf._attn_implementation = "sdpa"
    model = transformers.MllamaForConditionalGeneration(conf).train()
    if precision == "bf16-pure":
        model = model.to(torch.bfloat16)
    ids = torch.randint(1, 120, (BATCH, SEQ))
    ids[:, 0] = 127
    inputs = {
        "input_ids": ids,
        "pixel_values": torch.randn(BATCH, 1, TILES, 3, 56, 56, dtype=next(model.parameters()).dtype),
        "aspect_ratio_ids": torch.full((BATCH, 1), 6),
        "aspect_ratio_mask": torch.ones(BATCH, 1, TILES, dtype=torch.long),
        "cross_attention_mask": torch.ones(BATCH, SEQ, 1, TILES, dtype=torch.long),
    }
    seen, total = set(), 0
    params = {p.data_ptr() for p in model.parameters()}

    def pack(t):
        nonlocal total
        key = (t.untyped_storage().data_ptr(), t.dtype)
        image = any(d in (KEYS, KEYS // BATCH) for d in t.shape) and t.shape[-1] != VISION["vision_output_dim"]
        if image and key not in seen and t.data_ptr() not in params:  # the projector's input is the tower's
            seen.add(key)
            total += t.untyped_storage().nbytes()
        return t

    autocast = torch.autocast("cpu", torch.bfloat16, enabled=precision == "bf16")
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), autocast:
        model(**inputs)
    return total


@pytest.mark.parametrize("kv_heads", [2, 4], ids=["gqa", "mha"])
@pytest.mark.parametrize("precision", ["fp32", "bf16-pure", "bf16"])
def test_cross_attention_term_is_what_mllama_saves(kv_heads, precision):
    cfg = config(kv_heads)
    spec = from_config(cfg, "tiny-mllama")
    profile = activation_profile(Knobs(precision=precision))
    want = act.cross_attention_bytes(spec.text, spec.vision, BATCH, 1, SEQ, profile, spec.text.cross_layers)
    got = measured(cfg, precision)
    print(f"{kv_heads} {precision}: measured {got:,} term {want:,} {want / got - 1:+.2%}")
    assert want == pytest.approx(got, rel=0.01)
