"""LoRA on a vision tower's and projector's linears (--lora-vision) without the tower checkpointed: what its blocks
save for backward, where the base weights are frozen and PEFT's adapters sit on every nn.Linear (one GPU or DDP, the
adapters in fp32 under torch AMP or bf16-pure, as PEFT keeps them at zero 0).

A frozen linear saves nothing for its weight, a frozen norm nothing of its output, so a LoRA block keeps only what the
gradient of its input needs, and each adapter's own tensors (measured tensor by tensor in the sim of qwen2.5-vl-3b,
gemma-3-4b and internvl2.5-8b, bf16 AMP and bf16-pure: tests/probes/test_tower_lora.py):
- each norm its input: a LayerNorm under autocast its fp32 cast (4 bytes an element) with the mean, the rstd and
  fp32 copies of its weight and bias, in bf16-pure its half input; Qwen2.5-VL's RMSNorm its fp32 copy and the rsqrt;
  the first block's first norm nothing (the frozen patch embedding's output needs no gradient);
- attention: q, k and v (a fused qkv's output), SDPA's output and log-sum-exp, a rotary tower's rotated q and k;
- the MLP: fc1's output (gelu's input), quick_gelu's sigmoid beside it, or a gated MLP's gate, up and activation;
- each adapter: lora_A's own copy of its linear's input (PEFT casts it to the fp32 adapter: autocast casts it back to
  2 bytes, bf16-pure keeps the 4), lora_A's output (tokens x r) that lora_B saves, under autocast both adapters'
  bf16 weight copies, and where the dropout drops its 1-byte mask;
- the projector's linears as the tower's, over its own rows (the merged image tokens), with the frozen path's
  activation input (the first linear's output).
"""

from __future__ import annotations

from planner.config.spec import Knobs
from planner.model.modelspec import ModelSpec, VisionSpec

QUICK_GELU = ("quick-gelu", "quick-gelu-rotary")
ROTARY = ("rmsnorm-rotary", "rotary", "quick-gelu-rotary")


def examined(k: Knobs) -> bool:
    """Where the terms below were traced: plain LoRA on the tower at zero 0 without FSDP, under bf16/fp16 AMP or
    bf16-pure (fp32 and the sharded runs, whose adapters share their inputs, keep the trained tower's terms)."""
    return bool(
        k.lora_rank
        and k.lora_vision
        and k.lora_variant == "lora"
        and not k.zero_stage
        and k.fsdp == "off"
        and k.precision in ("bf16", "fp16", "bf16-pure")
        and not k.lora_base_fp32
    )


def adapter_copy_bytes(k: Knobs) -> int:
    """Bytes an element of lora_A's saved input and output: 2 under autocast, 4 in bf16-pure (the fp32 cast)."""
    return 4 if k.precision == "bf16-pure" else 2


def norm_saved_bytes(v: VisionSpec, rows: int, width: int, amp: bool) -> int:
    """One frozen norm's saved tensors over `rows` tokens of `width`."""
    if v.block == "rmsnorm-rotary":
        return 4 * rows * width + 4 * rows
    return (4 if amp else 2) * rows * width + 8 * rows + (8 * width if amp else 0)


def adapters_saved_bytes(linears: list[tuple[int, int]], rows: int, k: Knobs, dropout: bool) -> int:
    """The adapters' saved tensors on `linears` ((input width, output width) each) over `rows` tokens."""
    a, r = adapter_copy_bytes(k), k.lora_rank
    out = sum(a * rows * (d_in + r) + (rows * d_in if dropout else 0) for d_in, _ in linears)
    if k.precision != "bf16-pure":  # autocast's bf16 copies of both fp32 adapters' weights
        out += sum(2 * r * (d_in + d_out) for d_in, d_out in linears)
    return out


def block_saved_bytes(v: VisionSpec, patches: int, k: Knobs, linears: list[tuple[int, int]], dropout: bool) -> int:
    """One LoRA block's saved bytes (a first block's first norm included: tower_saved_bytes takes it out)."""
    c, p, h, i = 2, patches, v.hidden, v.intermediate
    amp = k.precision != "bf16-pure"
    attention = c * p * h * (3 + 1 + (2 if v.block in ROTARY else 0)) + 4 * p * v.heads
    mlp = c * p * i * (3 if v.gated_mlp else 2 if v.block in QUICK_GELU else 1)
    return 2 * norm_saved_bytes(v, p, h, amp) + attention + mlp + adapters_saved_bytes(linears, p, k, dropout)


def tower_linears(model: ModelSpec, role: str) -> list[tuple[int, int]]:
    """(input width, output width) of the linears LoRA adapts: one block's (role vision) or the projector's."""
    per = model.vision.layers if role == "vision" else 1
    return [
        (t.shape[1], t.shape[0])
        for t in model.tensors
        if t.tower_linear and t.role == role
        for _ in range(t.count // per)
    ]


def tower_saved_bytes(model: ModelSpec, k: Knobs, patches: int, image_tokens: int, dropout: bool) -> int:
    """Every live block's saved bytes, less the first norm's, and the projector's adapters over the image tokens."""
    v = model.vision
    live = v.layers - v.unused_layers
    blocks = live * block_saved_bytes(v, patches, k, tower_linears(model, "vision"), dropout)
    blocks -= norm_saved_bytes(v, patches, v.hidden, k.precision != "bf16-pure")
    return blocks + projector_saved_bytes(model, k, image_tokens, dropout)


def projector_saved_bytes(model: ModelSpec, k: Knobs, image_tokens: int, dropout: bool) -> int:
    """The projector's adapters over the image tokens and each of its MLPs' first linear's output, which the
    activation between its two linears saves: the linears of one count are one kind of MLP, listed first linear first
    (Qwen3-VL's merger, then its three deepstack mergers). Its norms' inputs are not counted (a few MiB: Qwen2.5-VL's
    ln_q 5.2 MB, InternVL's 4.2 MB at 256 image tokens)."""
    if not image_tokens:
        return 0
    kinds: dict[int, list] = {}
    for t in model.tensors:
        if t.tower_linear and t.role == "projector":
            kinds.setdefault(t.count, []).append(t)
    first = sum(2 * image_tokens * ts[0].shape[0] * n for n, ts in kinds.items() if len(ts) > 1)
    return first + adapters_saved_bytes(tower_linears(model, "projector"), image_tokens, k, dropout)
