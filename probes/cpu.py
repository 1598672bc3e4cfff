"""The cpu probe: real training steps on the CPU, counted by the live-bytes tracker.

Runs the same step as the sim probe (probes.step) on real tensors, with the CPU's own code paths
(torch.autocast("cpu"), the SDPA kernel CPU picks), so sim(paths="cpu") and this probe must agree.
"""

from __future__ import annotations

import time

from probes.step import Case, build_model, inputs, train_steps, vlm_inputs, vocab_of
from probes.tracker import LiveBytes
from recipe import text_layers


def measure(case: Case, steps: int = 2, model=None) -> dict:
    """Peak live bytes of the last of `steps` steps, by category, and its wall time; `model`: one a framework built
    (probes.lf_freeze_step), else the recipe's."""
    import torch

    torch.manual_seed(0)
    model = build_model(case) if model is None else model
    if case.image_tokens:
        batch, image_tokens = vlm_inputs(case, model)
    else:
        batch, image_tokens = inputs(case, vocab_of(model)), 0
    t = LiveBytes()
    t.add_existing(list(model.parameters()) + list(model.buffers()), "params")
    t0 = time.perf_counter()
    with t:
        train_steps(case, model, t, batch, steps=steps, paths="cpu", n_layers=text_layers(case.config))
    seconds = (time.perf_counter() - t0) / steps
    seg = max(t.segments, key=lambda s: t.segments[s][0])
    from planner.evidence.store import segment_phase

    return {
        "peak_allocated_bytes": t.segments[seg][0],
        "by_category": t.by_category(t.segments[seg][1]),
        "phase": segment_phase(seg),
        "step_time_s": round(seconds, 4),
        "image_tokens": image_tokens,
    }
