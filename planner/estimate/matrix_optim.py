"""The optimizers whose states are not AdamW's, as the frameworks run them, in bytes: GaLore and APOLLO (the gradient of
each optimizer_targets linear projected to optimizer_rank, Adam's moments kept at the projected shape, the projection
matrix beside them; every other parameter AdamW's full moments) and Muon (one momentum buffer for each hidden matrix,
AdamW's two moments for the embeddings, the head and the vectors). planner.estimate.state_terms.optimizer_bytes calls
matrix_optimizer_bytes for them; tests/probes/test_matrix_optim.py pins each term to the states of a real step.
Their steps' temporaries: planner.estimate.matrix_step.

Read at the sources the frameworks install:
- GaLore (galore-torch 1.0, github jiaweizzhao/GaLore 2cc66f8): galore_torch/adamw.py:96-109 projects the gradient and
  makes exp_avg and exp_avg_sq zeros_like the projected one; galore_projector.py:12-21 (proj_type std) keeps an m x n
  gradient as m x r (m >= n, right: Vh[:r], r x n) or r x n (left: U[:, :r], m x r), :22-42 reverse_std, right,
  left and full (both: r x r) the other sides (knob optimizer_projection; projection_sides); :69-98 the projector from
  torch.linalg.svd(full_matrices=False) of an fp32 copy, cast back to the parameter's dtype, so r is at most
  min(m, n); every update_proj_gap steps its temporaries (matrix_step.svd_temp_bytes). GaLoreAdamW8bit (the 1.0 wheel's
  adamw8bit.py:10, 44-63) keeps bitsandbytes' Optimizer2State states of the projected gradient
  (bnb_8bit_moment_bytes) and steps the untargeted tensors in the same 8-bit kernel.
- APOLLO (apollo-torch 1.0.3, github zhuhanqing/APOLLO 76b3472): apollo_torch/apollo.py:125-142 the same projected
  moments; random_projector.py:152-172 a random r x n or m x r projector of the parameter's dtype (r not clipped);
  apollo.py:187-199 one norm per target (scaled_grad, a 0-d tensor) for its norm-growth limiter.
- Muon (Moonlight's toy_train Muon, which ms-swift 4.6 optimizers/muon.py:18 and LLaMA-Factory 0.9.5
  third_party/muon/muon.py:76-214 run): a momentum_buffer zeros_like the gradient of each 2-D parameter whose name has
  neither the embedding's nor the head's (LLaMA-Factory train/trainer_utils.py:504-511), moment1 and moment2 for
  the rest. axolotl's (axolotl-contribs-mit 0.0.6 muon/muon.py:217-225) hands it no vector at all on one GPU
  (Framework.muon_vectors; its DistMuon keeps AdamW's for them where several).
"""

from __future__ import annotations

from planner.estimate import lora
from planner.estimate.setup import Setup
from planner.estimate.trained import (
    ADAMW_8BIT_BLOCK,
    ADAMW_8BIT_MIN_SIZE,
    frozen_modules,
    trainable_params,
)
from planner.frameworks import adapter
from planner.model.modelspec import frozen_roles
from planner.model.shapes import Tensors

MUON_ADAMW_ROLES = ("embed", "head")  # what Muon leaves to AdamW beside the vectors
# bitsandbytes 0.50 optim/optimizer.py:513-522: the signed and unsigned dynamic maps, 256 fp32 each, shared by every
# 8-bit state; :531-532 an fp32 unorm_vec per tensor where max_unorm > 0, which GaLoreAdamW8bit's positional
# percentile_clipping=100 (adamw8bit.py:10) becomes once bitsandbytes 0.50 dropped that argument (commit c27dc581)
BNB_QMAP_BYTES = 2 * 256 * 4
BNB_UNORM_BYTES = 4


def projection_rank(optimizer: str, m: int, n: int, rank: int) -> int:
    """GaLore's SVD projector has at most min(m, n) singular vectors; APOLLO's random one is rank wide whatever."""
    return rank if optimizer == "apollo-adamw" else min(rank, m, n)


