"""What a hybrid model's layers save for backward beyond a Llama layer's (planner/model/hybrid.py: Qwen3-Next, Qwen3.5,
Qwen3.5-MoE), as transformers 5.25 runs them without flash-linear-attention and causal-conv1d (models/qwen3_5/
modeling_qwen3_5.py; Qwen3-Next's modeling_qwen3_next.py is the same code with fused input projections).

Without the `fla` package transformers falls back to torch_chunk_gated_delta_rule (:319-462), written in PyTorch and
differentiated by autograd, and every step of it keeps fp32 tensors: that fallback is what this module prices (fla's
Triton kernels keep fewer tensors, not measured here: a run with fla installed is over-planned).
Per Gated DeltaNet layer (tokens T = batch x seq, P = batch x the sequence padded to the 64-token chunk, Hv value
heads, dk and dv their head widths; q and k repeated to Hv heads when Hk < Hv, :366-368):
- the padding-masked input the four input projections share (:656, apply_mask_to_padding_states), in_proj_qkv's
  output the conv reads and the conv's output silu reads (K - 1 positions longer: padding, :266-272), sigmoid(b),
  and softplus's fp32 input and output (:700-702);
- the chunked rule in fp32: l2norm's q and k and rsqrt (:376-378), the padded q, k and v, and beta (:385-386, 392-393),
  k x beta, the five chunk x chunk products per token and head (the pairwise decay, k_beta k^T, q k^T, the UT system
  and the intra-chunk attention: :406-414), solve_triangular's outputs new_values and k_cumdecay (:423-424), the
  decayed q and k (:439-440), three exp() outputs, and in the sequential scan over P / 64 chunks (:443-450) each
  chunk's recurrent state (Hv x dk x dv) and v_new (Hv x 64 x dv): a state per chunk, not a cache per token;
- the gated RMSNorm over each value head (Qwen3_5RMSNormGated, :200-215): the fp32 copy, rsqrt, the normalized and
  weighted tensors in the compute dtype, z in fp32 and silu(z) in fp32, and out_proj's input.
Measured against the sim (tests/probes/test_family_accuracy.py) on Qwen3.5-27B's layer cut to 4 layers: the formula
equals the traced module bytes to 0.1% in bf16 (linear_attn, in_proj_qkv and norm together). Under torch AMP the
chunked rule's matmuls run in bf16 (autocast casts their fp32 operands): approximated by the same fp32 tensors.
The full-attention layers' output gate (modeling_qwen3_5.py:891-894) saves sigmoid(gate) and o_proj's input besides
Llama's attention.
"""

from __future__ import annotations

from planner.model.modelspec import TextSpec


def _bytes(profile: str) -> tuple[int, int]:
    return {"amp": (4, 2), "half": (2, 2), "fp32": (4, 4)}[profile]


def padded(seq: int, chunk: int) -> int:
    return -(-seq // chunk) * chunk


def delta_rule_saved_bytes(t: TextSpec, batch: int, seq: int) -> int:
    """torch_chunk_gated_delta_rule's saved fp32 tensors, per layer (the module docstring's second item)."""
    la = t.linear
    tokens, hv, dk, dv, c = batch * seq, la.v_heads, la.k_dim, la.v_dim, la.chunk
    p = batch * padded(seq, c)
    l2 = 4 * tokens * hv * (2 * dk + 2)
    chunked = 4 * p * hv * (dk + dk + dv + 1)  # padded q, k, v and beta
    chunked += 4 * p * hv * dk  # k x beta
    chunked += 5 * 4 * p * hv * c  # chunk x chunk products
    chunked += 4 * p * hv * (dv + dk)  # new_values, k_cumdecay
    chunked += 4 * p * hv * 2 * dk + 3 * 4 * p * hv  # decayed q and k, exp() outputs
    scan = (p // c) * 4 * hv * dk * dv + 4 * p * hv * dv  # a state per chunk, v_new
    return l2 + chunked + scan


def autocast_matmul_bytes(t: TextSpec, batch: int, seq: int) -> int:
    """Under torch AMP the chunked rule's matmuls (:406-407, 445-450) save bf16 casts of their fp32 operands: on top
    of the fp32 tensors other ops keep (k_beta, key twice, query, k_cumdecay, two casts of each chunk's state), in place
    of those only the matmuls read (v_new, the three chunk x chunk products, the decayed q and k)."""
    la = t.linear
    hv, dk, dv, c = la.v_heads, la.k_dim, la.v_dim, la.chunk
    p = batch * padded(seq, c)
    return p * hv * (2 * 5 * dk - 2 * (3 * c + 2 * dk)) + (p // c) * 4 * hv * dk * dv


def linear_attention_saved_bytes(t: TextSpec, batch: int, seq: int, profile: str) -> int:
    """One Gated DeltaNet layer's saved tensors (its input norm and MLP are the Llama layer's)."""
    la = t.linear
    c = _bytes(profile)[1]
    tokens, hv, vd, kernel = batch * seq, la.v_heads, la.value_dim, la.conv_kernel
    casts = (4 if profile == "amp" else 1) * c * tokens * t.hidden  # the masked input, once per projection under AMP
    conv = c * tokens * la.conv_dim + c * batch * (seq + kernel - 1) * la.conv_dim
    gates = c * tokens * hv + 2 * 4 * tokens * hv  # sigmoid(b); softplus's fp32 input and output
    norm = tokens * vd * (4 + 2 * c + 4 + 4) + 4 * tokens * hv + c * tokens * vd  # and out_proj's input
    amp = autocast_matmul_bytes(t, batch, seq) if profile == "amp" else 0
    return casts + conv + gates + delta_rule_saved_bytes(t, batch, seq) + amp + norm


def output_gate_saved_bytes(t: TextSpec, tokens: int, profile: str) -> int:
    """A hybrid model's full-attention layer: sigmoid(gate) and the gated output o_proj reads (0 for the others)."""
    if t.linear is None:
        return 0
    return 2 * _bytes(profile)[1] * tokens * t.q_dim


def recurrent_state_bytes(t: TextSpec, sequences: int, compute_bytes: int) -> int:
    """What HF's generation cache keeps for the linear-attention layers, whatever the length (0 without them): per
    layer and sequence the recurrent state in fp32 (zeros_like the chunked rule's fp32 final state) and the conv state,
    conv_dim x conv_kernel in the compute dtype (transformers cache_utils.py LinearAttentionLayer, :1228-1263)."""
    if t.linear is None:
        return 0
    la = t.linear
    per = 4 * la.v_heads * la.k_dim * la.v_dim + compute_bytes * la.conv_dim * la.conv_kernel
    return la.layers * sequences * per
