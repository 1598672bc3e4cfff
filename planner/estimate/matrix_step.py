"""The temporaries of a GaLore, APOLLO or Muon step, one tensor at a time, in bytes
(planner.estimate.state_terms.optimizer_step_temp_bytes calls matrix_step_temp_bytes; the states are
planner.estimate.matrix_optim's, Muon's step planner.estimate.muon_step's).

GaLoreAdamW (galore-torch 1.0 adamw.py:80-140) binds denom and norm_grad for each tensor and rebinds them only when
the next tensor computes its own, so each tensor's temporaries sit beside what the tensor stepped before it left:
the order the framework groups the parameters in decides which tensors meet (step_order). Every update_proj_gap
steps, and the first, each target's projector is recomputed by an SVD (svd_temp_bytes). GaLoreAdamW8bit keeps no
full-size local from one tensor to the next (adamw8bit.py:52-69) and steps the untargeted tensors in bitsandbytes'
kernel, in place; layer-wise, each tensor's optimizer returns before the next steps. APOLLOAdamW (apollo-torch 1.0.3,
github zhuhanqing/APOLLO 76b3472, apollo_torch/apollo.py:116-206) leaves denom and norm_grad bound the same way, and a
target's full-size scaled_grad besides, which stays bound past the untargeted tensors after it (apollo_walk_bytes).
tests/probes/test_galore_svd.py, tests/probes/test_apollo_step.py and tests/probes/test_matrix_optim.py pin them."""

from __future__ import annotations

from typing import NamedTuple

from planner.estimate.matrix_optim import (
    low_rank_target,
    projected_elements,
    projection_rank,
    trained_tensors,
)
from planner.estimate.muon_step import muon_step_temp_bytes
from planner.estimate.muonclip import muonclip_step_temp_bytes
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
    targets = [(t, True) for t in trained if low_rank_target(t, s)]
    rest = [(t, False) for t in trained if not low_rank_target(t, s)]
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
    k = s.knobs
    return state_bytes * projected_elements(k.optimizer, t.shape, k.optimizer_rank, k.optimizer_projection), full


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


def apollo_projector_temp_bytes(shape: tuple[int, ...], rank: int, state_bytes: int) -> int:
    """One APOLLO projector update (random_projector.py:139-174, every update_proj_gap steps and the first): an fp32
    copy of a half-precision gradient (.float(), :156) and the fp32 r x min(m, n) Gaussian with its scaled copy
    (stable_randn(...) / sqrt(rank), :160-166)."""
    m, n = shape
    copy = 4 * m * n if state_bytes != 4 else 0
    return copy + 2 * 4 * projection_rank("apollo-adamw", m, n, rank) * min(m, n)


class ApolloHeld(NamedTuple):
    """The bytes APOLLOAdamW's loop leaves bound after a tensor: its denom and norm_grad, the last target's
    scaled_grad, and whether norm_grad is that scaled_grad (apollo.py:201, a target's)."""

    denom: int = 0
    norm_grad: int = 0
    scaled_grad: int = 0
    aliased: bool = False


