"""OFT's terms (--lora-variant oft, --lora-rank its block size): PEFT's orthogonal fine-tuning as LLaMA-Factory
(finetuning_type oft, peft 0.18.x) and HF scripts (OFTConfig) run it, in the input-rotation form PEFT has had since
0.16 (identical for linears through 0.18.1, 0.20.0 and 0.21.2; cited at v0.20.0, src/peft/tuners/oft/layer.py):

- each adapted linear trains `oft_R.weight`, (d_in / b) blocks of b(b-1)/2 elements each, the strict upper triangle
  of a b x b skew-symmetric matrix (:92, :469; b = the block size, adjusted to a divisor of d_in, :449-456, :518);
- each forward builds the blocks' rotations by the Cayley-Neumann series (use_cayley_neumann=True, 5 terms, the
  config's default: :120-160, no solve or inverse) and rotates the input block by block with one einsum (:277),
  then runs the frozen base linear on the rotated input (:681-684): no d_in x d_in matrix, no copy of the weight;
- the adapters are fp32 on a half base (PEFT's autocast_adapter_dtype), so the input is cast to fp32 (:681) and back;
  under DeepSpeed's bf16 (ZeRO 1-3: the engine casts every parameter, rotations included, to half: deepspeed 0.19.8
  runtime/engine.py:2080-2088; a real ZeRO-3 run partitions their gradients in 2 bytes) and FSDP2's
  MixedPrecisionPolicy (accelerate sets param_dtype to the run's half dtype: accelerate 1.16.0 utils/dataclasses.py:
  2006-2009; the unsharded rotations are half in the forward) the rotations are half: no cast, the series and the
  einsum in half ("half" mode below).

What the forward keeps for backward and holds transiently was measured on one PEFT linear (real CPU tensors, CUDA's
autocast replayed, the live-bytes tracker: tests/probes/test_oft.py), exact at four shapes under bf16
AMP, bf16-pure and half.
"""

from __future__ import annotations

from math import prod


def oft(knobs) -> bool:
    return bool(knobs.lora_rank) and knobs.lora_variant == "oft"


def mode(knobs) -> str:
    """How OFT's rotations run: "half" where DeepSpeed or FSDP casts them to the module's half dtype (with or
    without FSDP's autocast: the same bytes, measured), else the run's precision (fp32 rotations on a half base)."""
    if knobs.zero_stage or knobs.fsdp != "off":
        return "half"
    return knobs.precision


def block_size(d_in: int, block: int) -> int:
    """PEFT's OFTLayer.adjust_oft_parameters (layer.py:518-538): a block size that does not divide d_in becomes the
    nearer of the divisors below and above it (the lower one on a tie)."""
    if d_in % block == 0 and block <= d_in:
        return block
    if block >= d_in:
        return d_in
    higher = block
    while higher <= d_in and d_in % higher:
        higher += 1
    lower = block
    while lower > 1 and d_in % lower:
        lower -= 1
    return lower if block - lower <= higher - block else higher


def linear_params(d_in: int, block: int) -> int:
    """One adapted linear's oft_R.weight: d_in / b blocks of b(b-1)/2."""
    b = block_size(d_in, block)
    return d_in // b * (b * (b - 1) // 2)


def oft_params(model, knobs) -> int:
    """Every adapted linear's rotation parameters (the decoder's; stacked experts by their leading dimensions)."""
    if not oft(knobs):
        return 0
    return sum(
        linear_params(t.shape[-1], knobs.lora_rank) * t.count * prod(t.shape[:-2])
        for t in model.tensors
        if t.adapted(knobs.lora_targets)
    )


def tensor_sizes(model, knobs) -> list[tuple[int, int]]:
    """(elements, how many) of the trained oft_R tensors."""
    return [
        (linear_params(t.shape[-1], knobs.lora_rank), t.count * prod(t.shape[:-2]))
        for t in model.tensors
        if t.adapted(knobs.lora_targets)
    ]


def _adapted_inputs(model, knobs) -> list[tuple[int, int]]:
    """(input width, block size) of one layer's adapted linears."""
    return [
        (x.shape[1], block_size(x.shape[1], knobs.lora_rank))
        for x in model.tensors
        if x.role == "layer" and x.lora and len(x.shape) == 2 and x.adapted(knobs.lora_targets)
    ]


def linear_saved_bytes(d_in: int, block: int, tokens: int, precision: str) -> int:
    """What one OFT linear's forward keeps for backward beyond its input (measured, tests/probes/test_oft.py):
    - bf16/fp16 AMP (half base, fp32 rotations): the einsum's bmm saves autocast's half copy of the input (2 bytes an
      element) and of the rotations, and the Cayley-Neumann series its fp32 powers: 14 d_in b bytes;
    - bf16-pure: the fp32 cast of the input (4 bytes an element) and the four fp32 n x b x b tensors of the series
      and the einsum (Q, Q^2, Q^3, the rotation): 16 d_in b;
    - fp32: the einsum saves the input itself (the layer's shared tensor), the series 16 d_in b;
    - half (ZeRO or FSDP, mode): the einsum saves the input itself, the series its four n x b x b half tensors:
      8 d_in b (CudaAutocast around a half module: the same bytes).
    The frozen base linear saves no input: its weight alone gives the input's gradient."""
    if precision == "half":
        return 8 * d_in * block
    if precision == "fp32":
        return 16 * d_in * block
    if precision == "bf16-pure":
        return 4 * tokens * d_in + 16 * d_in * block
    return 2 * tokens * d_in + 14 * d_in * block


def linear_forward_temp_bytes(d_in: int, block: int, tokens: int, precision: str) -> int:
    """One OFT linear's transient peak in its forward beyond what it keeps (measured as linear_saved_bytes): the
    fp32 cast of a half input, the rotated input in fp32 and its casts back (AMP: 12 bytes an element and 4 d_in b;
    bf16-pure and fp32: 8; half: the einsum's output and its reshaped copy, 4)."""
    if precision == "half":
        return 4 * tokens * d_in
    if precision in ("fp32", "bf16-pure"):
        return 8 * tokens * d_in
    return 12 * tokens * d_in + 4 * d_in * block


def layer_delta_bytes(model, knobs, tokens: int) -> int:
    """One OFT layer's saved tensors against the fully trained layer activations.layer_bytes counts (16-bit base):
    each adapted linear's linear_saved_bytes, less what the frozen linears and norms do not save (the shared q/k/v
    and gate/up inputs, down_proj's input, each norm's normalized output: as planner.estimate.lora's
    half_layer_delta_bytes for LoRA). In half mode (ZeRO, FSDP) the einsums save the very inputs the full layer's
    linears save, so only the norms' outputs go."""
    t, m = model.text, mode(knobs)
    out = sum(linear_saved_bytes(d, b, tokens, m) for d, b in _adapted_inputs(model, knobs))
    if m != "half":
        out -= 2 * tokens * (2 * t.hidden + t.intermediate)
    return out - t.traits.norms_per_layer * 2 * tokens * t.hidden


def forward_temp_bytes(model, knobs, tokens: int) -> int:
    """The largest adapted linear's forward transient (linear_forward_temp_bytes): in the last layer's forward, or in
    a layer recomputed in backward under checkpointing."""
    if not oft(knobs):
        return 0
    return max(
        (linear_forward_temp_bytes(d, b, tokens, mode(knobs)) for d, b in _adapted_inputs(model, knobs)), default=0
    )
