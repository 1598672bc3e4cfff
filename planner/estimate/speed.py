"""Step-time model: compute from FLOPs at a micro-batch-dependent efficiency, plus the exposed part of
communication and offload traffic. Used to rank plans; the constants are priors that the GPU
benchmark (issue 7) recalibrates.

FLOPs per token: 6 x params for a training step (Kaplan et al. 2020) plus attention,
12 x layers x heads x head_dim x seq (Chowdhery et al. 2022, PaLM, appendix B); full
checkpointing adds one more forward (2 x params + a third of attention). LoRA skips the weight
gradients of the frozen base: 4 x params (+2 with recompute).

Communication: the data-parallel collectives as the frameworks run accumulation (planner.estimate.microstep: DDP
all-reduces once a step under no_sync; ZeRO-1 reduces once; ZeRO-2 reduces on every micro-step; ZeRO-3 also gathers
parameters in forward and backward on every micro-step; FSDP gathers on every micro-step and reduce-scatters on the
last under no_sync), at the bus bandwidth plus COLLECTIVE_LATENCY_S a call. Across nodes the bottleneck is the node's
network (one NIC per node assumed). StepTime says what each micro-step pays again beyond its tokens' FLOPs.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.config.spec import Hardware
from planner.estimate import calibration, freeze, microstep, parallel, recipe_terms
from planner.estimate.activation_terms import host_activation_bytes_per_node
from planner.estimate.setup import Setup
from planner.estimate.trained import trainable_params

PEAK_EFFICIENCY = 0.55  # best model-FLOPs utilisation a large micro-batch reaches
HALF_EFFICIENCY_TOKENS = 1024  # tokens per micro-batch at which efficiency is half of the peak
COLLECTIVE_LATENCY_S = 50e-6  # per collective call (NCCL launch + ring latency)
BACKWARD_OVERLAP = 0.6  # fraction of backward time that can hide gradient communication
CPU_ADAM_PARAMS_PER_S = 1.0e9  # DeepSpeed CPU Adam throughput per node (AVX512, many cores)


@dataclass(frozen=True)
class StepTime:
    """One optimizer step's seconds by kind; the micro_* parts say what of them each of its micro_steps pays again
    (what more accumulation at one global batch costs): the efficiency curve's fixed share of compute, the exposed
    share of the collectives run on every micro-step, ZeRO-3 parameter offload's PCIe copies."""

    compute_s: float
    comm_s: float
    offload_s: float
    generation_s: float = 0.0  # GRPO's sampling and the no-grad log-prob passes (planner.estimate.rl)
    micro_steps: int = 1
    micro_fixed_s: float = 0.0  # of compute_s, per micro-step (fixed_seconds_per_micro_step)
    micro_comm_s: float = 0.0  # of comm_s, per micro-step
    micro_offload_s: float = 0.0  # of offload_s, per micro-step

    @property
    def total_s(self) -> float:
        return self.compute_s + self.comm_s + self.offload_s + self.generation_s

    @property
    def per_micro_step_s(self) -> float:
        """What one more micro-step of the same shape adds, beyond its tokens' FLOPs (the VILA story's test reads it)."""
        return self.micro_fixed_s + self.micro_comm_s + self.micro_offload_s


def flops_per_token(s: Setup) -> float:
    """Training FLOPs per token of one optimizer step's work."""
    m = s.model
    attn_fwd = 4 * m.text.layers * m.text.q_dim * s.context  # QK^T and AV over the whole row; backward twice this
    base = (4 * m.active_params + 6 * trainable_params(s)) if s.lora else 6 * m.active_params
    if freeze.freeze_tuned(s.knobs):  # forward through all; backward through the head and the trained layers, and
        # the input's gradient through LLaMA-Pro's frozen layers between them
        path = freeze.path_frozen_layers(s.knobs, m.text.layers) * freeze.trained_layer_params(m, 1)
        base = 2 * m.active_params + 4 * trainable_params(s) + 2 * path + 2 * m.text.vocab * m.text.hidden
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


def efficiency_curve(gpu: str = "") -> tuple[float, int]:
    """(peak model-FLOPs utilisation, tokens per micro-batch at half of it): the GPU kind's measured curve where a
    calibration file has it, else the priors."""
    cal = calibration.for_gpu(gpu) if gpu else None
    peak = cal.peak_efficiency if cal and cal.peak_efficiency else PEAK_EFFICIENCY
    half = cal.half_efficiency_tokens if cal and cal.half_efficiency_tokens else HALF_EFFICIENCY_TOKENS
    return peak, half


def efficiency(tokens_per_micro_batch: int, gpu: str = "") -> float:
    """Model-FLOPs utilisation grows with the work per kernel launch and saturates."""
    peak, half = efficiency_curve(gpu)
    return peak * tokens_per_micro_batch / (tokens_per_micro_batch + half)


