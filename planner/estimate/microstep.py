"""The data-parallel collectives of a step, each with what it moves, how many calls it makes and whether it runs once
per optimizer step or on every micro-step, as the frameworks run gradient accumulation at the releases memplan models
(DeepSpeed 0.19.8, accelerate 1.16.0, transformers 5.25.0, torch 2.13):

- DDP under HF's loop: every micro-step but the last runs in accelerator.no_sync (transformers trainer.py:1944-1955,
  accelerate accelerator.py:1136): one all-reduce of the gradients per step, in 25 MiB buckets. Without no_sync
  (accelerate's sync_each_batch, accelerator.py:1245-1257) it all-reduces on every micro-step.
- ZeRO-1 reduces at the accumulation boundary only (stage_1_and_2.py:2293-2295): each gradient bucket
  (reduce_bucket_size, h x h under HF's "auto") all-reduced, since DeepSpeed's default use_multi_rank_bucket_allreduce
  (zero/config.py:119) sends every slice to the all-reduce path (average_tensor, stage_1_and_2.py:1695-1712; the
  reduce to the slices' owners only with it off), then the updated parameters all-gathered once. A bucket is flushed
  when the next gradient would overflow it, so each gradient of at least h x h elements goes alone: 35 all-reduces a
  backward on debug-llama against the 108 full buckets counted here (probes/accum.py; calls cost latency only).
- ZeRO-2 reduces in every backward, boundary or not (engine.py:3084-3086; stage_1_and_2.py:2293-2295); DeepSpeed
  refuses no_sync for it (engine.py:3227-3228) and HF's loop runs no no_sync context under DeepSpeed
  (trainer.py:1944-1948). The updated parameters are all-gathered once a step.
- ZeRO-3 also gathers every partitioned parameter in forward, module by module (partitioned_param_coordinator.py:
  310), and in backward again, except those reused within stage3_max_reuse_distance elements of the trace, which
  stay gathered (partitioned_param_coordinator.py:653-662): the last half of that distance, in forward order. Its
  gradients are reduce-scattered in every backward (stage3.py:2160-2164, 1931), bucket by bucket.
- FSDP2 gathers each unit's parameters in forward and (resharded after forward) in backward on every micro-step;
  under no_sync (set_requires_gradient_sync(False), accelerator.py:1133-1135) it reduce-scatters only on the last
  micro-step; frameworks that do not (verl, planner.frameworks.Framework.fsdp_no_sync) on every one. HSDP also
  all-reduces the shard across nodes once a step.

Ring collectives, bytes per rank (Patarasuk & Yuan 2009): all-reduce 2(N-1)/N x B; reduce-scatter, reduce to the
slices' owners and all-gather (N-1)/N x B. Pinned on 2 gloo ranks (tests/probes/test_accum.py): each kind's op, bytes
and whether it runs once a step or on every micro-step, as torch.distributed saw them.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil
from typing import Literal

from planner.estimate import fsdp, recipe_terms, zero
from planner.estimate.setup import Setup
from planner.estimate.trained import frozen_params, trainable_params
from planner.frameworks import FRAMEWORKS

DDP_BUCKET_BYTES = 25 * 2**20  # torch DistributedDataParallel's bucket_cap_mb default

Op = Literal["all-reduce", "all-gather", "reduce-scatter", "reduce"]


@dataclass(frozen=True)
class Collective:
    """One kind of collective a step runs: `tensor_bytes` of the whole tensor (every rank's gradients, the gathered
    parameters) over `ranks` ranks in `calls` calls, once per step or on every micro-step."""

    op: Op
    tensor_bytes: float
    calls: int
    ranks: int
    per_micro_step: bool
    what: str

    @property
    def bytes_per_rank(self) -> float:
        """Bytes each rank sends for one occurrence (ring algorithms)."""
        ring = (self.ranks - 1) / self.ranks if self.ranks > 1 else 0.0
        return (2 if self.op == "all-reduce" else 1) * ring * self.tensor_bytes

    def occurrences(self, grad_accum: int) -> int:
        return grad_accum if self.per_micro_step else 1


def no_sync_of(s: Setup) -> bool:
    """Whether the framework's loop skips gradient synchronisation on all but the last micro-step (DDP and FSDP):
    HF's loop and the bundled trainer do; verl's FSDP engine does not (Framework.fsdp_no_sync)."""
    return s.knobs.fsdp == "off" or FRAMEWORKS[s.knobs.framework].fsdp_no_sync


def collectives(s: Setup, no_sync: bool | None = None) -> list[Collective]:
    """The data-parallel collectives of one optimizer step (none on one rank); `no_sync` overrides the framework's
    choice for DDP and FSDP (False: they synchronise on every micro-step)."""
    sync_last_only = no_sync_of(s) if no_sync is None else no_sync
    if s.knobs.fsdp != "off":
        return fsdp_collectives(s, sync_last_only)
    n, z = s.world_size, s.knobs.zero_stage
    if n == 1:
        return []
    g = 2 if s.knobs.precision != "fp32" else 4
    G = trainable_params(s) * (4 if z == 0 and s.knobs.precision != "bf16-pure" else g)
    # an Omni's resident talker never runs (ModelSpec.active_params) nor steps: no gather or update of it moves
    W = (trainable_params(s) + frozen_params(s) - s.model.resident_params()) * g
    zs = zero.of(s)  # reduce_bucket_size h x h under "auto", allgather_bucket_size 5e8, or the JSON's own
    buckets = max(1, int(G // max(1, zs.reduce_bucket_size * g)))
    gathers = max(1, int(W // g // max(1, zs.allgather_bucket_size)))
    if z == 0:
        calls = ceil(G / DDP_BUCKET_BYTES)  # DDP's buckets close past the cap (reducer.cpp): 2 on debug-llama
        return [Collective("all-reduce", G, calls, n, not sync_last_only, "gradients")]
    if z in (1, 2):
        return [
            Collective("all-reduce", G, buckets, n, z == 2, "gradients"),
            Collective("all-gather", W, gathers, n, False, "updated parameters"),
        ]
    return zero3_collectives(s, G, W, g, buckets)


def zero3_collectives(s: Setup, G: float, W: float, g: int, buckets: int) -> list[Collective]:
    """ZeRO-3 on every micro-step: forward's gathers, backward's (less what stays within the reuse distance), the
    gradients' reduce-scatter; one gather call per linear module in a pass (a layer's linears, the embedding and
    the head)."""
    n, t = s.world_size, s.model.text
    params = W / g
    again = max(0.0, params - zero.of(s).max_reuse_distance / 2) / params if params else 0.0
    modules = t.layers * len(recipe_terms.layer_linears(t)) + 2
    return [
        Collective("all-gather", W, modules, n, True, "parameters (forward)"),
        Collective("all-gather", W * again, round(modules * again), n, True, "parameters (backward)"),
        Collective("reduce-scatter", G, buckets, n, True, "gradients"),
    ]


def fsdp_collectives(s: Setup, sync_last_only: bool) -> list[Collective]:
    """FSDP2: each layer unit's parameters all-gathered in forward and again in backward (not under grad-op, which
    keeps them), the root unit's once (FSDP2 does not reshard the root after forward: torch 2.13
    _fsdp_state.py:203-207), its gradients reduce-scattered in backward (compute and reduce dtypes); on 2 gloo ranks
    9 gathers and 5 reduce-scatters a micro-step on debug-llama, bytes exact (tests/probes/test_accum.py); under
    expert parallelism each rank
    gathers and reduces only its own experts, over the n / ep ranks that shard them; HSDP all-reduces the shard's
    gradients across the replicas (nodes) once a step."""
    k = s.knobs
    n = s.gpus_per_node if k.fsdp == "hybrid" else s.world_size
    W = (trainable_params(s) + frozen_params(s)) * fsdp.compute_bytes_per_param(k)
    G = trainable_params(s) * fsdp.reduce_bytes_per_param(k)
    gathers = 1 if k.fsdp == "grad-op" else 2
    layers = s.model.text.layers
    root = fsdp.root_params(s) / (trainable_params(s) + frozen_params(s))
    share, ep = 0.0, k.expert_parallel
    if ep > 1:
        share = (
            s.model.expert_params_per_layer() * s.model.text.moe.moe_layers / (trainable_params(s) + frozen_params(s))
        )
    out = [
        Collective(
            "all-gather", W * (root + gathers * (1 - root - share)), 1 + gathers * layers, n, True, "parameters"
        ),
        Collective("reduce-scatter", G * (1 - share), layers + 1, n, not sync_last_only, "gradients"),
    ]
    if share:
        out += [
            Collective("all-gather", gathers * W * share / ep, 0, max(1, n // ep), True, "expert parameters"),
            Collective("reduce-scatter", G * share / ep, 0, max(1, n // ep), not sync_last_only, "expert gradients"),
        ]
    if k.fsdp == "hybrid":
        out.append(Collective("all-reduce", G / n, 1, s.nodes, False, "replicas' gradients"))
    return out


def volume_and_calls(cs: list[Collective], grad_accum: int, per_micro_step: bool | None = None) -> tuple[float, int]:
    """(bytes each rank sends, calls) over a step's occurrences; `per_micro_step` keeps one kind only."""
    keep = [c for c in cs if per_micro_step is None or c.per_micro_step == per_micro_step]
    volume = sum(c.bytes_per_rank * c.occurrences(grad_accum) for c in keep)
    return volume, sum(c.calls * c.occurrences(grad_accum) for c in keep)
