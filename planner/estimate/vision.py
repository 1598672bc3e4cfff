"""A vision tower's saved activations, per kind of block as transformers 5.23 writes it (issue 33 items 4-5): "plain"
(CLIP-like with gelu: SigLIP, Llama-3.2-Vision's), "quick-gelu" (CLIP), "layer-scale" (InternViT), "rotary"
(Qwen3-VL), "quick-gelu-rotary" (Qwen2-VL: Qwen3-VL's block with CLIP's MLP), "rmsnorm-rotary" (Qwen2.5-VL),
"generic" (an unknown tower, read as "plain").

Each block kind saves, per encoder token (patch, encoder_tokens) of width h and MLP width i, in the compute dtype c unless said:
- residual stream: the two LayerNorms' inputs (the residual adds' outputs, in the residual dtype r), and the norms'
  fp32 mean and rstd; RMSNorm (Qwen2.5-VL) instead keeps its own fp32 copy of the input, its normalized tensor and
  its rsqrt (activations.rmsnorm_saved_bytes), and no residual;
- the norms' outputs as the linears read them: one copy each, or under torch AMP one cast per reading linear (q, k
  and v each cast the first norm's output in CLIP, SigLIP, InternViT and Mllama; a fused qkv casts it once);
- attention: q, k and v (a fused qkv's output), SDPA's output and log-sum-exp; a rotary tower (Qwen) also its
  rotated q and k and the contiguous copy its out-projection reads; InternViT's layer scale and the tanh gates of
  Mllama's global layers keep the out-projection's and fc2's outputs (gated_bytes);
- MLP: fc1's output and the activation's (gelu, gelu-tanh), with quick_gelu's sigmoid beside them (CLIP, Qwen2-VL), or the
  gated MLP's four tensors (Qwen2.5-VL).
SDPA runs without a mask in every tower but Llama-3.2-Vision's (a per-image or per-window split, or an all-ones patch
mask that transformers skips), so nothing grows with the square of the patches; Mllama's pads each tile and masks the
padding with one N x N mask an image, kept beside its LayerNorms' inputs outside the blocks, its tile embedding and its
projector's wide input (tile_mask_bytes, tile_norm_inputs_bytes, tile_embedding_bytes, projector_input_bytes; pinned on
CPU by tests/probes/test_mllama.py and in the sim by tests/probes/test_vision_terms.py); but transformers 4.45-4.50's Qwen2-VL and Qwen2.5-VL towers
run every head's N x N scores (masked_tower_bytes) where the framework's release runs those transformers
(Framework.tower_sdpa). Eager attention (--attention eager reaches the tower too)
keeps each attention call's scores: eager_attention_bytes. Pinned by the sim's per-module bytes of each catalog VLM's
real tower (tests/probes/test_vision_terms.py).

Layers past the one whose output the projector reads (LLaVA's vision_feature_layer -2) save nothing: no gradient
flows back through them.
"""

from __future__ import annotations

from planner.estimate.activations import rmsnorm_saved_bytes, saved_dtype_bytes
from planner.model.images import anyres_encoder_tokens
from planner.model.modelspec import VisionSpec

ROTARY = ("rmsnorm-rotary", "rotary", "quick-gelu-rotary")
QUICK_GELU = ("quick-gelu", "quick-gelu-rotary")  # x * sigmoid(1.702 x): fc1's output, the sigmoid's, the product
SEPARATE_QKV = ("quick-gelu", "plain", "layer-scale", "generic")


