"""Activation, logit and mask bytes of one micro-step, per rank, from the tensors autograd saves.

The counts follow the modules as transformers writes them (RMSNorm upcasting to fp32, HF's loss
upcasting logits to fp32, SDPA's flash / memory-efficient kernels that save q, k, v, out and the
log-sum-exp instead of the s x s scores), in the spirit of Korthikanti et al. 2022, "Reducing
Activation Recomputation in Large Transformer Models", section 4, adapted to HF's implementation.

Profiles (what dtype the saved tensors have):
- "amp":  fp32 weights under torch.autocast (z=0, fp16/bf16): fp32 residual stream, bf16 matmul
          inputs, and autocast casts a linear's input once per consumer (q, k, v each cast it).
- "half": the model itself is bf16/fp16 (bf16-pure, DeepSpeed bf16/fp16, LoRA on a half base).
- "fp32": everything fp32.

Worst case by design: padded batches (an attention mask is passed, so SDPA cannot use native GQA
and transformers repeats k/v to all heads, and the mask is materialised), maximum sequence length.
"""

from __future__ import annotations

from planner.estimate import linear_attention, moe
from planner.model.modelspec import TextSpec, VisionSpec

MASK_BYTES_PER_ELEMENT = 1  # transformers builds boolean 4-D masks for SDPA


def saved_dtype_bytes(profile: str) -> tuple[int, int]:
    """(residual-stream bytes, matmul-input bytes) of the saved tensors for a profile."""
    return {"amp": (4, 2), "half": (2, 2), "fp32": (4, 4)}[profile]


def rmsnorm_saved_bytes(tokens: int, hidden: int, profile: str) -> int:
    """LlamaRMSNorm: pow() saves the fp32 input (a copy unless already fp32), the weight product saves
    the normalized tensor (fp32 under amp/fp32, the model dtype under half)."""
    return tokens * hidden * (4 + (2 if profile == "half" else 4))


def norms_saved_bytes(t: TextSpec, tokens: int, profile: str) -> int:
    """A decoder layer's RMSNorms: the two before attention and the MLP read the residual stream
    (rmsnorm_saved_bytes); the norms after them (GLM-4's post_self_attn_layernorm and post_mlp_layernorm,
    modeling_glm4.py:103,109) read a linear's output in the compute dtype, so that under torch AMP too the
    normalized tensor is saved in it: the fp32 copy and a compute-dtype product."""
    post = t.traits.norms_per_layer - 2
    _, c = saved_dtype_bytes(profile)
    return 2 * rmsnorm_saved_bytes(tokens, t.hidden, profile) + post * tokens * t.hidden * (4 + c)


def sdpa_bias_saved_bytes(batch: int, seq: int, profile: str) -> int:
    """SDPA turns a boolean mask into a float bias in the query dtype on every call
    (aten attention.cpp, convert_boolean_attn_mask) and the kernel saves it for backward."""
    _, c = saved_dtype_bytes(profile)
    return c * batch * seq * seq


def llama_attention_saved_bytes(t: TextSpec, batch: int, seq: int, profile: str) -> int:
    """q/k/v/o projections and SDPA: linear inputs (cast per consumer under amp), rotated q, k and v
    (repeated to all heads when a mask is passed: transformers' `use_gqa_in_sdpa`; flash-attention takes them
    unrepeated), output, lse, and the float bias made from the padding mask (SDPA only)."""
    _, c = saved_dtype_bytes(profile)
    tokens = batch * seq
    casts = (3 if profile == "amp" and not t.traits.fused_qkv else 1) * c * tokens * t.hidden
    kv_width = t.q_dim if t.kv_heads < t.heads and t.attention != "flash" else t.kv_dim  # flash: native GQA
    qkvo = c * tokens * (2 * t.q_dim + 2 * kv_width)
    lse = 4 * tokens * t.heads
    bias = sdpa_bias_saved_bytes(batch, seq, profile) if t.attention == "sdpa" else 0
    return (
        casts
        + qkvo
        + lse
        + bias
        + qk_norm_saved_bytes(t, tokens, profile)
        + fused_qkv_view_bytes(t, tokens, profile)
        + rotary_cat_saved_bytes(t, tokens, profile)
        + linear_attention.output_gate_saved_bytes(t, tokens, profile)
    )


