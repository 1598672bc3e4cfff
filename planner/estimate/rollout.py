"""The rollout engine's memory on its GPUs (vLLM, SGLang), at the versions verl 0.9.1 (vLLM 0.24.0, SGLang 0.5.12)
and OpenRLHF 0.11.2 (vLLM 0.29.0) pin.

- vLLM awake: `gpu_memory_utilization` x the card's TOTAL memory, the instance's budget with weights, the profiled
  activations, the CUDA-graph estimate and the KV cache inside it (vllm 0.24 v1/worker/utils.py:405-425,
  v1/worker/gpu_worker.py:434-493; 0.29 :513-612). At start vLLM raises unless that much is free, so on shared GPUs
  the other roles' resident memory and the engine's budget must fit together.
- SGLang awake: `mem_fraction_static` (verl passes its gpu_memory_utilization) x the memory FREE before it loads the
  model holds weights and KV pool (sglang 0.5.12 model_executor/model_runner_kv_cache_mixin.py:62-75); its CUDA
  graphs and activations fall outside it.
- asleep (colocated; verl's hybrid engine sleeps at level 2 by default, vllm_async_server.py:1289-1317; OpenRLHF's
  --vllm.enable_sleep at level 1, vllm_engine.py:136-137): the weights and KV cache pools are released (level 1 copies
  the weights to pinned host memory); the CUDA-graph pool stays (captured outside the sleep pools, vllm 0.24
  gpu_worker.py:379,605,657), as with SGLang, whose graph memory verl does not release (async_sglang_server.py:504-525).
- weight sync: verl wakes the weights, pushes the trainer's weights, then wakes the KV cache
  (workers/engine_workers.py:770-830); OpenRLHF wakes the weights before its broadcast (trainer/ppo_trainer.py:311-314).
The CUDA-graph pool's size is not in any source: vLLM estimates it at start by capturing two graphs and logs
"Estimated CUDA graph memory". memplan assumes GRAPH_POOL_BYTES unless the engine runs eager (enforce_eager), and
says so in the plan's assumptions.
"""

from __future__ import annotations

from planner.config.roles import Roles
from planner.frameworks import FRAMEWORKS
from planner.model.modelspec import ModelSpec

WEIGHT_BYTES = 2  # bf16 weights in the engine (verl and OpenRLHF start it in bf16)
GRAPH_POOL_BYTES = 1 << 30  # assumed (see above): vLLM's log puts 1-8B dense models at a few hundred MiB to ~2 GiB


# the CUDA context and libraries a process holds before vLLM's start snapshot (its free memory excludes them): an
# assumed figure, as planner.estimate.memory's overhead assumes one for the trainer's processes
ENGINE_CONTEXT_BYTES = 512 << 20


def free_at_start(capacity_bytes: int) -> int:
    """What an engine alone on its GPU finds free at start: vLLM raises unless its share fits in it."""
    return capacity_bytes - ENGINE_CONTEXT_BYTES


def graph_pool_bytes(r: Roles) -> int:
    """The engine's CUDA graphs: resident from start to end, asleep or awake."""
    return 0 if r.rollout_eager else GRAPH_POOL_BYTES


def awake_bytes(r: Roles, capacity_bytes: int, others_bytes: int) -> int:
    """The engine's memory on one GPU while it generates. vLLM: its share of the total (graphs inside it). SGLang:
    its share of what the other roles leave free when it starts, and its graphs beside it."""
    if r.rollout_engine == "sglang":
        return int(r.rollout_memory * max(0, capacity_bytes - others_bytes)) + graph_pool_bytes(r)
    return int(r.rollout_memory * capacity_bytes)


def weights_bytes(model: ModelSpec, r: Roles) -> int:
    """The engine's weights on one GPU: bf16, split over its tensor-parallel ranks."""
    return model.params * WEIGHT_BYTES // r.rollout_tp


def kv_bytes_per_token(model: ModelSpec, r: Roles) -> int:
    """One token's keys and values in every layer, on one tensor-parallel rank, bf16 (vllm 0.24
    v1/kv_cache_interface.py:309-328; MLA caches the latent and rotary key, :383-398)."""
    t = model.text
    if t.mla is not None:
        return t.layers * (t.mla.kv_lora_rank + t.mla.qk_rope_head_dim) * WEIGHT_BYTES
    return 2 * t.layers * max(1, t.kv_heads // r.rollout_tp) * t.head_dim * WEIGHT_BYTES


def profile_bytes(model: ModelSpec, r: Roles, framework: str) -> int:
    """The engine's activation peak at its profile run, on one tensor-parallel rank: the hidden states (a few bf16
    copies) and the MLP's gate, up and product over the batched tokens, or the sampler's fp32 logits and
    probabilities over its rows. The engine's profile run (vllm 0.24 gpu_model_runner.py:6239-6311): a forward over
    max_num_batched_tokens and the sampler over max_num_seqs rows of the vocabulary, as the framework passes them
    (its adapter's RoleEngine.profile)."""
    tokens, seqs = FRAMEWORKS[framework].role_engine.profile
    t = model.text
    forward = tokens * (4 * t.hidden + 3 * t.intermediate // r.rollout_tp) * WEIGHT_BYTES
    return max(forward, 2 * 4 * seqs * t.vocab)


def kv_cache_tokens(model: ModelSpec, r: Roles, capacity_bytes: int, others_bytes: int, framework: str) -> int:
    """Tokens the engine's KV cache holds: its share less its weights, profile peak and graphs (vllm 0.24
    gpu_worker.py:489-493; SGLang: its share less the weights, no profile), over a token's keys and values."""
    share = awake_bytes(r, capacity_bytes, others_bytes) - (graph_pool_bytes(r) if r.rollout_engine == "sglang" else 0)
    spent = weights_bytes(model, r) + (profile_bytes(model, r, framework) if r.rollout_engine == "vllm" else 0)
    spent += graph_pool_bytes(r) if r.rollout_engine == "vllm" else 0
    return max(0, share - spent) // kv_bytes_per_token(model, r)


def asleep_bytes(r: Roles, capacity_bytes: int, others_bytes: int, colocated: bool) -> int:
    """Between rollouts: all of it at sleep level 0 or on the engine's own GPUs; the graph pool otherwise."""
    if r.sleep_level == 0 or not colocated:
        return awake_bytes(r, capacity_bytes, others_bytes)
    return graph_pool_bytes(r)


def sync_bytes(model: ModelSpec, r: Roles, capacity_bytes: int, others_bytes: int, colocated: bool) -> int:
    """The engine during the weight sync: asleep, its weights woken (the KV cache after the sync) beside the graph
    pool; at level 0 or on its own GPUs, its whole share."""
    if r.sleep_level == 0 or not colocated:
        return awake_bytes(r, capacity_bytes, others_bytes)
    return weights_bytes(model, r) + graph_pool_bytes(r)


def sync_bucket_bytes(framework: str) -> int:
    """The transfer buffer the trainer's ranks fill for the engine (its adapter's RoleEngine.sync_bucket_bytes)."""
    return FRAMEWORKS[framework].role_engine.sync_bucket_bytes


def reward_engine_bytes(r: Roles, capacity_bytes: int, framework: str) -> int:
    """verl's reward model while it scores: its own vLLM engine's share of the card (eager: no graph pool), the run's
    --reward-memory or the framework's (RoleEngine.reward_memory)."""
    return int((r.reward_memory or FRAMEWORKS[framework].role_engine.reward_memory) * capacity_bytes)
