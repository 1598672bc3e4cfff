"""The loss knob as the probes and the bundled trainer run it (planner/estimate/recipe_terms.py plans it): the summed
next-token loss, standard (the model's logits, upcast), chunked or fused.

- chunked: torchtune's chunked cross-entropy (the head and the fp32 loss chunk by chunk);
- fused: the head and the cross-entropy computed chunk by chunk with their gradients in forward, so the
  logits are never whole: Liger's kernel on a GPU where liger-kernel imports, else a plain-torch form of it
  with Liger's chunk size (what the CPU tests run).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from planner.estimate import recipe_terms


def shifted_labels(labels: torch.Tensor) -> torch.Tensor:
    """Targets of every position (the next token's label; -100 at the end), as transformers' ForCausalLMLoss."""
    return F.pad(labels, (0, 1), value=-100)[:, 1:]


def _softcap(logits, cap):
    return torch.tanh(logits / cap) * cap if cap else logits


def chunked_loss_sum(hidden, head: torch.nn.Module, targets, softcap=None) -> torch.Tensor:
    """torchtune's chunked cross-entropy: the head and the fp32 loss over sequence chunks."""
    total = hidden.new_zeros((), dtype=torch.float32)
    for h, y in zip(
        hidden.chunk(recipe_terms.CHUNKED_LOSS_CHUNKS, dim=1), targets.chunk(recipe_terms.CHUNKED_LOSS_CHUNKS, dim=1)
    ):
        logits = _softcap(head(h).float(), softcap)
        total = total + F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=-100, reduction="sum")
    return total


class FusedLinearCrossEntropy(torch.autograd.Function):
    """Summed cross-entropy of (hidden @ weight^T) without the whole logits: each chunk's logits, loss and
    gradients are made in forward; backward returns the gradients it kept (Liger's scheme, in torch)."""

    @staticmethod
    def forward(ctx, hidden, weight, targets, chunk: int, softcap, dtype):
        grad_h = torch.empty_like(hidden)
        grad_w = torch.zeros_like(weight) if weight.requires_grad else None
        loss = hidden.new_zeros((), dtype=torch.float32)
        w = weight.to(dtype)  # the matmul dtype, cast once (autocast's cached copy)
        for start in range(0, hidden.shape[0], chunk):
            h, y = hidden[start : start + chunk].to(dtype), targets[start : start + chunk]
            raw = (h @ w.t()).float()
            logits = _softcap(raw, softcap)
            valid = y != -100
            safe = y.clamp(min=0)
            lse = torch.logsumexp(logits, dim=-1)
            loss = loss + ((lse - logits.gather(1, safe[:, None])[:, 0]) * valid).sum()
            grad = torch.softmax(logits, dim=-1)
            grad.scatter_add_(1, safe[:, None], -torch.ones_like(lse)[:, None])
            grad.mul_(valid[:, None])
            if softcap:
                grad.mul_(1 - (logits / softcap) ** 2)
            grad = grad.to(h.dtype)
            grad_h[start : start + chunk] = (grad @ w).to(grad_h.dtype)
            if grad_w is not None:
                grad_w.addmm_(grad.t().to(grad_w.dtype), h.to(grad_w.dtype))  # in place, as Liger's addmm
        ctx.save_for_backward(grad_h, grad_w)
        return loss

    @staticmethod
    def backward(ctx, g):
        grad_h, grad_w = ctx.saved_tensors  # scaled in place, as Liger does: no second copy of either
        return grad_h.mul_(g), None if grad_w is None else grad_w.mul_(g), None, None, None, None


def fused_loss_sum(hidden, head: torch.nn.Module, targets, softcap=None, dtype=None) -> torch.Tensor:
    """`dtype`: the head matmul's dtype (the autocast dtype under AMP; else the weight's)."""
    from planner.model.modelspec import TextSpec

    h2 = hidden.flatten(0, 1)
    spec = TextSpec(
        hidden=h2.shape[1],
        layers=1,
        heads=1,
        kv_heads=1,
        head_dim=1,
        intermediate=1,
        vocab=head.weight.shape[0],
        tied=False,
        max_positions=0,
    )
    liger = _liger_loss(softcap) if h2.is_cuda else None
    if liger is not None:  # Liger's Triton kernel where it imports (a GPU host)
        return liger(head.weight, h2.to(dtype or head.weight.dtype), targets.flatten())
    chunk = recipe_terms.fused_chunk_tokens(h2.shape[0], spec)
    return FusedLinearCrossEntropy.apply(h2, head.weight, targets.flatten(), chunk, softcap, dtype or head.weight.dtype)


def _liger_loss(softcap):
    """Liger's fused linear cross-entropy, summed, or None where liger-kernel does not import."""
    try:
        from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss
    except ImportError:
        return None
    return LigerFusedLinearCrossEntropyLoss(ignore_index=-100, reduction="sum", softcap=softcap)


def loss_sum(model, inputs: dict, labels: torch.Tensor | None, knobs, targets: torch.Tensor | None = None):
    """Summed next-token loss under the plan's --loss. standard: the model's logits, upcast (transformers'
    loss, labels shifted rather than logits, which would copy the largest activation of the step); `targets`:
    labels already shifted (a sequence-parallel rank's slice, recipe.parallel.local_slice)."""
    targets = shifted_labels(labels) if targets is None else targets
    if knobs.loss == "standard":
        logits = model(**inputs).logits
        return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=-100, reduction="sum")
    hidden = _trunk(model, inputs)(**inputs).last_hidden_state
    head = model.get_output_embeddings()
    cap = getattr(model.config.get_text_config(), "final_logit_softcapping", None)
    if knobs.loss == "chunked":
        return chunked_loss_sum(hidden, head, targets, cap)
    from recipe import HALF

    return fused_loss_sum(hidden, head, targets, cap, HALF.get(knobs.precision))


def _trunk(model, inputs: dict):
    """The model without its head: its decoder, or with images the VLM's own model (tower, projector, decoder)."""
    if "pixel_values" not in inputs:
        return model.get_decoder()
    return (model.get_base_model() if hasattr(model, "get_base_model") else model).model