def rotary_cat_saved_bytes(t: TextSpec, tokens: int, profile: str) -> int:
    """GLM-4's rotary (modeling_glm4.py:176-195, transformers 5.25): each layer cuts cos and sin to the rotary dims
    and repeats them (both saved by the products with q and k, in the residual dtype), and concatenates q back
    head-major, so that SDPA's output is head-major and o_proj reads a contiguous copy of it (:259)."""
    if not t.rotary_cat_dim:
        return 0
    r, c = saved_dtype_bytes(profile)
    return tokens * (2 * r * t.rotary_cat_dim + c * t.q_dim)


def mla_attention_saved_bytes(t: TextSpec, batch: int, seq: int, profile: str) -> int:
    """DeepSeek's latent attention (transformers modeling_deepseek_v3.py, DeepseekV3Attention): the hidden input
    (one autocast copy per projection reading it under AMP), the q bottleneck's norm and q_b's input, the kv
    latent's norm and kv_b's input, q and k built whole at the q/k head size, kv_b's output (v is a view of it,
    which keeps all of it), SDPA's output and log-sum-exp, and the mask's float bias. v's head size differs
    from q's, so CUDA runs the memory-efficient kernel (never flash), which saves q, k and v themselves."""
    _, c = saved_dtype_bytes(profile)
    m, tokens, heads = t.mla, batch * seq, t.heads
    norm_profile = "half" if profile == "amp" else profile  # the norms take the projections' half outputs
    casts = (2 if profile == "amp" else 1) * c * tokens * t.hidden
    q_path = (
        rmsnorm_saved_bytes(tokens, m.q_lora_rank, norm_profile) + c * tokens * m.q_lora_rank if m.q_lora_rank else 0
    )
    kv_path = rmsnorm_saved_bytes(tokens, m.kv_lora_rank, norm_profile) + c * tokens * m.kv_lora_rank
    qk = 2 * c * tokens * heads * m.qk_head_dim
    kv_b = c * tokens * heads * (m.qk_nope_head_dim + m.v_head_dim)
    out = c * tokens * heads * m.v_head_dim + 4 * tokens * heads
    bias = sdpa_bias_saved_bytes(batch, seq, profile) if t.attention == "sdpa" else 0
    return casts + q_path + kv_path + qk + kv_b + out + bias


def fused_qkv_view_bytes(t: TextSpec, tokens: int, profile: str) -> int:
    """Phi-3's fused qkv_proj (transformers modeling_phi3.py): v is a slice of the fused output, and without
    grouped kv heads it reaches SDPA unrepeated, so saving it keeps the whole q+k+v storage alive: q and k's
    widths on top of v's (sim probe, Phi-3-mini: -6.1% fp32 / -5.1% bf16-pure at micro 4 x 2048 without it)."""
    if not t.traits.fused_qkv or t.kv_heads < t.heads:
        return 0
    _, c = saved_dtype_bytes(profile)
    return c * tokens * (t.q_dim + t.kv_dim)


def qk_norm_saved_bytes(t: TextSpec, tokens: int, profile: str) -> int:
    """Qwen3's and Gemma-3's q_norm and k_norm (transformers modeling_qwen3.py / modeling_gemma3.py): an RMSNorm
    over every head of q and of k, saving what the family's other norms save, at the widths of q and k (OLMoE:
    one norm over all of q and one over all of k, the same widths)."""
    width = t.q_dim + t.kv_dim
    if t.traits.l2_qk_norm:  # Llama-4's weightless norm: its fp32 input and rsqrt (sim: 193.5 MiB of a layer's 547)
        return 4 * tokens * (width + t.heads + t.kv_heads)
    if not t.qk_norm:
        return 0
    if t.traits.fp32_norms:
        return tokens * width * 8
    # under AMP the norms take the projections' half outputs, so they give back half tensors (as under "half")
    return rmsnorm_saved_bytes(tokens, width, "half" if profile == "amp" else profile)


def eager_scores_saved_bytes(t: TextSpec, batch: int, seq: int, profile: str) -> int:
    """Eager attention (Gemma-2: SDPA cannot softcap) saves the s x s scores: tanh output (softcap),
    the fp32 softmax output and its cast back to the matmul dtype."""
    _, c = saved_dtype_bytes(profile)
    per_score = 4 + (c if c != 4 else 0) + (c if t.final_logit_softcap else 0)
    if t.sinks and profile != "amp":  # gpt-oss: softmax in the scores' own dtype, kept for the value matmul
        per_score = c
    return batch * t.heads * seq * seq * per_score


