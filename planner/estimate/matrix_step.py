"""The temporaries of a GaLore, APOLLO or Muon step, one tensor at a time, in bytes
(planner.estimate.state_terms.optimizer_step_temp_bytes calls matrix_step_temp_bytes; the states are
planner.estimate.matrix_optim's).

GaLoreAdamW (galore-torch 1.0 adamw.py:80-140) binds denom and norm_grad for each tensor and rebinds them only when
the next tensor computes its own, so each tensor's temporaries sit beside what the tensor stepped before it left:
the order the framework groups the parameters in decides which tensors meet (step_order). Every update_proj_gap
steps, and the first, each target's projector is recomputed by an SVD (svd_temp_bytes). GaLoreAdamW8bit keeps no
full-size local from one tensor to the next (adamw8bit.py:52-69) and steps the untargeted tensors in bitsandbytes'
kernel, in place; layer-wise, each tensor's optimizer returns before the next steps. APOLLO is planned as two
full-size temporaries of the largest tensor, as measured in transformers' order. tests/probes/test_galore_svd.py and
tests/probes/test_matrix_optim.py pin them."""

from __future__ import annotations

from planner.estimate.matrix_optim import (
    MUON_ADAMW_ROLES,
    low_rank_target,
    projected_elements,
    trained_tensors,
)
from planner.estimate.setup import Setup
from planner.frameworks import adapter
from planner.model.shapes import Tensors


def svd_temp_bytes(shape: tuple[int, ...], state_bytes: int) -> int:
    """One GaLore projector update (galore_projector.py:69-98): the fp32 copy of a half-precision gradient, the
    working copy torch.linalg.svd factors in place, and U, S and Vh of full_matrices=False (k = min(m, n)), all fp32.
    Measured with the CPU allocator within 2% (LAPACK's workspace, the rest); cuSOLVER's workspace is not measured."""
    m, n = shape
    k = min(m, n)
    copy = 4 * m * n if state_bytes != 4 else 0
    return copy + 4 * m * n + 4 * (m * k + k + k * n)


def step_order(s: Setup) -> list[tuple[Tensors, bool]]:
    """The trained tensors in the order the framework's optimizer steps them (Framework.low_rank_order, cited there),
    each with whether it is a target: LLaMA-Factory's puts the head right after the embedding."""
    k = s.knobs
    trained = trained_tensors(s)
    targets = [(t, True) for t in trained if low_rank_target(t, k.optimizer_targets)]
    rest = [(t, False) for t in trained if not low_rank_target(t, k.optimizer_targets)]
    vectors = [r for r in rest if len(r[0].shape) < 2]
    matrices = [r for r in rest if len(r[0].shape) >= 2]
    order = adapter(k.framework, k.release).low_rank_order
    if order == "vectors-first":
        return vectors + matrices + targets
    if order == "targets-first":
        return targets + matrices + vectors
    return rest + targets


