"""Memory and communication terms of routed (mixture-of-experts) layers, per rank.

What a routed layer saves for backward follows transformers 5.23's modules (models/*/modeling_*.py, the
`*TopKRouter` classes, and integrations/moe.py's `grouped_mm_experts_forward`, the dispatch every MoE family
uses by default): the router's input, its fp32 softmax and top-k indices; then every (token, expert) pair,
`tokens x top_k` of them, gathered, run through the experts' gate-up and down projections and weighted. The
total over experts does not depend on how tokens are spread across them, so on one rank the routing's
balance changes nothing saved. It matters where the experts are split across ranks (expert parallelism):
the rank holding the busiest experts receives `imbalance` times its fair share of the pairs, and that
rank's memory is the plan's (`--expert-imbalance`, default 2.0). The eager dispatch (a config's
`experts_implementation: eager`, a loop over experts) saves the same per pair plus index_add_'s source, and its
backward runs one expert at a time: that transient is sized by the busiest expert, the one place the imbalance
moves memory on a rank holding every expert.

`grouped_mm` is not autocast-enabled: transformers casts the input to the weights' dtype, so under torch AMP
(fp32 weights) the experts run and save in fp32.
"""

from __future__ import annotations

from math import ceil

from planner.model.modelspec import TextSpec
from planner.model.moespec import MoESpec

INDEX_BYTES = 8  # int64 indices (topk, sort permutation, gathers)


def matmul_dtype_bytes(profile: str) -> int:
    """The matmul dtype's bytes under a profile (activations.saved_dtype_bytes' second value; activations reads
    this module, so it is not imported back)."""
    return 4 if profile == "fp32" else 2


def routed_pairs(tokens: int, m: MoESpec) -> int:
    """(token, expert) pairs a routed layer processes: every token goes to top_k experts; under the dense dispatch
    (Llama-4's Llama4TextMoe: every token through every expert, scored by the router) to all of them."""
    return tokens * (m.experts if m.dispatch == "dense" else m.top_k)


def rank_pairs(tokens: int, m: MoESpec) -> int:
    """Pairs the experts of the busiest rank run: this rank's own without expert parallelism; split over N ranks,
    the all-to-all brings `load` (the imbalance, at most N) times that many."""
    return ceil(routed_pairs(tokens, m) * m.load)


def busiest_expert_tokens(tokens: int, m: MoESpec, imbalance: float) -> int:
    """Tokens the busiest expert receives: `imbalance` x the fair share tokens x top_k / experts, at most every
    token once (a token picks an expert at most once)."""
    return min(tokens, ceil(imbalance * routed_pairs(tokens, m) / m.experts))


def expert_dtype_bytes(profile: str, m: MoESpec) -> int:
    """Bytes per element the experts compute and save in: grouped_mm runs in the weights' dtype (fp32 under
    torch AMP); the eager loop's F.linear is autocast (the matmul dtype)."""
    return matmul_dtype_bytes(profile) if m.dispatch in ("eager", "dense") else hidden_dtype_bytes(profile)


def router_saved_bytes(t: TextSpec, tokens: int, profile: str) -> int:
    """The router (`*TopKRouter`): its linear's input (the post-attention norm's output; autocast's copy under
    AMP; DeepSeek's fp32 copy), the fp32 softmax output, the top-k indices, and the renormalisation's operands
    (fp32)."""
    m = t.moe
    c = 4 if m.router_fp32 else matmul_dtype_bytes(profile)
    return c * tokens * t.hidden + 4 * tokens * m.experts + (INDEX_BYTES + 4) * tokens * m.top_k + 4 * tokens


