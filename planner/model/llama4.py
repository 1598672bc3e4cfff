"""Llama-4 (model_type llama4: Llama4ForConditionalGeneration; llama4_text: Llama4ForCausalLM) read from config.json as
transformers 5.25 builds it (models/llama4/modeling_llama4.py, configuration_llama4.py).

The language model (:387-444, 471-490): grouped-query attention whose four linears all take attention_bias (:305-317),
a weightless L2 norm of q and k on the RoPE layers (no parameters: :318-319), two RMSNorms a layer; the layers of
`moe_layers` (else every `interleave_moe_layer_step`-th: configuration_llama4.py __post_init__) run Llama4TextMoe
(:160-177): a router Linear(hidden, experts), stacked experts gate_up_proj (experts, hidden, 2 x intermediate_size) and
down_proj (experts, intermediate_size, hidden) (:56-63), and a shared expert of intermediate_size; the other layers a
dense gated MLP of intermediate_size_mlp (:404-407). NoPE layers (every no_rope_layer_interval-th) attend over
chunks of attention_chunk_size through a 4-D chunked mask, the RoPE layers through a full causal one.

Two things the plan takes from transformers' own code, not from the routing: Llama4TextMoe runs every token through
every expert (the router's sigmoid scores, zero off the top-k, weight each copy: :169-177), so a routed layer saves and
computes `experts` copies of every token (moespec dispatch "dense"); and SDPA runs each chunked layer with its
materialised chunked mask, which costs what a full causal mask costs (the kernel's memory does not depend on which
entries are masked), so the chunked layers are planned as masked SDPA attention with a second mask
(Traits.sliding_window_masks: create_chunked_causal_mask beside create_causal_mask, :539-545).

The tower (Llama4VisionModel, :1008-1110): an unbiased patch Linear over unfolded patches, a class embedding and
(image_size / patch_size)^2 + 1 learned positions, LayerNorms before and after, `num_hidden_layers` CLIP-like layers
(biased q/k/v/o with a 2-D rotary, a biased fc1/gelu/fc2 MLP, two LayerNorms: :757-873), then the vision adapter:
pixel shuffle by pixel_shuffle_ratio and an unbiased two-linear MLP (:672-735); the projector is
multi_modal_projector.linear_1 (vision_output_dim -> text hidden, unbiased: :689-699). One 336-pixel tile is 577
encoder tokens (the class token dropped after the tower) and (336 / 14)^2 / 4 = 144 image tokens
(processing_llama4.py:129-131); an image of several tiles adds a global tile (:101-111).
"""

from __future__ import annotations

from itertools import pairwise

from planner.errors import BadInput
from planner.model.moespec import MoESpec
from planner.model.shapes import Tensors, Traits, linear, number, size, sub

# Llama4TextConfig / Llama4VisionConfig defaults (configuration_llama4.py, transformers 5.25)
TEXT_DEFAULTS = {
    "vocab_size": 202048,
    "hidden_size": 5120,
    "intermediate_size": 8192,
    "intermediate_size_mlp": 16384,
    "num_hidden_layers": 48,
    "num_attention_heads": 40,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 4096 * 32,
    "num_experts_per_tok": 1,
    "num_local_experts": 16,
    "interleave_moe_layer_step": 1,
    "no_rope_layer_interval": 4,
    "attention_chunk_size": 8192,
    "router_aux_loss_coef": 0.001,
}
VISION_DEFAULTS = {
    "hidden_size": 768,
    "num_hidden_layers": 34,
    "num_attention_heads": 16,
    "num_channels": 3,
    "intermediate_size": 5632,
    "vision_output_dim": 7680,
    "image_size": 448,
    "patch_size": 14,
    "pixel_shuffle_ratio": 0.5,
    "projector_input_dim": 4096,
    "projector_output_dim": 4096,
}
MODEL_TYPES = ("llama4", "llama4_text")
TOWER, PROJECTOR = ("vision_model.",), ("multi_modal_projector.",)
# Llama4ForConditionalGeneration._no_split_modules (:1117); Llama4ForCausalLM's (:552)
UNITS = {"llama4": ("Llama4TextDecoderLayer", "Llama4VisionEncoderLayer"), "llama4_text": ("Llama4TextDecoderLayer",)}
DISPATCH = "dense"  # every token through every expert (Llama4TextMoe.forward); planner.estimate.moe reads it
# Llama4ForConditionalGeneration's loss, transformers 4.51.0 (the class's first release) up to 5.17.0: the language
# model runs without labels (its logits stay in the model's dtype), then the forward shifts them, keeps the tokens
# whose attention_mask is not 0 (a copy) and calls nn.CrossEntropyLoss on them (4.51.1 models/llama4/
# modeling_llama4.py:1784-1800; 5.16.1 :1330-1346); 5.17.0 calls self.loss_function, which upcasts to fp32 (:1317).
# Llama4ForCausalLM (llama4_text) calls self.loss_function at every release. planner.estimate.loss_dtype.half_loss
HALF_LOSS = ((4, 51, 0), (5, 17, 0))