def apollo_tensor_peak_bytes(
    s: Setup, t: Tensors, target: bool, held: ApolloHeld, *, state_bytes: int, update: bool
) -> tuple[int, ApolloHeld]:
    """One tensor of APOLLOAdamW's loop (apollo.py:116-206) beside what the tensors before it left bound: (its peak,
    what it leaves). Untargeted: denom (:154), then norm_grad (:163), full size, each beside the last two and the last
    target's scaled_grad. A target: its projection (:135; a projector update's temporaries where update says so) and
    projected denom and norm_grad beside the last two, then its scaled_grad, full size (:182), beside the last
    target's, and the norm-growth limiter's division (:196) beside it: two full-size, with the projected three and the
    channel-wise scaling factor (:168-173, max(m, n) elements)."""
    full = state_bytes * (t.numel // t.count)
    before = held.denom + held.norm_grad + (0 if held.aliased else held.scaled_grad)
    if not target:
        peak = max(before + full, 2 * full + before - held.denom)
        return peak, ApolloHeld(full, full, held.scaled_grad, False)
    rank = s.knobs.optimizer_rank
    proj = state_bytes * projected_elements("apollo-adamw", t.shape, rank)
    project = apollo_projector_temp_bytes(t.shape, rank, state_bytes) if update else 0
    factor = state_bytes * max(t.shape)
    peak = max(
        before + max(project, 2 * proj),
        3 * proj + before - held.denom,
        3 * proj + factor + full + max(full, held.scaled_grad),
    )
    return peak, ApolloHeld(proj, full, full, True)


def apollo_walk_bytes(s: Setup, state_bytes: int, update: bool) -> int:
    """APOLLOAdamW's step in the framework's order (step_order), each tensor beside what the ones before it left bound
    (apollo_tensor_peak_bytes); a target repeated over the layers also follows the last target (the layer before's).
    Measured within 5% in the three orders (tests/probes/test_apollo_step.py)."""
    order, peak, held = step_order(s), 0, ApolloHeld()
    targets = [t for t, target in order if target]
    for t, target in order:
        befores = [held]
        if target and t is targets[0] and t.count > 1:
            befores.append(
                apollo_tensor_peak_bytes(s, targets[-1], True, held, state_bytes=state_bytes, update=False)[1]
            )
        for before in befores:
            tensor_peak, after = apollo_tensor_peak_bytes(s, t, target, before, state_bytes=state_bytes, update=update)
            peak = max(peak, tensor_peak)
        held = after
    return peak


def _largest(tensors: list[Tensors]) -> int:
    return max((t.numel // t.count for t in tensors), default=0)


def low_rank_steady_temp_bytes(s: Setup, state_bytes: int) -> int:
    """A step between projector updates: GaLoreAdamW's and APOLLOAdamW's walks (galore_walk_bytes,
    apollo_walk_bytes); GaLoreAdamW8bit's two full-size tensors of the largest target (its update projected back and
    scaled; measured exactly 2x); the layer-wise optimizers' two of the largest tensor (beside its one gradient:
    within 6.2% of a real hook's in transformers' apollo_adamw_layerwise and galore_adamw_layerwise,
    tests/probes/test_layerwise_low_rank.py)."""
    k = s.knobs
    if k.optimizer == "galore-adamw" and not k.optimizer_in_backward:
        return galore_walk_bytes(s, state_bytes, update=False)
    if k.optimizer == "apollo-adamw" and not k.optimizer_in_backward:
        return apollo_walk_bytes(s, state_bytes, update=False)
    trained = trained_tensors(s)
    if k.optimizer == "galore-adamw-8bit":
        trained = [t for t in trained if low_rank_target(t, s)]
    return 2 * state_bytes * _largest(trained)


def projector_update_temp_bytes(s: Setup, state_bytes: int) -> int:
    """A projector-update step: GaLoreAdamW's walk with each target's SVD, APOLLOAdamW's with each target's random
    projector; the largest target's SVD alone for GaLoreAdamW8bit and layer-wise GaLore; none for layer-wise APOLLO
    (planned at its steady two full-size tensors)."""
    k = s.knobs
    if k.optimizer == "apollo-adamw" and not k.optimizer_in_backward:
        return apollo_walk_bytes(s, state_bytes, update=True)
    if k.optimizer not in ("galore-adamw", "galore-adamw-8bit"):
        return 0
    if k.optimizer == "galore-adamw" and not k.optimizer_in_backward:
        return galore_walk_bytes(s, state_bytes, update=True)
    shapes = [t.shape for t in trained_tensors(s) if low_rank_target(t, s)]
    return max((svd_temp_bytes(shape, state_bytes) for shape in shapes), default=0)


def low_rank_step_temp_bytes(s: Setup, state_bytes: int) -> int:
    """The steady step's temporaries or a projector update's, the larger."""
    return max(low_rank_steady_temp_bytes(s, state_bytes), projector_update_temp_bytes(s, state_bytes))


def matrix_step_temp_bytes(s: Setup, state_bytes: int) -> int:
    """The temporaries of a GaLore, APOLLO or Muon step (planner.estimate.state_terms.optimizer_step_temp_bytes)."""
    if s.knobs.optimizer == "muon":
        return muon_step_temp_bytes(s, state_bytes)
    if s.knobs.optimizer == "muonclip":
        return muonclip_step_temp_bytes(s, state_bytes)
    return low_rank_step_temp_bytes(s, state_bytes)
