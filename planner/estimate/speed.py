"""Step-time model: compute from FLOPs at a micro-batch-dependent efficiency, plus the exposed part of
communication and offload traffic. Used to rank plans; the constants are priors that the GPU
benchmark (issue 7) recalibrates.

FLOPs per token: 6 x params for a training step (Kaplan et al. 2020) plus attention,
12 x layers x heads x head_dim x seq (Chowdhery et al. 2022, PaLM, appendix B); full
checkpointing adds one more forward (2 x params + a third of attention). LoRA skips the weight
gradients of the frozen base: 4 x params (+2 with recompute).

Communication (ring collectives, bytes per rank): all-reduce 2(N-1)/N x B; reduce-scatter and
all-gather (N-1)/N x B (Patarasuk & Yuan 2009). DDP all-reduces gradients once per optimizer step
(HF uses no_sync on the other micro-steps); ZeRO-1 all-reduces once and all-gathers updated params;
ZeRO-2 reduce-scatters on every micro-step; ZeRO-3 also all-gathers params in forward and backward
on every micro-step. Across nodes the bottleneck is the node's network (one NIC per node assumed).
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.config.spec import Hardware
from planner.estimate import calibration, fsdp, parallel, recipe_terms
from planner.estimate.memory import frozen_params, host_activation_bytes_per_node, trainable_params
from planner.estimate.setup import Setup

PEAK_EFFICIENCY = 0.55  # best model-FLOPs utilisation a large micro-batch reaches
HALF_EFFICIENCY_TOKENS = 1024  # tokens per micro-batch at which efficiency is half of the peak
COLLECTIVE_LATENCY_S = 50e-6  # per collective call (NCCL launch + ring latency)
BACKWARD_OVERLAP = 0.6  # fraction of backward time that can hide gradient communication
CPU_ADAM_PARAMS_PER_S = 1.0e9  # DeepSpeed CPU Adam throughput per node (AVX512, many cores)


@dataclass(frozen=True)
class StepTime:
    compute_s: float
    comm_s: float
    offload_s: float
    generation_s: float = 0.0  # GRPO's sampling and the no-grad log-prob passes (planner.estimate.rl)

    @property
    def total_s(self) -> float:
        return self.compute_s + self.comm_s + self.offload_s + self.generation_s


def flops_per_token(s: Setup) -> float:
    """Training FLOPs per token of one optimizer step's work."""
    m = s.model
    attn_fwd = 4 * m.text.layers * m.text.q_dim * s.context  # QK^T and AV over the whole row; backward twice this
    base = (4 * m.active_params + 6 * trainable_params(s)) if s.lora else 6 * m.active_params
    return base + 3 * attn_fwd + recompute_flops_per_token(s, attn_fwd)


def recompute_flops_per_token(s: Setup, attn_fwd: float) -> float:
    """Checkpointing's second forward: full and every-N rerun their layers (2 x params + attention, over the share
    of layers checkpointed); selective-op reruns only the linears whose outputs it does not keep (the attention
    kernel's output is kept)."""
    m, k = s.model, s.knobs
    if k.checkpointing == "selective-op":
        t = m.text
        return 2 * t.layers * sum(w * d for w, d, _ in recipe_terms.recomputed_linears(t))
    share = recipe_terms.checkpointed_layers(k, m.text.layers) / m.text.layers
    return share * (2 * m.active_params + attn_fwd)


def gpu_tflops(hw: Hardware, precision: str) -> float:
    g = hw.gpu
    if precision == "fp32":
        return g.fp32_tflops
    if precision == "fp16" or g.bf16_tflops == 0:  # no bf16 (V100): such plans are rejected anyway
        return g.fp16_tflops
    return g.bf16_tflops


def efficiency(tokens_per_micro_batch: int, gpu: str = "") -> float:
    """Model-FLOPs utilisation grows with the work per kernel launch and saturates."""
    cal = calibration.for_gpu(gpu) if gpu else None
    peak = cal.peak_efficiency if cal and cal.peak_efficiency else PEAK_EFFICIENCY
    half = cal.half_efficiency_tokens if cal and cal.half_efficiency_tokens else HALF_EFFICIENCY_TOKENS
    return peak * tokens_per_micro_batch / (tokens_per_micro_batch + half)


def bus_bandwidth_bytes_per_s(hw: Hardware) -> float:
    intra = hw.gpu.link_gbs * 1e9
    if hw.nodes == 1:
        return intra
    return min(intra, hw.inter_node_gbps / 8 * 1e9)


def _ring(n: int) -> float:
    return (n - 1) / n if n > 1 else 0.0