def vision_block_bytes(v: VisionSpec, patches: int, profile: str) -> int:
    """One tower block's saved bytes over `patches` encoder tokens."""
    r, c = saved_dtype_bytes(profile)
    amp = profile == "amp"
    p, h, i = patches, v.hidden, v.intermediate
    lse = 4 * p * v.heads
    if v.block == "rmsnorm-rotary":
        norms = 2 * rmsnorm_saved_bytes(p, h, profile) + c * p * h * (1 + (2 if amp else 1))  # qkv; gate and up
        return norms + c * p * h * (3 + 2 + 1 + 1) + 4 * c * p * i + lse
    readers = 3 if v.block in SEPARATE_QKV else 1
    norm_outputs = c * p * h * ((readers + 1) if amp else 2)
    residual = 2 * r * p * h + 2 * 2 * 4 * p
    attention = c * p * h * (3 + (2 + 1 + 1 if v.block in ROTARY else 1))
    kept = gated_bytes(p, h, profile) if v.block == "layer-scale" else 0
    mlp = c * p * i * (3 if v.block in QUICK_GELU else 2)
    return residual + norm_outputs + attention + kept + mlp + lse


def encoder_tokens(v: VisionSpec, image_tokens: int) -> int:
    """The tower's tokens for `image_tokens` LLM tokens of one sample (patches_per_token each; any-resolution towers
    through images.anyres_encoder_tokens)."""
    return anyres_encoder_tokens(v.anyres, image_tokens) if v.anyres else image_tokens * v.patches_per_token


def eager_scores_per_block(v: VisionSpec, tokens: int, windowed: bool) -> int:
    """Attention scores (heads x n x n summed over its attention calls) of one block over one sample's `tokens`
    encoder tokens: whole tiles of attention_tokens, the sample's image whole, or windows of window_tokens."""
    if windowed:
        return v.heads * tokens * min(tokens, v.window_tokens)
    if v.attention_tokens:
        return max(1, round(tokens / v.attention_tokens)) * v.heads * v.attention_tokens**2
    return v.heads * tokens**2


def eager_bytes_per_score(v: VisionSpec, profile: str) -> int:
    """What an eager block saves per attention score: the softmax's fp32 output and its cast back for the product
    with v (6 bytes; transformers' eager_attention_forward: softmax(dtype=float32).to(query.dtype)), 4 in fp32 (one
    tensor). InternViT's softmax runs in the compute dtype (modeling_internvl.py:93): 2 bytes in half precision,
    while torch AMP runs softmax in fp32 and casts it for the product (6)."""
    if profile == "fp32":
        return 4
    return 2 if v.block == "layer-scale" and profile == "half" else 6


def eager_attention_bytes(v: VisionSpec, batch: int, image_tokens: int, profile: str) -> int:
    """What an eager tower's trained blocks save beyond SDPA's, over its live layers: each attention call's scores
    (eager_bytes_per_score) in place of SDPA's log-sum-exp and, in Qwen's rotary blocks, SDPA's output (its
    out-projection reads a copy). Sim, bf16-pure: LLaVA-1.5, SmolVLM, Gemma-3, LLaVA-NeXT, Llama-3.2-Vision,
    InternVL2.5, Qwen2.5-VL (windowed and full blocks) and Qwen3-VL equal to the byte (tests/probes/test_vision_terms.py)."""
    if image_tokens == 0:
        return 0
    tokens = encoder_tokens(v, image_tokens)
    live = v.layers - v.unused_layers
    windowed = (live - v.full_attention_layers) if v.window_tokens else 0
    scores = windowed * eager_scores_per_block(v, tokens, True) + (live - windowed) * eager_scores_per_block(
        v, tokens, False
    )
    replaced = 4 * tokens * v.heads + (saved_dtype_bytes(profile)[1] * tokens * v.hidden if v.block in ROTARY else 0)
    return batch * (eager_bytes_per_score(v, profile) * scores - live * replaced)


def gated_bytes(patches: int, hidden: int, profile: str) -> int:
    """A block whose attention and MLP outputs are scaled before the residual add (InternViT's ls1/ls2, Mllama's
    gate_attn/gate_ffn): the products keep the out-projection's and fc2's outputs."""
    _, c = saved_dtype_bytes(profile)
    return 2 * c * patches * hidden