def _filled(part: dict, defaults: dict) -> dict:
    return {**defaults, **{k: v for k, v in part.items() if v is not None}}


def text_config(cfg: dict) -> dict:
    """The language model's fields as transformers fills them (the composite's text_config, or the config itself)."""
    tc = sub(cfg, "text_config") if cfg.get("model_type") == "llama4" else cfg
    return _filled(tc, TEXT_DEFAULTS)


def moe_layers(tc: dict) -> list[int]:
    """The routed layers: moe_layers, else every interleave_moe_layer_step-th from step - 1
    (Llama4TextConfig.__post_init__)."""
    L, listed = size(tc, "num_hidden_layers"), tc.get("moe_layers")
    if listed is not None:
        if not isinstance(listed, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in listed):
            raise BadInput(f"config.json: moe_layers = {listed!r} must be a list of layer indices", "model")
        return sorted({i for i in listed if 0 <= i < L})
    step = size(tc, "interleave_moe_layer_step")
    return list(range(step - 1, L, step))


def layer_kinds(tc: dict) -> tuple[int, int]:
    """(RoPE layers, NoPE layers): no_rope_layers (1: RoPE), else a NoPE layer every no_rope_layer_interval-th."""
    L, flags = size(tc, "num_hidden_layers"), tc.get("no_rope_layers")
    if not flags:
        k = size(tc, "no_rope_layer_interval")
        flags = [int((i + 1) % k != 0) for i in range(L)]
    rope = sum(1 for f in flags[:L] if f)
    return rope, L - rope


def text_tensors(tc: dict) -> tuple[MoESpec, list[Tensors]]:
    """The language model's tensors and the routed layers' spec."""
    h, L, heads = size(tc, "hidden_size"), size(tc, "num_hidden_layers"), size(tc, "num_attention_heads")
    kv, hd, vocab = size(tc, "num_key_value_heads"), size(tc, "head_dim"), size(tc, "vocab_size")
    e, k, ie = size(tc, "num_local_experts"), size(tc, "num_experts_per_tok"), size(tc, "intermediate_size")
    if k > e:
        raise BadInput(f"config.json: num_experts_per_tok = {k} exceeds the {e} experts", "model")
    routed = moe_layers(tc)
    n_moe, adjacent = len(routed), any(b - a == 1 for a, b in pairwise(routed))
    bias = bool(tc.get("attention_bias", False))
    t = [Tensors("embed", (vocab, h))]
    for d_out, name in ((heads * hd, "q_proj"), (kv * hd, "k_proj"), (kv * hd, "v_proj")):
        t += linear("layer", d_out, h, L, bias, True, name)
    t += linear("layer", h, heads * hd, L, bias, True, "o_proj")
    # the router is an nn.Linear subclass (Llama4Router, :145-157) whose forward returns a tuple: PEFT's LoRA wrapper
    # on it fails the step (PEFT 0.21, a tiny Llama-4: AttributeError 'tuple' object has no attribute 'dtype'), and
    # LLaMA-Factory's all-linear leaves it out (find_all_linear_modules matches "Linear" in the class name): not adapted
    t += [Tensors("layer", (e, h), n_moe, name="router.weight", all_linear=0)] if n_moe else []
    t += [Tensors("layer", (e, h, 2 * ie), n_moe, True, "experts.gate_up_proj", 0)] if n_moe else []
    t += [Tensors("layer", (e, ie, h), n_moe, True, "experts.down_proj", 0)] if n_moe else []
    for width, n, pre in ((ie, n_moe, "shared_expert."), (size(tc, "intermediate_size_mlp"), L - n_moe, "")):
        for name in ("gate_proj", "up_proj"):
            t += linear("layer", width, h, n, False, True, pre + name) if n else []
        t += linear("layer", h, width, n, False, True, pre + "down_proj") if n else []
    t += [Tensors("layer", (h,), 2 * L), Tensors("norm", (h,))]
    if not bool(tc.get("tie_word_embeddings", False)):
        t.append(Tensors("head", (vocab, h)))
    aux = number(tc, "router_aux_loss_coef", 0.0) if tc.get("output_router_logits") else 0.0
    return MoESpec(e, k, ie, n_moe, ie, aux_loss_coef=aux, dispatch=DISPATCH, routed_adjacent=adjacent), t


