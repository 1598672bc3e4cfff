"""The sim probe: the real transformers model's training step traced on fake tensors (no memory, no
compute), counted by the live-bytes tracker, and extrapolated over decoder layers.

Memory is affine in the number of decoder layers at every comparable moment of the step: the
moments are the segments the tracker keeps, named by phase and by how many layers the phase has
finished, with the first two and the last two positions told apart (see step.position). The step
is traced at 3 and 4 layers (or at the real depth when that is 4 or less) and each segment's bytes,
per category, are extended along the line to the real depth; the peak is the largest segment.

Differences between the traced CPU code paths and CUDA's, and what the trace does about each
(paths="cuda", the default):
- autocast op lists differ (CPU autocast runs pow/softmax/layer_norm/... in half): CUDA's policy is
  replayed by probes.amp.CudaAutocast;
- torch.optim defaults to the for-loop AdamW on CPU and to foreach on CUDA: the optimizer is built
  with foreach=True (adamw) or fused=True (adamw-fused) explicitly;
- SDPA with dropout runs the math kernel on CPU (it saves the attention probabilities) and the
  memory-efficient kernel on CUDA (it saves none): traced with dropout_p = 0;
- GradScaler (fp16) is not traced: its unscale is in place and it keeps one-element tensors;
- MoE experts under the eager dispatch route by data: their tokens per expert are fixed by the plan's
  --expert-imbalance (probes.routing).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from probes.routing import routed_eager_experts
from probes.step import Case, build_model, inputs, train_steps
from probes.tracker import CATEGORIES, LiveBytes
from recipe import text_layers

TRACE_LAYERS = (3, 4)


@dataclass
class Trace:
    layers: int
    segments: dict  # (phase, position) -> (peak bytes, {category: bytes})
    modules: dict  # module name -> activation bytes live at the start of backward


@dataclass
class SimResult:
    peak_allocated_bytes: int
    by_category: dict[str, int]
    segment: tuple
    layers: int
    traced_layers: tuple[int, ...]
    seconds: float
    segments: dict = field(default_factory=dict)  # every segment: {category: bytes}
    layer_modules: dict[str, int] = field(default_factory=dict)  # per decoder layer, by module
    other_modules: dict[str, int] = field(default_factory=dict)  # outside the decoder layers

    @property
    def phase(self) -> str:
        from planner.evidence.store import segment_phase

        return segment_phase(self.segment)


def trace(case: Case, layers: int, paths: str = "cuda") -> Trace:
    """One traced run at `layers` decoder layers on fake tensors."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    model = fake_model(case, layers, mode, paths)
    with mode, fake_grouped_mm(), routed_eager_experts(model, case.knobs.expert_imbalance):
        vocab = model.get_input_embeddings().num_embeddings
        batch = inputs(case, vocab)
        tracker = LiveBytes()
        tracker.add_existing(list(model.parameters()) + list(model.buffers()), "params")
        with tracker:
            modules = train_steps(case, model, tracker, batch, paths=paths, n_layers=layers)
    segs = {k: (v[0], tracker.by_category(v[1])) for k, v in tracker.segments.items()}
    return Trace(layers, segs, modules)


@contextmanager
def fake_grouped_mm():
    """MoE experts (transformers' grouped_mm dispatch) on fake tensors: torch's fake kernel for aten._grouped_mm
    takes bf16 only (it copies the CUDA kernel's old checks), while the real CPU and CUDA kernels also take fp32.
    Other dtypes go through transformers' own `grouped_mm_fallback` op, which allocates the same output and saves
    the same input and weight for backward (transformers/integrations/moe.py)."""
    try:
        from transformers.integrations import moe
    except ImportError:
        yield
        return
    import torch

    real = moe._can_use_grouped_mm
    moe._can_use_grouped_mm = lambda input, weight, offs: weight.dtype == torch.bfloat16 and real(input, weight, offs)
    try:
        yield
    finally:
        moe._can_use_grouped_mm = real