def vision_activations_bytes(
    v: VisionSpec,
    batch: int,
    image_tokens: int,
    profile: str,
    checkpointing: str,
    trainable: bool,
    eager: bool = False,
) -> int:
    """The tower's saved activations for `image_tokens` LLM-side tokens per sample, at the start of the decoder's
    backward. A frozen tower (LoRA on the LLM) saves nothing; under checkpointing each live block keeps its input
    (its blocks are recomputed one at a time after the decoder's backward, when its saved tensors are gone); `eager`:
    the blocks' attention scores too (eager_attention_bytes)."""
    if not trainable or image_tokens == 0:
        return 0
    patches = batch * encoder_tokens(v, image_tokens)
    live = v.layers - v.unused_layers
    if checkpointing == "full":  # its blocks are recomputed after the decoder's backward has freed the decoder's
        r, _ = saved_dtype_bytes(profile)
        return live * r * patches * v.hidden
    scores = eager_attention_bytes(v, batch, image_tokens, profile) if eager else 0
    return (
        live * vision_block_bytes(v, patches, profile)
        + v.gated_layers * gated_bytes(patches, v.hidden, profile)
        + scores
    )


def frozen_tower_checkpoint_bytes(v: VisionSpec, patches: int, profile: str) -> int:
    """Bytes a frozen, checkpointed tower keeps from its forward to its backward where the framework makes its input
    require a gradient (Framework.frozen_tower_input_grads, VisionSpec.input_embeddings): each live block's input,
    as a trained tower under checkpointing keeps. A real CPU forward of a frozen Idefics2 tower with the hook keeps
    exactly these and nothing without it (tests/probes/test_frozen_tower_grads.py)."""
    r, _ = saved_dtype_bytes(profile)
    return (v.layers - v.unused_layers) * r * patches * v.hidden


def frozen_tower_graph_bytes(v: VisionSpec, patches: int, profile: str) -> int:
    """Bytes a frozen, un-checkpointed tower keeps where the framework makes its input require a gradient: what
    autograd saves for the input's gradient alone (no weight's), each live block's two LayerNorm inputs, SDPA's q, k,
    v and output, and the GELU's input; the LayerNorms' mean and rstd and SDPA's log-sum-exp in fp32. A real CPU
    forward of a frozen Mllama tower at transformers 4.55.4 and 4.57.1 with ms-swift's hook keeps exactly these beside
    its pre/post LayerNorms' inputs and its attention mask (tests/probes/test_frozen_tower_hook.py)."""
    r, _ = saved_dtype_bytes(profile)
    block = (6 * v.hidden + v.intermediate) * r + (2 * 2 + v.heads) * 4
    return (v.layers - v.unused_layers) * patches * block


def tile_mask_bytes(v: VisionSpec, images: int, profile: str) -> int:
    """Llama-3.2-Vision's tower mask (transformers 5.25 modeling_mllama.py:93-117, called at :959-964): one additive
    [images, 1, N, N] mask over each image's N padded tile tokens (v.attention_tokens), made by a matmul (:114), so in
    the compute dtype (bf16 under autocast); every tower layer's SDPA saves that one tensor (eager attention adds it to
    the scores and keeps nothing). 0 for the other towers (no cross_tokens_per_token), whose SDPA runs unmasked."""
    if not v.cross_tokens_per_token:
        return 0
    _, c = saved_dtype_bytes(profile)
    return c * images * v.attention_tokens**2


def tile_norm_inputs_bytes(v: VisionSpec, images: int, profile: str, embeddings: bool) -> int:
    """Llama-3.2-Vision's two LayerNorms outside its blocks, each input in the residual dtype with fp32 mean and rstd:
    layernorm_post's over the N padded tokens (the local encoder's output, modeling_mllama.py:974) and, where the graph
    reaches the embeddings (`embeddings`: the tower's weights train, or a hooked frozen tower), layernorm_pre's over the
    K unpadded ones (:947; v.cross_tokens_per_token an image). 0 for the other towers."""
    if not v.cross_tokens_per_token:
        return 0
    r, _ = saved_dtype_bytes(profile)
    tokens = images * (v.attention_tokens + (v.cross_tokens_per_token if embeddings else 0))
    return tokens * (r * v.hidden + 2 * 4)


