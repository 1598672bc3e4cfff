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
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field

from planner.model.families import from_config
from probes.routing import routed_eager_experts
from probes.shadow import ShadowFakeMode, masks_as_run
from probes.step import Case, build_model, inputs, train_steps, vlm_inputs, vocab_of
from probes.tracker import CATEGORIES, LiveBytes
from recipe import HALF, text_layers
from recipe.model import deepspeed_managed, fsdp_policy_half

TRACE_LAYERS = (3, 4)


@dataclass
class Trace:
    layers: int
    segments: dict  # (phase, position) -> (peak bytes, {category: bytes})
    modules: dict  # module name -> activation bytes live at the start of backward
    image_tokens: int = 0  # per sample, as the batch held them (probes.images)


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
    image_tokens: int = 0  # per sample, as traced (fixed-size images round the planned count down)

    @property
    def phase(self) -> str:
        from planner.evidence.store import segment_phase

        return segment_phase(self.segment)


def trace(case: Case, layers: int, paths: str = "cuda") -> Trace:
    """One traced run at `layers` decoder layers on fake tensors; a VLM case's batch holds real images' inputs
    (probes.images), whose small integer tensors keep their values (probes.shadow)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = ShadowFakeMode() if case.image_tokens else FakeTensorMode(allow_non_fake_inputs=True)
    model = fake_model(case, layers, mode, paths)
    real, image_tokens = vlm_inputs(case, model, traced=True) if case.image_tokens else (None, 0)
    masks = masks_as_run(mode) if real else nullcontext()
    with mode, masks, fake_grouped_mm(), routed_eager_experts(model, case.knobs.expert_imbalance):
        vocab = vocab_of(model)
        batch = {k: mode.share(v) for k, v in real.items()} if real else inputs(case, vocab)
        tracker = LiveBytes()
        tracker.add_existing(list(model.parameters()) + list(model.buffers()), "params")
        with tracker:
            modules = train_steps(case, model, tracker, batch, paths=paths, n_layers=layers)
    segs = {k: (v[0], tracker.by_category(v[1])) for k, v in tracker.segments.items()}
    return Trace(layers, segs, modules, image_tokens)


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


@contextmanager
def _meta_boft_permutations():
    """PEFT's BOFT fills its permutation matrices index by index (peft 0.21.2 tuners/boft/layer.py:397-412, an .item()
    that the meta device cannot run): on meta, the same (d_in, d_in) fp32 matrix, empty (its values are not traced)."""
    try:
        from peft.tuners.boft.layer import BOFTLayer
    except ImportError:
        yield
        return
    import torch

    real = BOFTLayer.perm2mat
    BOFTLayer.perm2mat = lambda self, indices: torch.zeros((len(indices), len(indices)))
    try:
        yield
    finally:
        BOFTLayer.perm2mat = real


def fake_model(case: Case, layers: int, mode, paths: str = "cuda", value_head: bool = False):
    """The model built on the meta device (where dtype and device moves work), its parameters and
    buffers then turned into fake CPU tensors; tied weights stay tied."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorConverter

    with torch.device("meta"), _meta_boft_permutations():
        model = build_model(case, layers, paths, value_head)
        as_deepspeed_casts(model, case.knobs)
        as_fsdp_casts(model, case.knobs)
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


def as_deepspeed_casts(model, knobs) -> None:
    """Under DeepSpeed's fp16/bf16 (ZeRO 1-3) the engine casts every floating parameter of the module to the half dtype
    at initialize, PEFT's fp32 adapters included, and keeps the buffers (deepspeed 0.19.8 runtime/engine.py:2080-2088,
    :1859-1862; CASTABLE_DTYPES :154): the fp32 master copy is ZeRO's partition in the optimizer
    (zero/stage_1_and_2.py:557-577), which the sim counts analytically. Without DeepSpeed the adapters are held fp32:
    PEFT upcasts them on a half base (peft 0.21.2 tuners/tuners_utils.py:2705-2750, autocast_adapter_dtype=True by
    default, mapping_func.py:110), torch AMP keeps them (autocast casts their inputs), and accelerate's FSDP2 upcasts
    trained parameters to fp32 (1.16 utils/fsdp_utils.py:800-806); FSDP2's bf16 policy then computes with them in
    bf16 (as_fsdp_casts)."""
    import torch

    half = HALF.get(knobs.precision)
    if not deepspeed_managed(knobs) or half is None:
        return
    for p in model.parameters():
        if p.dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
            p.data = p.data.to(half)


def as_fsdp_casts(model, knobs) -> None:
    """Under FSDP2's bf16 MixedPrecisionPolicy (accelerate 1.16 utils/dataclasses.py:2008-2013; memplan's own,
    recipe.shard_fsdp) the shards stay as built (PEFT's adapters fp32, accelerate fsdp_utils.py:800-806) while the
    forward and backward run on unsharded copies in bf16 of every floating parameter (torch 2.13
    distributed/fsdp/_fully_shard/_fsdp_param.py:586-599; mixed dtypes gathered as bytes, _fsdp_collectives.py:343):
    one rank's trace is the module cast to bf16, its buffers kept. Measured (probes.fsdp_cast, tests/probes/
    test_fsdp_cast.py): a real FSDP2 step on two gloo ranks saves what the cast module saves, byte for byte."""
    import torch

    if not fsdp_policy_half(knobs):
        return
    for p in model.parameters():
        if p.dtype.is_floating_point:
            p.data = p.data.to(torch.bfloat16)


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
        layer = m and int(m.group(2)) < n and re.search(r"(layers|\.h|layer|blocks)\.$", m.group(1))
        if layer and not re.search(r"vision|visual", m.group(1)):  # a tower's blocks are not the decoder's
            key = f"{m.group(1)}*{m.group(3) or ''}"
            per_layer[key] = per_layer.get(key, 0) + v
        else:
            other[name] = v
    return {k: v // n for k, v in per_layer.items()}, other


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

    VLM cases with image tokens run the real model on images' inputs (probes.images): the tower at its full depth in
    every trace, so that it adds the same bytes at both traced depths and the line carries them; Llama-3.2-Vision's
    cross-attention layers sit at fixed depths, so it is traced at its real depth, as is freeze tuning (--trained-layers:
    the top layers trained, the others frozen)."""
    t0 = time.perf_counter()
    depth = text_layers(case.config)
    traced = periodic_depths(case, depth, traced)
    if case.image_tokens and from_config(case.config, "sim").text.cross_layers:  # at fixed depths: not affine
        traced = (depth, depth)
    if getattr(case.knobs, "trained_layers", 0):  # freeze tuning trains the top layers alone: not affine either
        traced = (depth, depth)
    if depth <= max(traced):
        tr = trace(case, depth, paths)
        segments = {seg: cats for seg, (_, cats) in tr.segments.items()}
        used, modules, image_tokens = (depth,), tr.modules, tr.image_tokens
    else:
        a, b = (trace(case, n, paths) for n in traced)
        segments = {
            seg: {c: _line(a.segments[seg][1][c], b.segments[seg][1][c], *traced, depth) for c in CATEGORIES}
            for seg in a.segments.keys() & b.segments.keys()
            if not (seg[0] in ("forward", "backward") and seg[1][0] == "middle")
        }
        used, modules, image_tokens = tuple(traced), b.modules, b.image_tokens
    seg = max(segments, key=lambda s: sum(segments[s].values()))
    lm, om = _split_modules(modules, used[-1])
    return SimResult(
        sum(segments[seg].values()),
        segments[seg],
        seg,
        depth,
        used,
        time.perf_counter() - t0,
        segments,
        lm,
        om,
        image_tokens,
    )