def fake_model(case: Case, layers: int, mode, paths: str = "cuda"):
    """The model built on the meta device (where dtype and device moves work), its parameters and
    buffers then turned into fake CPU tensors; tied weights stay tied."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorConverter

    with torch.device("meta"):
        model = build_model(case, layers, paths)
    conv, made = FakeTensorConverter(), {}

    def fake(t):
        if id(t) not in made:
            made[id(t)] = conv.from_meta_and_device(mode, t, torch.device("cpu"))
        return made[id(t)]

    for m in model.modules():
        for name, p in list(m._parameters.items()):
            if p is not None:
                if id(p) not in made:
                    made[id(p)] = torch.nn.Parameter(
                        conv.from_meta_and_device(mode, p.data, torch.device("cpu")), requires_grad=p.requires_grad
                    )
                m._parameters[name] = made[id(p)]
        for name, b in list(m._buffers.items()):
            if b is not None:
                m._buffers[name] = fake(b)
    return model


def _line(a: float, b: float, xa: int, xb: int, x: int) -> int:
    return round(a + (b - a) * (x - xa) / (xb - xa))


def _split_modules(modules: dict[str, int], n: int) -> tuple[dict, dict]:
    """Per-layer activation bytes by module (layer index replaced by '*', averaged over the n
    layers) and the rest."""
    import re

    per_layer: dict[str, int] = {}
    other: dict[str, int] = {}
    for name, v in modules.items():
        m = re.match(r"(.*\.)(\d+)(\..*)?$", name) if n else None
        if m and int(m.group(2)) < n and re.search(r"(layers|\.h|layer|blocks)\.$", m.group(1)):
            key = f"{m.group(1)}*{m.group(3) or ''}"
            per_layer[key] = per_layer.get(key, 0) + v
        else:
            other[name] = v
    return {k: v // n for k, v in per_layer.items()}, other


def vision_terms(case: Case) -> dict[str, int]:
    """What a text-only trace of a VLM case with image tokens misses, by category, from the analytic
    model: the vision tower's saved activations (planner.estimate.activations.vision_activations_bytes) and,
    when it is trained without DeepSpeed (whose model states the planner keeps analytic), its
    gradients, optimizer states and the foreach AdamW step's temporary for them, and under torch AMP
    without checkpointing the bf16 copies autocast makes of its weights (saved for backward)."""
    from planner.estimate import memory
    from planner.estimate.activations import vision_activations_bytes
    from planner.model.modelspec import from_config

    spec = from_config(case.config, "sim")
    out = {"activations": 0, "grads": 0, "optimizer": 0, "step_temp": 0, "autocast": 0}
    if spec.vision is None or not case.image_tokens:
        return out
    k = case.knobs
    out["activations"] = vision_activations_bytes(
        spec.vision,
        case.micro_batch,
        case.image_tokens,
        memory.activation_profile(k),
        k.checkpointing,
        trainable=not k.lora_rank and k.frozen == "none",
    )
    if memory.activation_profile(k) == "amp" and k.checkpointing == "off":
        out["autocast"] = 2 * sum(
            t.numel for t in spec.tensors if t.role in ("vision", "projector") and len(t.shape) == 2
        )
    if k.lora_rank == 0 and k.zero_stage == 0:
        roles = spec.params_by_role()
        n = roles.get("vision", 0) + roles.get("projector", 0) - spec.frozen_params(k.frozen)  # --frozen: none
        w = memory.trainable_weight_bytes_per_param(k)
        out["grads"] = n * memory.grad_bytes_per_param(k)
        out["optimizer"] = int(n * memory.optimizer_state_bytes_per_param(k.optimizer, w))
        out["step_temp"] = n * w if k.optimizer == "adamw" else 0
    return out


def _add_vision(segments: dict, v: dict[str, int], grad_accum: int) -> None:
    """Vision terms into traced segments: activations live through the LLM's forward and backward,
    states always (steady state), gradients once the tower's backward ran (the end of backward and
    the step; every segment when accumulating)."""
    for name, cats in segments.items():
        fwd_bwd = name[0] in ("forward", "backward")
        cats["activations"] += v["activations"] if fwd_bwd else 0
        cats["temporaries"] += v["autocast"] if fwd_bwd else 0
        cats["optimizer"] += v["optimizer"]
        if (
            name[0] in ("optimizer", "other")
            or (name[0] == "backward" and name[1] == ("end", 0))
            or (fwd_bwd and grad_accum > 1)
        ):
            cats["grads"] += v["grads"]
        cats["temporaries"] += v["step_temp"] if name[0] == "optimizer" else 0


def periodic_depths(case: Case, depth: int, traced: tuple[int, int]) -> tuple[int, int]:
    """Checkpointing every N-th layer repeats with period N, so memory is affine in whole periods: trace at
    depths congruent to the real one modulo N, two periods apart from the ends (or the real depth itself)."""
    ckpt = case.knobs.checkpointing
    if not ckpt.startswith("every-"):
        return traced
    n = int(ckpt.removeprefix("every-"))
    a = depth % n + 2 * n
    return (a, a + n) if a + n < depth else (depth, depth)


def simulate(case: Case, paths: str = "cuda", traced: tuple[int, int] = TRACE_LAYERS) -> SimResult:
    """The steady-state step's peak at the model's real depth, and every segment's bytes there.

    VLM cases with image tokens: the LLM's memory depends on its sequence length, not on where its
    input embeddings came from, so the step is traced with text tokens in the image tokens' place
    (the vision tower's parameters are in it, but unused), and the tower's terms come from the
    analytic model (vision_terms): its activations live from its forward (before the LLM's) until
    its backward (after the LLM's)."""
    t0 = time.perf_counter()
    vision = vision_terms(case)
    case = replace(case, image_tokens=0)
    depth = text_layers(case.config)
    traced = periodic_depths(case, depth, traced)
    if depth <= max(traced):
        tr = trace(case, depth, paths)
        segments = {seg: cats for seg, (_, cats) in tr.segments.items()}
        used, modules = (depth,), tr.modules
    else:
        a, b = (trace(case, n, paths) for n in traced)
        segments = {
            seg: {c: _line(a.segments[seg][1][c], b.segments[seg][1][c], *traced, depth) for c in CATEGORIES}
            for seg in a.segments.keys() & b.segments.keys()
            if not (seg[0] in ("forward", "backward") and seg[1][0] == "middle")
        }
        used, modules = tuple(traced), b.modules
    _add_vision(segments, vision, case.grad_accum)
    seg = max(segments, key=lambda s: sum(segments[s].values()))
    lm, om = _split_modules(modules, used[-1])
    return SimResult(
        sum(segments[seg].values()), segments[seg], seg, depth, used, time.perf_counter() - t0, segments, lm, om
    )