def traits(tc: dict, composite: bool = False) -> Traits:
    """A second 4-D mask when chunked (NoPE) layers sit beside full-attention ones; the weightless q/k norm of
    use_qk_norm (True by default) on the RoPE layers; the composite's loss in the logits' dtype (HALF_LOSS)."""
    rope, nope = layer_kinds(tc)
    masks = bool(rope and nope and tc.get("attention_chunk_size"))
    qk_norm = bool(tc.get("use_qk_norm", True)) and rope > 0
    half = HALF_LOSS if composite else ()
    # Llama4PreTrainedModel: no flash (:453)
    return Traits(sliding_window_masks=masks, flash=False, l2_qk_norm=qk_norm, half_loss=half)


def _side(v: dict, key: str) -> int:
    x = size(v, key)
    return size({key: x[0]}, key) if isinstance(x, (list, tuple)) and x else x


def vision_config(cfg: dict) -> dict:
    v = _filled(sub(cfg, "vision_config", required=False), VISION_DEFAULTS)
    for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vision_output_dim"):
        size(v, key)
    return v


def tile_patches(v: dict) -> int:
    """Encoder tokens of one tile: (image_size / patch_size)^2 patches and the class token (:1021)."""
    return (_side(v, "image_size") // _side(v, "patch_size")) ** 2 + 1


def shuffle_factor(v: dict) -> int:
    """Encoder patches per image token: 1 / pixel_shuffle_ratio^2 (processing_llama4.py:77)."""
    return round(1.0 / number(v, "pixel_shuffle_ratio", 0.5, low=1e-3, high=1.0) ** 2)


def vision_tensors(v: dict, text_hidden: int) -> list[Tensors]:
    """The tower, its vision adapter and the projector."""
    h, L, i, p = v["hidden_size"], v["num_hidden_layers"], v["intermediate_size"], _side(v, "patch_size")
    t = linear("vision", h, size(v, "num_channels") * p * p, 1, False)
    t += [Tensors("vision", (h,)), Tensors("vision", (tile_patches(v), h)), Tensors("vision", (h,), 4)]
    t += linear("vision", h, h, 4 * L, True) + linear("vision", i, h, L, True) + linear("vision", h, i, L, True)
    t += [Tensors("vision", (h,), 4 * L)]
    pin, pout = size(v, "projector_input_dim"), size(v, "projector_output_dim")
    t += linear("vision", pin, i, 1, False) + linear("vision", pout, pout, 1, False)  # Llama4VisionMLP2 (:672-680)
    return t + linear("projector", text_hidden, v["vision_output_dim"], 1, False)


def read(cfg: dict, text_spec, vision_spec) -> tuple[object, list[Tensors], object, list[Tensors], tuple[str, ...]]:
    """(TextSpec, its tensors, the VisionSpec or None, the tower's and projector's tensors, the FSDP units)."""
    mt, tc = cfg["model_type"], text_config(cfg)
    moe, t = text_tensors(tc)
    heads, kv = size(tc, "num_attention_heads"), size(tc, "num_key_value_heads")
    if heads % kv:
        raise BadInput(
            f"config.json: num_key_value_heads = {kv} does not divide num_attention_heads = {heads}", "model"
        )
    bias = bool(tc.get("attention_bias", False))
    text = text_spec(
        hidden=size(tc, "hidden_size"),
        layers=size(tc, "num_hidden_layers"),
        heads=heads,
        kv_heads=kv,
        head_dim=size(tc, "head_dim"),
        intermediate=size(tc, "intermediate_size_mlp"),
        vocab=size(tc, "vocab_size"),
        tied=bool(tc.get("tie_word_embeddings", False)),
        max_positions=size(tc, "max_position_embeddings"),
        dropout=number(tc, "attention_dropout", 0.0, high=1.0),
        biases=(bias, bias, False),
        moe=moe,
        traits=traits(tc, composite=mt == "llama4"),
        nope_layers=layer_kinds(tc)[1],
    )
    if mt == "llama4_text":
        return text, t, None, [], UNITS[mt]
    v = vision_config(cfg)
    spec = vision_spec(
        v["num_hidden_layers"],
        v["hidden_size"],
        v["intermediate_size"],
        v["num_attention_heads"],
        False,
        shuffle_factor(v),
        TOWER,
        PROJECTOR,
        block="plain",
        attention_tokens=tile_patches(v),  # one tile a call; its cap (max_patches) is no framework's knob: not `tiled`
        input_embeddings=True,  # Llama4VisionModel.get_input_embeddings: patch_embedding (4.52.4 :1378, 4.57.1 :1034)
    )
    return text, t, spec, vision_tensors(v, text.hidden), UNITS[mt]