def projection_sides(projection: str, m: int, n: int) -> tuple[str, ...]:
    """The sides GaLore's proj_type projects an m x n gradient on (galore_projector.py:12-42; ms-swift 4.6
    optimizers/galore/galore_projector.py:50-81 alike): right, G P^T with P r x n (m x r kept); left, P^T G with P
    m x r (r x n kept); full, both (r x r kept). std takes right where m >= n (the shorter side), reverse-std left."""
    if projection == "full":
        return ("left", "right")
    if projection in ("right", "left"):
        return (projection,)
    right = (m >= n) != (projection == "reverse-std")
    return ("right",) if right else ("left",)


def projected_elements(optimizer: str, shape: tuple[int, ...], rank: int, projection: str = "std") -> int:
    """Elements of one m x n gradient once projected (galore_projector.py:12-42): the unprojected side times the
    rank, or rank x rank projected on both."""
    m, n = shape
    r, sides = projection_rank(optimizer, m, n, rank), projection_sides(projection, m, n)
    if len(sides) == 2:
        return r * r
    return m * r if sides == ("right",) else r * n


def projector_elements(
    optimizer: str, shape: tuple[int, ...], rank: int, state_bytes: int, projection: str = "std"
) -> int:
    """Elements one target's projection matrices hold: the rank times the projected side; GaLore's of an fp32
    gradient is a slice view (Vh[:r, :] or U[:, :r], galore_projector.py:83-91: only a lower-precision one is copied
    out by .type()), which keeps the whole factor of the SVD alive: Vh min(m, n) x n, U m x min(m, n)."""
    m, n = shape
    r, k = projection_rank(optimizer, m, n, rank), min(m, n)
    kept = k if optimizer != "apollo-adamw" and state_bytes == 4 else r
    return sum(kept * n if side == "right" else m * kept for side in projection_sides(projection, m, n))


def trained_tensors(s: Setup) -> list[Tensors]:
    frozen = frozen_roles(frozen_modules(s))
    return [t for t in s.model.tensors if t.role not in frozen]


def low_rank_target(t: Tensors, s: Setup) -> bool:
    """An nn.Linear weight optim_target_modules names (transformers trainer_optimizer.py:137-151 keeps nn.Linear
    modules only, matched as PEFT matches names): a decoder linear, or under all-linear the untied output head where
    the framework projects it too (Framework.low_rank_head: transformers' all-linear takes every nn.Linear)."""
    targets = s.knobs.optimizer_targets
    if len(t.shape) != 2:
        return False
    head = t.role == "head" and targets == "all-linear" and adapter(s.knobs.framework, s.knobs.release).low_rank_head
    return head or t.adapted(targets)