def held_bytes(s: Setup, t: Tensors, target: bool, state_bytes: int) -> tuple[int, int]:
    """(denom, norm_grad) GaLoreAdamW's loop leaves bound after one tensor (adamw.py:113-126): a target's denom at the
    projected shape and its update projected back, full size; an untargeted tensor's both full size."""
    full = state_bytes * (t.numel // t.count)
    if not target:
        return full, full
    return state_bytes * projected_elements(s.knobs.optimizer, t.shape, s.knobs.optimizer_rank), full


def galore_walk_bytes(s: Setup, state_bytes: int, update: bool) -> int:
    """GaLoreAdamW's step in order: an untargeted tensor's denom and update beside the last tensor's update (and its
    denom, until the new one replaces it); a target's projection (its SVD on an update step) beside the last
    tensor's denom and update, then its update projected back and scaled, two full-size. A target repeated over the
    layers also follows the last target (the layer before's)."""
    order, peak, prev = step_order(s), 0, (0, 0)
    targets = [t for t, target in order if target]
    for t, target in order:
        full = state_bytes * (t.numel // t.count)
        befores = [prev]
        if target and t is targets[0] and t.count > 1:
            befores.append(held_bytes(s, targets[-1], True, state_bytes))
        for denom, norm_grad in befores:
            if target:
                svd = svd_temp_bytes(t.shape, state_bytes) if update else 0
                peak = max(peak, denom + norm_grad + svd, 2 * full)
            else:
                peak = max(peak, norm_grad + full + max(denom, full))
        prev = held_bytes(s, t, target, state_bytes)
    return peak


def _largest(tensors: list[Tensors]) -> int:
    return max((t.numel // t.count for t in tensors), default=0)


def low_rank_steady_temp_bytes(s: Setup, state_bytes: int) -> int:
    """A step between projector updates: GaLoreAdamW's walk (galore_walk_bytes); GaLoreAdamW8bit's two full-size
    tensors of the largest target (its update projected back and scaled; measured exactly 2x); APOLLO's and the
    layer-wise optimizers' two of the largest tensor (measured 1.92-2.20x in transformers' order)."""
    k = s.knobs
    if k.optimizer == "galore-adamw" and not k.optimizer_in_backward:
        return galore_walk_bytes(s, state_bytes, update=False)
    trained = trained_tensors(s)
    if k.optimizer == "galore-adamw-8bit":
        trained = [t for t in trained if low_rank_target(t, k.optimizer_targets)]
    return 2 * state_bytes * _largest(trained)


def galore_svd_temp_bytes(s: Setup, state_bytes: int) -> int:
    """A projector-update step: GaLoreAdamW's walk with each target's SVD; the largest target's SVD alone for
    GaLoreAdamW8bit and layer-wise; none for APOLLO (a random projector)."""
    k = s.knobs
    if k.optimizer not in ("galore-adamw", "galore-adamw-8bit"):
        return 0
    if k.optimizer == "galore-adamw" and not k.optimizer_in_backward:
        return galore_walk_bytes(s, state_bytes, update=True)
    shapes = [t.shape for t in trained_tensors(s) if low_rank_target(t, k.optimizer_targets)]
    return max((svd_temp_bytes(shape, state_bytes) for shape in shapes), default=0)


def low_rank_step_temp_bytes(s: Setup, state_bytes: int) -> int:
    """The steady step's temporaries or a projector update's, the larger."""
    return max(low_rank_steady_temp_bytes(s, state_bytes), galore_svd_temp_bytes(s, state_bytes))


def muon_step_temp_bytes(s: Setup, state_bytes: int) -> int:
    """Muon's step, one matrix at a time (torch 2.13 optim/_muon.py:308-340): the Nesterov update in the parameter's
    dtype, then Newton-Schulz on a bf16 copy with two iterates alive (:55-66), so state_bytes + 3 x 2 bytes an element
    of the largest hidden matrix; AdamW's two full-size temporaries for the rest, the larger decides. Measured within
    15% above (tests/probes/test_matrix_optim.py)."""
    trained = trained_tensors(s)
    hidden = [t.numel // t.count for t in trained if len(t.shape) == 2 and t.role not in MUON_ADAMW_ROLES]
    rest = [t.numel // t.count for t in trained if not (len(t.shape) == 2 and t.role not in MUON_ADAMW_ROLES)]
    if s.lora:
        hidden, rest = (
            [max(t.shape) * s.knobs.lora_rank for t in s.model.tensors if t.adapted(s.knobs.lora_targets)],
            [],
        )
    return max(max(hidden, default=0) * (state_bytes + 3 * 2), 2 * state_bytes * max(rest, default=0))


def matrix_step_temp_bytes(s: Setup, state_bytes: int) -> int:
    """The temporaries of a GaLore, APOLLO or Muon step (planner.estimate.state_terms.optimizer_step_temp_bytes)."""
    if s.knobs.optimizer == "muon":
        return muon_step_temp_bytes(s, state_bytes)
    return low_rank_step_temp_bytes(s, state_bytes)