def eager_softmax_backward_extra_bytes(t: TextSpec, batch: int, seq: int, profile: str) -> int:
    """Eager attention's softmax backward in a layer's backward, beyond the layer's saved set: the gradient of the
    probabilities cast up to fp32 and the softmax's fp32 gradient, 8 bytes a score beside its saved fp32 output, while
    the value matmul's half-precision probabilities (c a score, none in fp32, where they are the softmax's output) and
    the gated MLP's saved tensors, whose backward ran first, are freed (transformers' eager_attention_forward:
    softmax(dtype=float32).to(query.dtype), then matmul with v). Net of what it replaces, never below 0. Measured on
    GLM-4 (glm-4-9b-chat's shapes, 4 layers) by the sim probe: tests/probes/test_eager_attention.py."""
    if t.attention != "eager" or t.sinks:
        return 0
    _, c = saved_dtype_bytes(profile)
    scores = batch * t.heads * seq * seq
    return max(0, (8 - (c if c != 4 else 0)) * scores - gated_mlp_saved_bytes(t, batch * seq, profile))


def gated_mlp_saved_bytes(t: TextSpec, tokens: int, profile: str, hidden: int = 0, inter: int = 0) -> int:
    """gate/up inputs (two casts under amp; one for Phi-3's fused gate_up_proj), act(gate), act*up operands,
    down input: 4 x tokens x inter (Phi-3: the fused gate-up output, whose halves are saved, and the rest)."""
    _, c = saved_dtype_bytes(profile)
    h, i = hidden or t.hidden, inter or t.intermediate
    casts = 2 if profile == "amp" and not t.traits.fused_gate_up else 1
    return casts * c * tokens * h + 4 * c * tokens * i


def llama_layer_bytes(
    t: TextSpec, batch: int, seq: int, profile: str, routed: bool = True, linear: bool = False
) -> int:
    """Bytes one Llama/Qwen/Mistral/Gemma-2 decoder layer saves for backward (an MoE model's routed layer, or
    with routed=False its dense one; a hybrid model's linear-attention layer with linear=True)."""
    tokens = batch * seq
    norm_bytes = (
        t.traits.norms_per_layer * tokens * t.hidden * 8
        if t.traits.fp32_norms
        else norms_saved_bytes(t, tokens, profile)
    )
    mlp = moe.moe_mlp_saved_bytes(t, tokens, profile) if t.moe and routed else gated_mlp_saved_bytes(t, tokens, profile)
    attention = (mla_attention_saved_bytes if t.mla else llama_attention_saved_bytes)(t, batch, seq, profile)
    if linear:
        attention = linear_attention.linear_attention_saved_bytes(t, batch, seq, profile)
    out = attention + mlp
    if t.attention == "eager" and not linear:
        out += eager_scores_saved_bytes(t, batch, seq, profile)
    return norm_bytes + out


def gpt2_layer_bytes(t: TextSpec, batch: int, seq: int, profile: str) -> int:
    """GPT-2 block: two LayerNorms (input + normalized output cast), attention (six tensors of width
    hidden: the fused qkv output plus two more copies the strided q/k/v views cost, as measured with
    saved_tensors_hooks in tests/planner/estimate/test_activations.py), output, dropout masks (1 byte), and
    gelu_new written in Python, which saves five tensors of the MLP width (fp32 ones under autocast,
    since pow runs in fp32)."""
    tokens = batch * seq
    r, c = saved_dtype_bytes(profile)
    ln = 2 * tokens * t.hidden * (r + c)
    attn = c * tokens * 6 * t.hidden + 4 * tokens * t.heads
    attn += {
        "sdpa": sdpa_bias_saved_bytes(batch, seq, profile),
        "flash": 0,
        "eager": eager_scores_saved_bytes(t, batch, seq, profile),
    }[t.attention]
    masks = 2 * tokens * t.hidden if t.dropout > 0 else 0
    gelu = {"amp": 14, "half": 10, "fp32": 20}[profile] * tokens * t.intermediate
    return ln + attn + masks + gelu