def fixed_seconds_per_micro_step(s: Setup, hw: Hardware) -> float:
    """The efficiency curve's fixed share: a micro-step of T tokens takes (T + half) tokens' FLOPs at the peak
    efficiency, so each micro-step pays `half` tokens' worth whatever its size. It stands for what every micro-step
    pays once: kernel launches and small-kernel tails, the loop's per-micro-step synchronisation (HF's loss NaN check,
    transformers trainer.py:1956-1960) and the next batch's fetch (get_batch_samples, trainer.py:2326-2341); a
    GPU kind's calibration measured it within whole steps."""
    peak, half = efficiency_curve(s.gpu)
    return half * flops_per_token(s) / (gpu_tflops(hw, s.knobs.precision) * 1e12 * peak)


def bus_bandwidth_bytes_per_s(hw: Hardware) -> float:
    intra = hw.gpu.link_gbs * 1e9
    if hw.nodes == 1:
        return intra
    return min(intra, hw.inter_node_gbps / 8 * 1e9)


def _ring(n: int) -> float:
    return (n - 1) / n if n > 1 else 0.0


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
    return t + s.grad_accum * param_offload_seconds_per_micro_step(s, hw)


def param_offload_seconds_per_micro_step(s: Setup, hw: Hardware) -> float:
    """ZeRO-3 parameter offload: each micro-step copies the rank's parameter partition to the device for forward and
    again for backward."""
    if s.knobs.offload != "optimizer+params":
        return 0.0
    return 2 * (s.model.params * 2 / s.world_size) / (hw.gpu.pcie_gbs * 1e9)


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
    if k.device_map > 1:  # the hidden state to the next GPU in forward, its gradient back in backward, not overlapped
        out += v.grad_accum * 2 * (k.device_map - 1) * tokens * t.hidden * c / link
    return out


def step_time(s: Setup, hw: Hardware) -> StepTime:
    """One optimizer step; under tensor, sequence or context parallelism on a rank's view (planner.estimate.parallel)."""
    s = parallel.view(s)
    compute = compute_seconds(s, hw)
    exposed, micro_comm = data_parallel_comm_seconds(s, hw, compute)
    exposed += all_to_all_seconds(s, hw) + parallel_seconds(s, hw, compute)
    return StepTime(
        compute,
        exposed,
        offload_seconds(s, hw) + activation_offload_seconds(s, hw),
        micro_steps=s.grad_accum,
        micro_fixed_s=fixed_seconds_per_micro_step(s, hw),
        micro_comm_s=micro_comm,
        micro_offload_s=param_offload_seconds_per_micro_step(s, hw),
    )


def compute_seconds(s: Setup, hw: Hardware) -> float:
    """The step's FLOPs at the micro-batch's efficiency, on a rank's view (parallel.view). At one global batch it is
    least at the fewest micro-steps: grad_accum x (T + half) tokens' FLOPs at the peak efficiency, T x grad_accum
    fixed (efficiency), so each micro-step adds `half` tokens' worth (planner.search.ranked's speed bound)."""
    tokens_micro = s.micro_batch * s.seq_len
    peak = gpu_tflops(hw, s.knobs.precision) * 1e12
    return s.grad_accum * tokens_micro * flops_per_token(s) / (peak * efficiency(tokens_micro, s.gpu))


def data_parallel_comm_seconds(s: Setup, hw: Hardware, compute: float) -> tuple[float, float]:
    """(exposed seconds of the step's data-parallel collectives, the share of them one micro-step pays): each
    collective's bytes over the bus and COLLECTIVE_LATENCY_S a call, less what hides behind backward (DDP and ZeRO-1
    the last micro-step's, ZeRO-2/3 every backward; FSDP overlaps each unit's gather with the unit before it, forward
    and backward), never below a tenth."""
    cs, bw = microstep.collectives(s), bus_bandwidth_bytes_per_s(hw)
    step_v, step_c = microstep.volume_and_calls(cs, 1, per_micro_step=False)
    micro_v, micro_c = microstep.volume_and_calls(cs, 1, per_micro_step=True)
    once, each = step_v / bw + step_c * COLLECTIVE_LATENCY_S, micro_v / bw + micro_c * COLLECTIVE_LATENCY_S
    comm = once + s.grad_accum * each
    if comm == 0:
        return 0.0, 0.0
    over = (
        compute
        if s.knobs.fsdp != "off"
        else compute / s.grad_accum * 2 / 3
        if s.knobs.zero_stage <= 1
        else compute * 2 / 3
    )
    exposed = max(comm - BACKWARD_OVERLAP * over, 0.1 * comm)
    return exposed, exposed * each / comm


def tokens_per_second(s: Setup, hw: Hardware, t: StepTime) -> float:
    """Cluster-wide training tokens per second: micro x accumulation x data-parallel size x sequence."""
    return s.micro_batch * s.grad_accum * s.world_size // s.knobs.parallel * s.seq_len / t.total_s