def experts_saved_bytes(t: TextSpec, tokens: int, profile: str) -> int:
    """The experts over all pairs: the gathered input, the gate-up output (silu and the product keep it), the
    activation, the down projection's input and output (the routing weight's product saves it), plus the
    fp32 routing weights and three int64 index tensors (gather, permutation, inverse permutation)."""
    m = t.moe
    if m.dispatch == "dense":
        return dense_experts_saved_bytes(t, tokens, profile)
    e, s = expert_dtype_bytes(profile, m), rank_pairs(tokens, m)
    if m.experts_grad == "frozen":  # no weight gradient: grouped_mm keeps neither projection's input
        return e * s * (t.hidden + (gate_saved_widths(m) - 1) * m.expert_inter) + (4 + 3 * INDEX_BYTES) * s
    out = e * s * (2 * t.hidden + gate_saved_widths(m) * m.expert_inter) + lora_merged_weights_bytes(t, profile)
    if m.dispatch == "eager":  # index_add_ saves its source (cast to the hidden states' dtype); token, top-k indices
        return (
            out
            + hidden_dtype_bytes(profile) * s * t.hidden
            + (4 + 2 * INDEX_BYTES) * s
            + eager_weight_casts_bytes(t, profile)
        )
    return out + (4 + 3 * INDEX_BYTES) * s


def dense_experts_saved_bytes(t: TextSpec, tokens: int, profile: str) -> int:
    """Llama4TextMoe (models/llama4/modeling_llama4.py:56-83, 169-177, transformers 5.25) over every (token, expert)
    pair: the repeated input and the router's score column, both kept by their product (the residual dtype; the
    scores in the router's), then torch.bmm's input (its autocast copy under AMP, else that product), the gate-up
    output (silu and the product read its halves), silu's output and the down bmm's input; frozen experts keep
    neither bmm's input. Under AMP autocast also keeps each stacked weight's half copy (eager_weight_casts_bytes)."""
    m, h, i = t.moe, t.hidden, t.moe.expert_inter
    r, c, s = hidden_dtype_bytes(profile), matmul_dtype_bytes(profile), rank_pairs(tokens, m)
    scores = r * s * h + c * s
    if m.experts_grad == "frozen":
        return scores + c * s * 3 * i
    return scores + c * s * (h + 4 * i) + eager_weight_casts_bytes(t, profile) + lora_merged_weights_bytes(t, profile)