def layer_bytes(t: TextSpec, batch: int, seq: int, profile: str) -> int:
    """One decoder layer's saved tensors: the largest kind of layer (an MoE model's routed one, a hybrid model's
    larger of its linear- and full-attention layers)."""
    if t.linear is not None:
        return max(llama_layer_bytes(t, batch, seq, profile, linear=k) for k in (False, True))
    return (gpt2_layer_bytes if t.traits.conv1d else llama_layer_bytes)(t, batch, seq, profile)


def layers_bytes(t: TextSpec, count: int, batch: int, seq: int, profile: str) -> int:
    """`count` decoder layers' saved tensors: all of them exactly when count is the depth; fewer are taken to be
    the routed ones first (MoE models with dense layers: DeepSeek's first ones), a hybrid model's larger kind
    first, which never understates."""
    if t.linear is not None:
        by_kind = sorted(
            (
                (llama_layer_bytes(t, batch, seq, profile, linear=k), n)
                for k, n in ((True, t.linear.layers), (False, t.layers - t.linear.layers))
            ),
            reverse=True,
        )
        (big, n_big), (small, _) = by_kind
        return min(count, n_big) * big + max(0, count - n_big) * small
    whole = count * layer_bytes(t, batch, seq, profile)
    if t.nope_layers:  # Llama-4's NoPE layers skip the q/k norm: the RoPE layers are taken first
        whole -= max(0, count - (t.layers - t.nope_layers)) * qk_norm_saved_bytes(t, batch * seq, profile)
    if t.moe is None or count <= t.moe.moe_layers:
        return whole
    dense = llama_layer_bytes(t, batch, seq, profile, routed=False)
    return whole - (count - t.moe.moe_layers) * (layer_bytes(t, batch, seq, profile) - dense)


def mlp_backward_transient_bytes(t: TextSpec, batch: int, seq: int, profile: str) -> int:
    """Inside one layer's backward, at the MLP: three gradients of the MLP's width are live while the
    down projection's saved input is already freed, a net 2 x tokens x intermediate in the matmul
    dtype. GPT-2's gelu_new under autocast differentiates in fp32 (pow runs in fp32): three fp32
    gradients, net 12 bytes. Measured with the sim probe at vocabulary 256, where this moment is the
    peak (temporaries per token x intermediate: Llama 3c for every profile, GPT-2 12/14/6 bytes for
    fp32/autocast/half)."""
    if t.moe:
        return moe.backward_transient_bytes(t, batch * seq, profile)
    _, c = saved_dtype_bytes(profile)
    per = 12 if (not t.traits.gated_mlp and profile == "amp") else 2 * c
    return per * batch * seq * t.intermediate


def checkpointed_layer_bytes(t: TextSpec, batch: int, seq: int, profile: str) -> int:
    """Full (per-layer) checkpointing keeps only each layer's input hidden states."""
    r, _ = saved_dtype_bytes(profile)
    return r * batch * seq * t.hidden


def final_norm_bytes(t: TextSpec, batch: int, seq: int, profile: str) -> int:
    """Final norm plus the lm_head input: RMSNorm's output `self.weight * hidden_states.to(input_dtype)` is a new
    tensor the head saves beside the normalized one the weight product saves (transformers 5.24
    models/llama/modeling_llama.py:63-67), in the compute dtype under every profile (under amp, autocast's cast of
    it). Saved-tensor hooks on debug-llama count 12 bytes per token per hidden unit in fp32 and 8 in bf16
    (benchmarks/parallel_sharding.py; the fp32 and half profiles counted 8 and 6 before)."""
    if not t.final_norm:
        return 0
    tokens = batch * seq
    r, c = saved_dtype_bytes(profile)
    if t.traits.layernorm:
        return tokens * t.hidden * (r + c)
    return rmsnorm_saved_bytes(tokens, t.hidden, profile) + c * tokens * t.hidden


def text_activations_bytes(t: TextSpec, batch: int, seq: int, profile: str, checkpointing: str) -> int:
    """All layers' saved activations at the end of forward (recompute of one layer comes on top)."""
    if checkpointing == "full":
        return t.layers * checkpointed_layer_bytes(t, batch, seq, profile) + final_norm_bytes(t, batch, seq, profile)
    return layers_bytes(t, t.layers, batch, seq, profile) + final_norm_bytes(t, batch, seq, profile)