def fsdp_comm_bytes_per_step(s: Setup) -> tuple[float, int]:
    """FSDP2 per micro-step: each unit's parameters all-gathered in forward and again in backward (not under
    grad-op, which keeps them), its gradients reduce-scattered in backward (compute and reduce dtypes); HSDP
    also all-reduces the shard's gradients across the replicas (nodes) once a step."""
    k, A = s.knobs, s.grad_accum
    n = s.gpus_per_node if k.fsdp == "hybrid" else s.world_size
    W = (trainable_params(s) + frozen_params(s)) * fsdp.compute_bytes_per_param(k)
    G = trainable_params(s) * fsdp.reduce_bytes_per_param(k)
    gathers = 1 if k.fsdp == "grad-op" else 2
    volume = A * _ring(n) * (gathers * W + G)
    ep = k.expert_parallel
    if ep > 1:  # each rank gathers and reduces only its own experts, over the n / ep ranks that shard them
        experts = s.model.expert_params_per_layer() * s.model.text.moe.moe_layers
        share = experts / (trainable_params(s) + frozen_params(s))
        volume -= A * (gathers * W + G) * share * (_ring(n) - _ring(max(1, n // ep)) / ep)
    calls = A * (gathers + 1) * (s.model.text.layers + 1)
    if k.fsdp == "hybrid":
        volume += 2 * _ring(s.nodes) * G / n
        calls += 1
    return volume, calls


def comm_bytes_per_step(s: Setup) -> tuple[float, int]:
    """(bytes each rank sends per optimizer step, collective calls per step)."""
    if s.knobs.fsdp != "off":
        return fsdp_comm_bytes_per_step(s)
    n, A, z = s.world_size, s.grad_accum, s.knobs.zero_stage
    g = 2 if s.knobs.precision != "fp32" else 4
    G = trainable_params(s) * (4 if z == 0 and s.knobs.precision != "bf16-pure" else g)
    W = (trainable_params(s) + frozen_params(s)) * g
    bucket = max(1, s.model.text.hidden**2 * g)
    if n == 1:
        return 0.0, 0
    if z == 0:
        return 2 * _ring(n) * G, max(1, int(G // (25 * 2**20)))
    if z == 1:
        return 2 * _ring(n) * G + _ring(n) * W, 2 * max(1, int(G // bucket))
    if z == 2:
        return A * _ring(n) * G + _ring(n) * W, A * max(1, int(G // bucket)) + 1
    layers = s.model.text.layers
    return A * (_ring(n) * G + 2 * _ring(n) * W), A * (3 * layers + 2)


def all_to_all_seconds(s: Setup, hw: Hardware) -> float:
    """Expert parallelism's token exchange per optimizer step: each routed layer sends its pairs' hidden states
    to the experts' ranks and takes the outputs back, in forward and again in backward (and in a checkpointed
    layer's rerun); the busiest rank moves --expert-imbalance times its share. NVLink within a node, the network
    across nodes (torchtitan's all-to-all dispatch; nothing overlaps it here)."""
    k, m = s.knobs, s.model.text.moe
    if m is None or k.expert_parallel <= 1:
        return 0.0
    n = k.expert_parallel
    passes = 4 + (2 if recipe_terms.checkpointed_layers(k, s.model.text.layers) else 0)
    c = 4 if k.precision == "fp32" else 2
    pairs = s.micro_batch * s.seq_len * m.top_k * min(k.expert_imbalance, n)
    volume = s.grad_accum * passes * m.moe_layers * pairs * s.model.text.hidden * c * _ring(n)
    bw = hw.gpu.link_gbs * 1e9 if n <= s.gpus_per_node else bus_bandwidth_bytes_per_s(hw)
    return volume / bw + s.grad_accum * passes * m.moe_layers * COLLECTIVE_LATENCY_S


def offload_seconds(s: Setup, hw: Hardware) -> float:
    """PCIe traffic and CPU Adam time of optimizer (and parameter) offload per optimizer step."""
    if s.knobs.offload == "none":
        return 0.0
    part = trainable_params(s) / s.world_size
    pcie = hw.gpu.pcie_gbs * 1e9
    t = (part * 4 + part * 2) / pcie + part * s.node_ranks / CPU_ADAM_PARAMS_PER_S
    if s.knobs.offload == "optimizer+params":
        t += s.grad_accum * 2 * (s.model.params * 2 / s.world_size) / pcie
    return t


def activation_offload_seconds(s: Setup, hw: Hardware) -> float:
    """--checkpointing offload: every saved activation crosses PCIe to the host and back, per micro-step
    (save_on_cpu copies synchronously: not hidden behind compute)."""
    per_rank = host_activation_bytes_per_node(s) / s.node_ranks
    return s.grad_accum * 2 * per_rank / (hw.gpu.pcie_gbs * 1e9)


def passes(s: Setup) -> int:
    """Forward passes through a layer per micro-step, counting backward as two and a checkpointed rerun as one more
    (the collectives inside a layer run once per pass)."""
    return 3 + (1 if recipe_terms.checkpointed_layers(s.knobs, s.model.text.layers) else 0)


def parallel_seconds(v: Setup, hw: Hardware, compute_s: float) -> float:
    """Exposed communication of tensor, sequence and context parallelism per optimizer step, on a rank's view `v`:
    - tensor parallel: per layer and pass, two all-gathers and two reduce-scatters of the local tokens' hidden
      states (sequence-parallel norms; Korthikanti et al. 2022), on the node's link, not overlapped;
    - Ulysses: per layer and pass, four all-to-alls (q, k, v in, the output back; Jacobs et al. 2023), not
      overlapped; over the network where the group spans nodes;
    - ring attention (and all-gather, the same volume at once): C - 1 key/value blocks per layer and pass (their
      gradients too in backward), overlapped with the attention computing on the block before (Liu et al. 2023,
      "Ring Attention"): only what exceeds it; under --cp-attention all-to-all, Ulysses' exchange over S x C."""
    k, t = v.knobs, v.model.text
    if k.parallel == 1:
        return 0.0
    c, layers = (4 if k.precision == "fp32" else 2), t.layers
    tokens = v.knobs.workload.rows(v.micro_batch) * v.seq_len
    n = v.grad_accum * passes(v) * layers
    link = hw.gpu.link_gbs * 1e9
    out = 0.0
    if k.tensor_parallel > 1:
        tp = k.tensor_parallel
        out += n * (4 * _ring(tp) * tokens * t.hidden * c / link + 4 * COLLECTIVE_LATENCY_S)
    a2a = parallel.all_to_all_group(k)
    if a2a > 1:
        bw = link if a2a <= v.gpus_per_node else bus_bandwidth_bytes_per_s(hw)  # the view's GPUs per node: g / T
        width = t.head_dim * (2 * t.heads + 2 * max(t.kv_heads, a2a))
        out += n * (_ring(a2a) * tokens * width * c / bw + 4 * COLLECTIVE_LATENCY_S)
    if k.context_parallel > 1 and k.cp_attention != "all-to-all":
        cp = k.context_parallel
        bw = link if k.sequence_parallel * cp <= v.gpus_per_node else bus_bandwidth_bytes_per_s(hw)
        ring = v.grad_accum * layers * (cp - 1) * (passes(v) + 1) * tokens * 2 * t.kv_dim * c / bw
        attention = compute_s * 3 * 4 * layers * t.q_dim * v.context / flops_per_token(v)
        out += max(ring - attention, 0.1 * ring)
    return out


def step_time(s: Setup, hw: Hardware) -> StepTime:
    """One optimizer step; under tensor, sequence or context parallelism on a rank's view (planner.estimate.parallel)."""
    s = parallel.view(s)
    tokens_micro = s.micro_batch * s.seq_len
    peak = gpu_tflops(hw, s.knobs.precision) * 1e12
    compute = s.grad_accum * tokens_micro * flops_per_token(s) / (peak * efficiency(tokens_micro, s.gpu))
    volume, calls = comm_bytes_per_step(s)
    comm = volume / bus_bandwidth_bytes_per_s(hw) + calls * COLLECTIVE_LATENCY_S
    backward_last = compute / s.grad_accum * 2 / 3
    # FSDP overlaps each unit's all-gather with the unit before it, forward and backward (all but the first)
    over = compute if s.knobs.fsdp != "off" else backward_last if s.knobs.zero_stage <= 1 else compute * 2 / 3
    hidden = BACKWARD_OVERLAP * over
    exposed = max(comm - hidden, 0.1 * comm) + all_to_all_seconds(s, hw) + parallel_seconds(s, hw, compute)
    return StepTime(compute, exposed, offload_seconds(s, hw) + activation_offload_seconds(s, hw))


def tokens_per_second(s: Setup, hw: Hardware, t: StepTime) -> float:
    """Cluster-wide training tokens per second: micro x accumulation x data-parallel size x sequence."""
    return s.micro_batch * s.grad_accum * s.world_size // s.knobs.parallel * s.seq_len / t.total_s