def tile_embedding_bytes(v: VisionSpec, images: int, profile: str) -> int:
    """Llama-3.2-Vision's tile position embedding, K x hidden an image in the table's (residual) dtype, which the gate's
    product keeps for the gate's gradient (modeling_mllama.py:174) where the tower's weights train. 0 elsewhere."""
    r, _ = saved_dtype_bytes(profile)
    return r * images * v.cross_tokens_per_token * v.hidden


def projector_input_bytes(v: VisionSpec, images: int, profile: str) -> int:
    """What a trained projector's Linear saves for its weight's gradient where no tower block keeps it: Llama-3.2-
    Vision's last and intermediate layers' states concatenated (modeling_mllama.py:1011, read at :1356), K x
    vision_output_dim an image (v.projector_input) in the compute dtype (autocast's bf16 copy under AMP). 0 elsewhere."""
    _, c = saved_dtype_bytes(profile)
    return c * images * v.cross_tokens_per_token * v.projector_input


QWEN2_TOWERS = ("quick-gelu-rotary", "rmsnorm-rotary")  # Qwen2-VL's and Qwen2.5-VL's
# what sizes a tower's call (MemoryBreakdown.detail "vision_knob", planner.search.advice names it in the framework's
# words): an image's pixel cap (the Qwen-VL towers take each image whole, attention_tokens 0), InternVL's tiles an
# image (448 x 448 each), or neither (a fixed-size image: only fewer images shrink it)
PIXEL_CAP, TILES = 1, 2


def tower_knob(v: VisionSpec) -> int:
    """PIXEL_CAP, TILES or 0: the setting that shrinks the patches of a tower's call."""
    if v.attention_tokens == 0:
        return PIXEL_CAP
    return TILES if v.tiled else 0


def masked_tower_bytes(v: VisionSpec, patches: int, profile: str, trained: bool) -> int:
    """One Qwen2-VL tower block's largest moment under transformers 4.45-4.50's SDPA (Framework.tower_sdpa
    "masked-3d"): the block builds a [1, N, N] bool mask over the call's N patches, every image of the micro-batch
    (4.45.2 modeling_qwen2_vl.py:398-400), and calls SDPA on 3-D q, k, v (:401-404; Qwen2.5-VL's windowed and full
    blocks alike, 4.49.0 modeling_qwen2_5_vl.py:314-320, the windows only in the mask). torch's flash and
    memory-efficient kernels take 4-D tensors only (sdp_utils check_tensor_shapes; torch's test_transformers.py
    test_invalid_fused_inputs_dim_3), so the math backend runs: the mask turned into the compute dtype's additive
    mask, heads x N x N scores, their softmax. A frozen tower's forward holds both masks (1 + c bytes) beside the
    scores and their softmax; a trained tower's backward (its blocks recomputed one at a time: ms-swift 2.x's
    vit_use_gc, v2.5.2 swift/llm/sft.py:259-260, swift/llm/utils/utils.py:427-451) the softmax's output and the
    gradients of the probabilities and of the scores, three of heads x N x N. Counted in the compute dtype c: a lower
    bound where torch's math path upcasts half precision."""
    _, c = saved_dtype_bytes(profile)
    n2 = patches * patches
    forward = n2 * (1 + c + 2 * v.heads * c)
    return max(forward, 3 * v.heads * c * n2) if trained else forward


def masked_tower_saved_bytes(v: VisionSpec, patches: int, profile: str) -> int:
    """A trained Qwen2-VL tower under masked_tower_bytes' SDPA and no checkpointing: every live block keeps its
    softmax's output (heads x N x N, the math backend's, for the product with v and its own backward)."""
    _, c = saved_dtype_bytes(profile)
    return (v.layers - v.unused_layers) * v.heads * c * patches * patches