def logits_loss_bytes(t: TextSpec, batch: int, seq: int, profile: str) -> int:
    """Logits and loss at the start of backward: HF's ForCausalLMLoss upcasts logits to fp32 and
    cross_entropy saves the fp32 log_softmax output; its backward holds that output, the incoming
    gradient and the gradient it produces: 3 x 4 bytes per token per vocabulary entry. Final-logit
    softcapping (Gemma-2) adds the output tanh saves, in the logits' (matmul) dtype: measured with
    the sim probe by differencing two vocabulary sizes (Gemma-2, 2 and 4 layers, micro 2, sequence
    1024 and 2048): 16.0 bytes fp32, 14.0 bf16-pure, 14.0 under bf16 autocast once its bf16 copy of
    the head weight (memory.autocast_weight_copy_bytes) is taken out."""
    _, c = saved_dtype_bytes(profile)
    per = 12 + (c if t.final_logit_softcap else 0)
    return per * batch * seq * t.vocab


def half_loss_bytes(t: TextSpec, tokens: int, profile: str) -> int:
    """Logits and loss at the start of backward where the model's forward calls nn.CrossEntropyLoss on its logits in
    their own dtype (Traits.half_loss: Llama4ForConditionalGeneration, transformers 4.51-5.16): the shifted logits of
    the unmasked tokens copied out, the log_softmax output saved in that dtype, and in backward its incoming
    gradient and the gradient it produces: 3 x the matmul dtype's bytes per token per vocabulary entry. Measured on
    the real class (tests/probes/test_half_loss.py: 5.99 bytes in bf16 at transformers 4.53.0 and 5.16.1, where
    5.25's fp32 loss measures 12.0)."""
    _, c = saved_dtype_bytes(profile)
    return 3 * c * tokens * t.vocab


def attention_mask_bytes(t: TextSpec, batch: int, seq: int, profile: str) -> int:
    """The 4-D causal+padding mask built once per forward (eager attention: additive, in the matmul
    dtype; Gemma-2 builds a second one for its sliding-window layers)."""
    _, c = saved_dtype_bytes(profile)
    if t.attention == "flash":  # the kernel takes sequence lengths, not a mask
        return 0
    if t.attention == "eager":
        return (2 if t.traits.sliding_window_masks else 1) * c * batch * seq * seq
    return MASK_BYTES_PER_ELEMENT * batch * seq * seq


def cross_attention_bytes(
    t: TextSpec,
    v: VisionSpec,
    batch: int,
    image_tokens: int,
    seq: int,
    profile: str,
    live_layers: int,
    frozen: bool = False,
) -> int:
    """Llama-3.2-Vision's cross-attention over the image (planner/model/mllama.py), beyond what the decoder-layer terms
    count at the text's length. Once a step: the text x image mask in the compute dtype (under torch AMP, SDPA's
    bf16 cast of it in each layer), and the projected image states the cross-attention layers' key and value
    projections read, saved once in the compute dtype (under AMP one bf16 cast serves every projection); both held
    in the model's dtype as the inputs of the layers under a checkpoint. In each of the `live_layers`
    cross-attention layers not under a checkpoint: the key norm's fp32 input (an upcast copy below fp32), its
    normalized keys in the compute dtype and fp32 rsqrt, and SDPA's keys and values, at every query head's width
    (repeat_kv; the norm's output and the values themselves without GQA).
    Under a frozen language model (`frozen`) the projections and the key norm keep nothing for their weights: neither
    the projected states (nor autocast's copy) nor the normalized keys.
    Equal to the tensors a tiny Mllama saves on CPU in fp32, bf16 and under bf16 autocast, with and without GQA, its
    language model trained and frozen (tests/probes/test_mllama.py); the checkpointed layers' inputs are not seen by
    saved-tensor hooks."""
    if not t.cross_layers or not image_tokens:
        return 0
    r, c = saved_dtype_bytes(profile)
    keys = batch * image_tokens * v.cross_tokens_per_token
    amp = profile == "amp"
    weights = 0 if frozen else c  # what the projections and the key norm save for their weights' gradients
    once = (weights * keys * t.hidden + (0 if amp else c * seq * keys)) if live_layers else 0
    if live_layers < t.cross_layers and (amp or not live_layers):  # a checkpoint's inputs, besides what is saved
        once += r * keys * (t.hidden + seq)
    per_layer = 4 * keys * t.kv_heads + keys * t.kv_dim * (4 + weights) + 2 * c * keys * t.q_dim
    per_layer += c * seq * keys if amp else 0  # autocast casts the fp32 mask for each layer's SDPA
    return once + live_layers * per_layer
