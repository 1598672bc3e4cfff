"""Llama-3.2-Vision's cross-attention term (planner.estimate.activations.cross_attention_bytes) against what a tiny
MllamaForConditionalGeneration saves for backward on CPU: every tensor the autograd graph saves whose shape has the
image's key length (the projected image states, the text x image mask, the cross-attention layers' keys and values
and their norm), counted once each by storage (the projector's input, the tower's, left out), in fp32, in bf16 and under bf16
autocast, with and without grouped-query attention, the language model trained and frozen (--frozen language: the
projections and the key norm keep nothing for their weights: 23-32% less). Tolerance 1%; equal when pinned. Under a checkpoint the term
keeps the layers' inputs (the mask and the states), which saved-tensor hooks do not see: not pinned here.

The tower beside its blocks (activation_terms.tiled_tower_bytes: its N x N tile mask, its two LayerNorms' inputs, the
tile position embedding, the projector's input) against what the same model saves there, on CPU under CUDA's autocast
policy (probes.amp): equal to the byte beside a remainder the terms leave out and the test writes down (the patch
convolution's input in the compute dtype, the per-tile embedding products and gates, the LayerNorm statistics the CPU
keeps in bf16 where CUDA keeps fp32)."""

from contextlib import nullcontext

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from planner.config.spec import Knobs
from planner.estimate import activations as act
from planner.estimate.activation_terms import activation_profile, tiled_tower_bytes
from planner.estimate.setup import Setup
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


def _model(cfg: dict, precision: str):
    torch.manual_seed(0)
    conf = transformers.AutoConfig.for_model("mllama", **{k: v for k, v in cfg.items() if k != "model_type"})
    conf._attn_implementation = "sdpa"
    model = transformers.MllamaForConditionalGeneration(conf).train()
    return model.to(torch.bfloat16) if precision == "bf16-pure" else model


def _inputs(pixel_dtype) -> dict:
    ids = torch.randint(1, 120, (BATCH, SEQ))
    ids[:, 0] = 127
    return {
        "input_ids": ids,
        "pixel_values": torch.randn(BATCH, 1, TILES, 3, 56, 56, dtype=pixel_dtype),
        "aspect_ratio_ids": torch.full((BATCH, 1), 6),
        "aspect_ratio_mask": torch.ones(BATCH, 1, TILES, dtype=torch.long),
        "cross_attention_mask": torch.ones(BATCH, SEQ, 1, TILES, dtype=torch.long),
    }


def measured(cfg: dict, precision: str, frozen_language: bool = False) -> int:
    model = _model(cfg, precision)
    for name, p in model.named_parameters():  # --frozen language: the tower and the projector train
        p.requires_grad_(not frozen_language or "vision_model" in name or "multi_modal_projector" in name)
    inputs = _inputs(next(model.parameters()).dtype)
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


# the frozen language model without GQA in the sweep tier (about 1 s a case on 2 cores)
CROSS_ROWS = [(2, False), (4, False), (2, True), pytest.param(4, True, marks=pytest.mark.sweep)]


@pytest.mark.parametrize(
    "kv_heads,frozen", CROSS_ROWS, ids=["gqa", "mha", "gqa-frozen-language", "mha-frozen-language"]
)
@pytest.mark.parametrize("precision", ["fp32", "bf16-pure", "bf16"])
def test_cross_attention_term_is_what_mllama_saves(kv_heads, precision, frozen):
    cfg = config(kv_heads)
    spec = from_config(cfg, "tiny-mllama")
    profile = activation_profile(Knobs(precision=precision))
    want = act.cross_attention_bytes(spec.text, spec.vision, BATCH, 1, SEQ, profile, spec.text.cross_layers, frozen)
    got = measured(cfg, precision, frozen)
    print(f"{kv_heads} {precision} frozen {frozen}: measured {got:,} term {want:,} {want / got - 1:+.2%}")
    assert want == pytest.approx(got, rel=0.01)


N, K = TILES * 24, TILES * 17  # a tile's 17 patches padded to 24 in the tower; the 17 the projector reads


def tower_edges_saved(precision: str, frozen: str) -> int:
    """Bytes the tiny Mllama's forward saves in its tower outside the blocks (the tower's own forward, its embeddings
    and its two LayerNorms), the N x N mask its blocks' SDPA saves, and the projector's input (not its weight's autocast
    copy), each storage once; fp32 pixels, as a processor hands them."""
    from probes.amp import CudaAutocast

    model = _model(config(2), precision)
    for name, p in model.named_parameters():
        p.requires_grad_(not any(part in name for part in {"none": (), "vision": ("vision_model",)}[frozen]))
    stack, seen, total = [], set(), 0
    for name, m in model.named_modules():
        m.register_forward_pre_hook(lambda mod, a, n=name: stack.append(n))
        m.register_forward_hook(lambda mod, a, o: stack.pop() and None)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    weight = sorted(model.model.multi_modal_projector.weight.shape)  # its autocast copy (or its transpose)

    def pack(t):
        nonlocal total
        key, where = t.untyped_storage().data_ptr(), stack[-1] if stack else ""
        edge = "vision_model" in where and ".layers." not in where
        projector_input = where.endswith("multi_modal_projector") and sorted(t.shape) != weight
        edge = edge or tuple(t.shape[-2:]) == (N, N) or projector_input
        if edge and key not in params and key not in seen:
            seen.add(key)
            total += t.untyped_storage().nbytes()
        return t

    amp = CudaAutocast(torch.bfloat16) if precision == "bf16" else nullcontext()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), amp:
        model(**_inputs(torch.float32))
    return total


def tower_edges_remainder(precision: str, frozen: str) -> int:
    """What the terms leave out of tower_edges_saved: the patch convolution's input in the compute dtype (its weight's
    autocast copy too), the pre- and post-tile embeddings' products (batch x tiles x width) with the gates' tanh and the
    aspect-ratio ids, and the LayerNorms' statistics the CPU keeps in bf16 (bf16-pure; the term counts CUDA's fp32)."""
    if frozen == "vision":
        return 0
    r, c = (2, 2) if precision == "bf16-pure" else (4, 2) if precision == "bf16" else (4, 4)
    conv = c * BATCH * TILES * 3 * 56 * 56 + (2 * 32 * 3 * 14 * 14 if precision == "bf16" else 0)
    tiles = 2 * r * BATCH * TILES * 32 + 5 * r + 8 * BATCH
    cpu_stats = BATCH * (N + K) * 2 * 2 if precision == "bf16-pure" else 0
    return conv + tiles - cpu_stats


# on every commit autocast with the tower trained and bf16-pure with it frozen; the rest in the sweep tier
TOWER_ROWS = [("bf16", "none"), ("bf16-pure", "vision")] + [
    pytest.param(*row, marks=pytest.mark.sweep)
    for row in (("fp32", "none"), ("bf16-pure", "none"), ("fp32", "vision"), ("bf16", "vision"))
]


@pytest.mark.parametrize("precision,frozen", TOWER_ROWS)
def test_the_tiled_towers_terms_are_what_its_forward_saves_beside_its_blocks(precision, frozen):
    spec, k = from_config(config(2), "tiny-mllama"), Knobs(precision=precision, frozen=frozen)
    terms = tiled_tower_bytes(Setup(spec, k, BATCH, 1, SEQ, image_tokens=1))
    got = tower_edges_saved(precision, frozen)
    print(f"{precision} {frozen}: saved {got:,} terms {terms:,} remainder {tower_edges_remainder(precision, frozen):,}")
    assert terms + tower_edges_remainder(precision, frozen) == got
