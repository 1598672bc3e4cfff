"""verl's fused log-prob head (model.use_fused_kernels, impl_backend torch: verl/utils/experimental/
torch_functional.py FusedLinearForPPO, 512 tokens of logits at a time) on real CPU tensors, traced by probes.tracker.
Run with a verl venv's python: it imports that release's own function (0.9.1 in .fwenv/verl, 0.6.1 in
.fwenv-old/verl-0.6.1). bf16 hidden states and head weight as FSDP's param_dtype holds them, no autocast.

`python probes/verl_fused_head.py TOKENS,HIDDEN,VOCAB ...` prints, as one JSON list, for each shape the bytes above the
inputs at the peak of a no-grad pass (the old log-probs, the reference) and of the update's forward and backward (the
log-probs' gradient, and with the entropy's), and verl's version."""

from __future__ import annotations

import json
import sys

import torch

from probes.tracker import LiveBytes


def _inputs(tokens: int, hidden: int, vocab: int, grad: bool):
    g = torch.Generator().manual_seed(0)
    h = (torch.randn(tokens, hidden, generator=g) / hidden**0.5).to(torch.bfloat16).requires_grad_(grad)
    w = (torch.randn(vocab, hidden, generator=g) / hidden**0.5).to(torch.bfloat16).requires_grad_(grad)
    ids = torch.randint(0, vocab, (tokens,), generator=g)
    return h, w, ids


def peak_above_inputs(tokens: int, hidden: int, vocab: int, grad: bool, entropy: bool) -> int:
    """The tracker's peak minus the inputs' bytes: a no-grad pass (grad False), or forward and backward of the
    log-probs' sum (and the entropy's, with entropy)."""
    from verl.utils.experimental.torch_functional import FusedLinearForPPO

    head = FusedLinearForPPO()  # chunk_size 512, impl_backend torch (0.9.1's default; 0.6.1 has no other)
    h, w, ids = _inputs(tokens, hidden, vocab, grad)
    with LiveBytes() as t:
        t.add_existing([h, w, ids], "params")
        base = t.live
        if not grad:
            with torch.no_grad():
                out = head(h, w, ids)
        else:
            logp, ent = head(h, w, ids)
            loss = logp.sum() + (ent.sum() if entropy else 0)
            loss.backward()
            out = (logp, ent)
        del out
    return t.peak - base


def main(tokens: int, hidden: int, vocab: int) -> dict:
    from importlib.metadata import version

    return {
        "verl": version("verl"),
        "tokens": tokens,
        "hidden": hidden,
        "vocab": vocab,
        "nograd": peak_above_inputs(tokens, hidden, vocab, False, False),
        "update": peak_above_inputs(tokens, hidden, vocab, True, False),
        "update_entropy": peak_above_inputs(tokens, hidden, vocab, True, True),
    }


if __name__ == "__main__":
    print(json.dumps([main(*(int(x) for x in shape.split(","))) for shape in sys.argv[1:]]))