def bnb_8bit_moment_bytes(elements: int) -> int:
    """bitsandbytes Optimizer2State's two moments of one tensor (0.50 optim/optimizer.py:502-529): uint8 with an fp32
    absmax per 256-element block, both fp32 below ADAMW_8BIT_MIN_SIZE elements."""
    if elements < ADAMW_8BIT_MIN_SIZE:
        return 8 * elements
    return 2 * elements + 2 * 4 * -(-elements // ADAMW_8BIT_BLOCK)


def adam_state_bytes(elements: int, optimizer: str, state_bytes: int) -> int:
    """Adam's two moments of one tensor: the parameter's dtype, or bitsandbytes' for the 8-bit variant (its unorm_vec
    beside them)."""
    if optimizer != "galore-adamw-8bit":
        return 2 * state_bytes * elements
    return bnb_8bit_moment_bytes(elements) + BNB_UNORM_BYTES


def low_rank_state_bytes(s: Setup, state_bytes: int) -> int:
    """GaLore's or APOLLO's moments: the projected shape for each target, the full one for every other trained tensor;
    APOLLO's scaled_grad norm too (one element per target)."""
    k, total = s.knobs, 0.0
    for t in trained_tensors(s):
        if low_rank_target(t, s):
            n = projected_elements(k.optimizer, t.shape, k.optimizer_rank, k.optimizer_projection)
            total += t.count * (
                adam_state_bytes(n, k.optimizer, state_bytes) + apollo_norm_bytes(k.optimizer, state_bytes)
            )
        else:
            total += t.count * adam_state_bytes(t.numel // t.count, k.optimizer, state_bytes)
    return int(total) + bnb_qmap_bytes(s)


def bnb_qmap_bytes(s: Setup) -> int:
    """GaLoreAdamW8bit's two quantisation maps, once, where any state is 8-bit."""
    k = s.knobs
    if k.optimizer != "galore-adamw-8bit":
        return 0
    sizes = [
        projected_elements(k.optimizer, t.shape, k.optimizer_rank, k.optimizer_projection)
        if low_rank_target(t, s)
        else t.numel // t.count
        for t in trained_tensors(s)
    ]
    return BNB_QMAP_BYTES if max(sizes, default=0) >= ADAMW_8BIT_MIN_SIZE else 0


def apollo_norm_bytes(optimizer: str, state_bytes: int) -> int:
    """APOLLO's norm-growth limiter keeps the last scaled gradient's norm, a 0-d tensor (apollo.py:187-199)."""
    return state_bytes if optimizer == "apollo-adamw" else 0


def low_rank_projector_bytes(s: Setup, state_bytes: int) -> int:
    """The projection matrices GaLore and APOLLO keep in their projector objects, in the parameter's dtype (the storage
    they keep alive: projector_elements)."""
    k = s.knobs
    return state_bytes * sum(
        t.count * projector_elements(k.optimizer, t.shape, k.optimizer_rank, state_bytes, k.optimizer_projection)
        for t in trained_tensors(s)
        if low_rank_target(t, s)
    )


def muon_keeps_vectors(s: Setup) -> bool:
    """Whether the framework's Muon keeps AdamW's moments for the vectors (Framework.muon_vectors, cited there):
    axolotl's MuonOptimizerFactory leaves them out of the optimizer, its DistMuon (several GPUs, v0.14.0+) keeps them."""
    rule = adapter(s.knobs.framework, s.knobs.release).muon_vectors
    return rule == "adamw" or (rule == "dropped-one-gpu" and s.world_size * s.tensor_parallel > 1)


def muon_state_bytes(s: Setup, state_bytes: int) -> int:
    """Muon's momentum buffer for each 2-D hidden matrix, AdamW's two moments for the embeddings, the head and (where
    the framework's Muon keeps them: muon_keeps_vectors) the vectors. LoRA: every adapter factor is a hidden matrix;
    DoRA's magnitudes (vectors) and trained embedding copies are not."""
    keeps = muon_keeps_vectors(s)
    if s.lora:
        dora = lora.dora_magnitude_params(s.model, s.knobs)
        copies = lora.embedding_copy_params(s.model, s.knobs)
        return (trainable_params(s) + copies + (dora if keeps else -dora)) * state_bytes
    total = 0
    for t in trained_tensors(s):
        if len(t.shape) == 2:
            total += t.numel * state_bytes * (2 if t.role in MUON_ADAMW_ROLES else 1)
        elif keeps or len(t.shape) > 2:  # a stacked-experts tensor: AdamW's (axolotl's Muon asserts 2-D, :101)
            total += t.numel * state_bytes * 2
    return total


def muonclip_state_bytes(s: Setup, state_bytes: int) -> int:
    """ms-swift's MuonClip: one momentum buffer for every trained parameter, in its dtype, whatever its group
    (swift/optimizers/muonclip.py:293-294; planner.estimate.muonclip reads the rest of it)."""
    return trainable_params(s) * state_bytes


def matrix_optimizer_bytes(s: Setup, state_bytes: int) -> int:
    """The states of a GaLore, APOLLO, Muon or MuonClip optimizer on one GPU or under DDP (their projectors included)."""
    if s.knobs.optimizer == "muon":
        return muon_state_bytes(s, state_bytes)
    if s.knobs.optimizer == "muonclip":
        return muonclip_state_bytes(s, state_bytes)
    return low_rank_state_bytes(s, state_bytes) + low_rank_projector_bytes(s, state_bytes)