def eager_weight_casts_bytes(t: TextSpec, profile: str) -> int:
    """Under torch AMP the eager loop's F.linear casts each expert's weight slice to half and saves the copy for
    backward (autocast caches casts of leaf parameters only, and `gate_up_proj[e]` is a view): every local
    expert's weights (and biases), in half, per routed layer."""
    if profile != "amp":
        return 0
    m = t.moe
    per_expert = 3 * m.expert_inter * t.hidden + (2 * m.expert_inter + t.hidden if m.bias else 0)
    return matmul_dtype_bytes(profile) * (m.experts // m.ep) * per_expert


def lora_merged_weights_bytes(t: TextSpec, profile: str) -> int:
    """LoRA on the stacked experts (PEFT's target_parameters) adds B @ A to each weight and the experts run on the
    merged copy, which grouped_mm saves for backward: every local expert's gate-up and down weights per routed
    layer, in the base's dtype (saved-tensor walk of a bf16 PEFT 0.21 Qwen3-MoE block: (8, 256, 512) and
    (8, 256, 256) bf16)."""
    m = t.moe
    if m.experts_grad != "lora":
        return 0
    return expert_dtype_bytes(profile, m) * (m.experts // m.ep) * 3 * m.expert_inter * t.hidden


def hidden_dtype_bytes(profile: str) -> int:
    """The residual stream's dtype: fp32 weights' under fp32 and torch AMP, half otherwise."""
    return 4 if profile in ("amp", "fp32") else 2


def gate_saved_widths(m: MoESpec) -> int:
    """Tensors of the expert width each pair saves between the two projections: the gate-up output (two
    widths, its halves are views), silu(gate) and the down projection's input; gpt-oss's clamped SwiGLU
    (GptOssExperts._apply_gate: clamp, sigmoid(alpha * gate), their product, up + 1) saves four in place of
    silu's one."""
    return 7 if m.bias else 4


def shared_expert_saved_bytes(t: TextSpec, tokens: int, profile: str) -> int:
    """Shared experts run as a dense gated MLP on every token (their input is the router's, a separate autocast
    copy per linear under AMP; the norm's half output itself where DeepSeek's router saved an fp32 copy instead);
    Qwen1.5-MoE's sigmoid gate adds its input copy, output and the product's operand."""
    m = t.moe
    if not m.shared_inter:
        return 0
    c = matmul_dtype_bytes(profile)
    casts = 2 if profile == "amp" else int(m.router_fp32 and profile == "half")
    out = casts * c * tokens * t.hidden + 4 * c * tokens * m.shared_inter
    if m.shared_gate:
        out += (c if profile == "amp" else 0) * tokens * t.hidden + c * tokens * t.hidden + 2 * c * tokens
    return out


def moe_mlp_saved_bytes(t: TextSpec, tokens: int, profile: str) -> int:
    """Everything a routed MLP block saves for backward."""
    return (
        router_saved_bytes(t, tokens, profile)
        + experts_saved_bytes(t, tokens, profile)
        + shared_expert_saved_bytes(t, tokens, profile)
    )


def backward_transient_bytes(t: TextSpec, tokens: int, profile: str) -> int:
    """Inside a routed layer's backward, at the experts' gate-up projection: the gradient of its output (every
    pair, both halves) is live beside the tensors the layer saved while grouped_mm makes from it the gradient of
    the gathered input (every pair, hidden wide) and the gate-up weight's gradient (sim probe, Mixtral cut to 4
    layers and 4 experts, bf16-pure, full checkpointing, 8 x 4,096 tokens: 3.4 GiB above the saved tensors and
    the weight gradient; debug-moe at vocabulary 256, fp32, full checkpointing, 4 x 1,024 tokens: 24 MiB)."""
    m = t.moe
    if m.dispatch == "eager":
        return eager_backward_transient_bytes(t, tokens, profile)
    merged_grad = lora_merged_weights_bytes(t, profile) * 2 // 3  # LoRA: the merged gate-up weight's gradient
    return expert_dtype_bytes(profile, m) * rank_pairs(tokens, m) * (2 * m.expert_inter + t.hidden) + merged_grad


def eager_backward_transient_bytes(t: TextSpec, tokens: int, profile: str) -> int:
    """The eager loop's backward runs one expert at a time. At the busiest expert's gate-up projection: the
    gradient of its gathered input (busiest x hidden), the stacked gate-up weight's gradient that select's
    backward makes full-size before it is added into .grad (weights' dtype), and the layer input's gradient that
    the experts' index backwards accumulate (tokens x hidden) (sim probe on debug-moe with eager dispatch, fp32,
    full checkpointing: within 0.6 MiB of the traced peak at 2,048 and 4,096 tokens, imbalance 1 and 2)."""
    m = t.moe
    w = hidden_dtype_bytes(profile)
    busiest = busiest_expert_tokens(tokens, m, m.imbalance)
    return (
        expert_dtype_bytes(profile, m) * busiest * t.hidden
        + w * (m.experts // m.ep) * 2 * m.expert_inter * t.hidden
        + w * tokens * t.hidden
    )


def routing_line(model, k, micro_tokens: int) -> str:
    """The plan's routing assumptions in one line (check and suggest print it for MoE models)."""
    m = model.text.moe
    busiest = busiest_expert_tokens(micro_tokens, m, k.expert_imbalance)
    where = (
        f"expert parallel {k.expert_parallel}: the busiest rank's experts run {min(k.expert_imbalance, k.expert_parallel):g}x "
        "its share of pairs"
        if k.expert_parallel > 1
        else "every rank holds every expert, so under grouped_mm the imbalance moves no memory"
        if m.dispatch == "grouped_mm"
        else "every token runs every expert (transformers' dense Llama4TextMoe): the imbalance moves no memory"
        if m.dispatch == "dense"
        else "every rank holds every expert; the eager loop's backward transient is sized by the busiest expert"
    )
    return (
        f"routing: top-{m.top_k} of {m.experts} experts ({m.dispatch} dispatch, transformers 5.23), "
        f"{model.active_params / 1e9:.1f}B of {model.params / 1e9:.1f}B parameters active per token; imbalance "
        f"{k.expert_imbalance:g} planned: the busiest expert takes up to {busiest:,} of a micro-batch's "
        f"{micro_tokens:,} tokens ({where})"
    )
