"""Deterministic routing for the sim's trace of MoE experts under transformers' `eager` dispatch.

The eager experts loop (every family's `*Experts.forward` in transformers 5.23, e.g. Qwen3MoeExperts, GptOssExperts)
asks the routing which experts were hit (`nonzero`) and which tokens each got (`torch.where`): data-dependent
shapes that fake tensors cannot give. Here the loop runs the same ops on the real module's weights with each
expert's token count fixed by the plan: the busiest expert takes `imbalance` times its fair share of the
`tokens x top_k` pairs (at most every token once, planner.estimate.moe.busiest_expert_tokens), the others split the rest
evenly. The saved tensors and transients are those of a real step whose router sent that many tokens to each
expert. (The default `grouped_mm` dispatch has static shapes and is traced as it is: probes.sim.fake_grouped_mm.)
"""

from __future__ import annotations

import types
from contextlib import contextmanager

import torch
import torch.nn.functional as F


def expert_counts(tokens: int, top_k: int, experts: int, imbalance: float) -> list[int]:
    """Tokens per expert: the busiest first, the rest of the tokens x top_k pairs split evenly over the others."""
    from planner.estimate.moe import busiest_expert_tokens
    from planner.model.moespec import MoESpec

    pairs = tokens * top_k
    busiest = busiest_expert_tokens(tokens, MoESpec(experts, top_k, 1, 1), imbalance) if experts > 1 else pairs
    rest, others = pairs - busiest, experts - 1
    return [busiest] + [rest // others + (i < rest % others) for i in range(others)]


def _eager_forward(self, hidden_states, top_k_index, top_k_weights):
    """transformers' eager experts loop (models/*/modeling_*.py, `*Experts.forward`) over fixed token counts."""
    out = torch.zeros_like(hidden_states)
    tokens, top_k = top_k_index.shape
    for e, n in enumerate(expert_counts(tokens, top_k, self.num_experts, self._memplan_imbalance)):
        if not n:
            continue
        token_idx = torch.arange(n, device=hidden_states.device)
        top_k_pos = torch.zeros(n, dtype=torch.long, device=hidden_states.device)
        state = hidden_states[token_idx]
        if self.is_transposed:  # gpt-oss: state @ W + b, its own clamped SwiGLU
            gate_up = state @ self.gate_up_proj[e]
        else:
            gate_up = F.linear(state, self.gate_up_proj[e])
        if self.has_bias:
            gate_up = gate_up + self.gate_up_proj_bias[e]
        if hasattr(self, "_apply_gate"):
            h = self._apply_gate(gate_up)
        else:
            gate, up = gate_up.chunk(2, dim=-1)
            h = self.act_fn(gate) * up
        h = h @ self.down_proj[e] if self.is_transposed else F.linear(h, self.down_proj[e])
        if self.has_bias:
            h = h + self.down_proj_bias[e]
        h = h * top_k_weights[token_idx, top_k_pos, None]
        out.index_add_(0, token_idx, h.to(out.dtype))
    return out


@contextmanager
def routed_eager_experts(model, imbalance: float):
    """Inside: every experts module (stacked 3-D weights, transformers' @use_experts_implementation) that runs the
    eager dispatch takes the fixed counts; dense MLPs named alike (Phi-3's fused gate_up_proj Linear) are left."""
    patched = []
    for m in model.modules():
        cfg = getattr(m, "config", None)
        stacked = isinstance(getattr(m, "gate_up_proj", None), torch.nn.Parameter) and m.gate_up_proj.dim() == 3
        if stacked and hasattr(m, "is_transposed") and getattr(cfg, "_experts_implementation", None) == "eager":
            m._memplan_imbalance = imbalance
            m.forward = types.MethodType(_eager_forward, m)
            patched.append(m)
    try:
        yield patched
    finally:
        for m in patched:
            del m.forward
