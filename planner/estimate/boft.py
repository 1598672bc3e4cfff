"""BOFT's terms (--lora-variant boft, --lora-rank its block size): PEFT's butterfly orthogonal fine-tuning as ms-swift
(--tuner_type boft, peft 0.20.0) and HF scripts (BOFTConfig) run it with one butterfly factor (PEFT's and ms-swift's
default; identical code in peft 0.20.0 and 0.21.2, cited at 0.21.2, src/peft/tuners/boft/layer.py):

- each adapted linear trains boft_R, (m, d_in / b, b, b) with m = 1 (:364-367: a full b x b matrix a block, made
  skew-symmetric in the forward), and boft_s, (d_out, 1); fp32 on a half base (PEFT's autocast_adapter_dtype);
  PEFT takes no other block size: d_in must be a multiple of b (:322-326), else get_peft_model raises;
- and registers boft_P, a (m, d_in, d_in) fp32 permutation matrix (:354-362, the identity at m = 1), a buffer
  (persistent=False: not in checkpoints) made on the CPU that PEFT does not move with the adapters
  (tuners_utils.py:2168-2212 moves boft_R, boft_s and their ModuleDicts). HF's Trainer moves the whole model, and
  so boft_P, to the GPU (transformers 5.25 trainer.py:498-505) unless the model has an hf_device_map (:4802-4808),
  which transformers 4 sets for any device_map from_pretrained is given (4.57.1 modeling_utils.py:5114-5140, then
  accelerate 1.x big_modeling.py:508 in dispatch_model) and transformers 5 only for a map over several devices
  (5.25 modeling_utils.py:4510-4512). ms-swift loads with device_map cuda:<rank> (4.6.0 swift/model/
  register.py:635-637, model/utils.py:229-243; 3.12.6 swift/llm/model/register.py:484-497, 767): its 3.x lines (transformers 4) leave boft_P on the CPU, its 4.x lines move it to the GPU
  (buffers_on_gpu). The forward's copy of boft_P in the input's dtype (:627) is the same GPU tensor either way;
- each forward builds the blocks' rotations by the Cayley transform (a solve, :453-468), the whole d_in x d_in
  block-diagonal rotation in fp32 (torch.block_diag, or the fbd_cuda extension where it compiles: the same
  d_in x d_in output, :616-624), casts it and boft_P to the input's dtype (:627-628), multiplies them by bmm,
  multiplies the product by a d_in x d_in identity (:604, :636) and runs the frozen base linear on x @ R, then
  scales its output by boft_s in fp32 (:640-650).

What one linear keeps for backward and holds for a moment was measured on PEFT's own linear (real CPU tensors, CUDA's
autocast replayed, the live-bytes tracker: tests/probes/test_boft.py), exact at six shapes under bf16 AMP and
bf16-pure (the same bytes: the forward casts everything to the input's dtype).
"""

from __future__ import annotations

from math import prod

from planner.frameworks import FRAMEWORKS
from planner.frameworks.rules import runs_transformers_5

PERMUTATION_ELEMENT_BYTES = 4  # boft_P: torch.empty's default fp32 (layer.py:354)


def boft(knobs) -> bool:
    return bool(knobs.lora_rank) and knobs.lora_variant == "boft"


def _linears(model, knobs, layer: bool = False) -> list[tuple[int, int, int]]:
    """(d_in, d_out, how many) of the adapted linears (layer: one decoder layer's)."""
    if layer:
        return [
            (x.shape[1], x.shape[0], 1)
            for x in model.tensors
            if x.role == "layer" and x.lora and len(x.shape) == 2 and x.adapted(knobs.lora_targets)
        ]
    return [
        (t.shape[-1], t.shape[-2], t.count * prod(t.shape[:-2])) for t in model.tensors if t.adapted(knobs.lora_targets)
    ]


def tensor_sizes(model, knobs) -> list[tuple[int, int]]:
    """(elements, how many) of the trained tensors: boft_R (d_in / b blocks of b x b) and boft_s (d_out)."""
    if not boft(knobs):
        return []
    return [x for d, o, n in _linears(model, knobs) for x in ((d * knobs.lora_rank, n), (o, n))]


def boft_params(model, knobs) -> int:
    """Every adapted linear's boft_R and boft_s."""
    return sum(e * n for e, n in tensor_sizes(model, knobs))


def buffers_on_gpu(knobs) -> bool:
    """Whether boft_P lies on the GPU: not where ms-swift's transformers-4 lines load the model with a device_map
    (its hf_device_map stops the Trainer's move); the bundled trainer (trainer/setup.py: build_model(cfg).to(device))
    and a script that loads on the CPU have the Trainer or the script move it."""
    loaded_in_place = FRAMEWORKS[knobs.framework].device_map_load
    return not (loaded_in_place and not runs_transformers_5(knobs.framework, knobs.release))


def permutation_buffer_bytes(model, knobs) -> int:
    """boft_P on every adapted linear: d_in x d_in fp32 (GPU bytes, 0 where it stays on the CPU: buffers_on_gpu)."""
    if not boft(knobs) or not buffers_on_gpu(knobs):
        return 0
    return sum(PERMUTATION_ELEMENT_BYTES * d * d * n for d, _, n in _linears(model, knobs))


def linear_saved_bytes(d_in: int, d_out: int, block: int, tokens: int, width: int = 2) -> int:
    """What one BOFT linear's forward keeps for backward beyond its input (kept itself by x @ R), in the input's
    dtype of `width` bytes (measured, tests/probes/test_boft.py): the permutation's copy, the identity and the
    rotation R, d_in x d_in each (3 width d_in^2); the solve's three fp32 (d_in / b) x b x b tensors (12 d_in b) and
    its int32 pivots (4 d_in); the base output before the scale (width tokens d_out), the scale in fp32 and the
    ones it multiplies (4 + width) d_out."""
    return 3 * width * d_in * d_in + 12 * d_in * block + 4 * d_in + width * tokens * d_out + (4 + width) * d_out


def linear_forward_temp_bytes(d_in: int, d_out: int, tokens: int, width: int = 2) -> int:
    """One BOFT linear's transient peak in its forward beyond what it keeps and its output (measured as
    linear_saved_bytes), at the output's cast back: the half block-diagonal rotation and the bmm product held by
    PEFT's locals (2 width d_in^2), the rotated input (width tokens d_in) and the scaled output in fp32
    (4 tokens d_out)."""
    return 2 * width * d_in * d_in + width * tokens * d_in + 4 * tokens * d_out


def linear_backward_temp_bytes(d_in: int, d_out: int, tokens: int, width: int = 2) -> int:
    """One BOFT linear's backward peak beyond a frozen linear's (its input's gradient, width tokens d_in), above the
    live bytes at its start (measured, tests/probes/test_boft.py): the rotation's gradient x^T g (width d_in^2) and
    the rotated input's gradient (width tokens d_in), the unscaled output it kept already freed (width tokens d_out)."""
    return width * d_in * d_in + width * tokens * d_in - width * tokens * d_out


def layer_delta_bytes(model, knobs, tokens: int) -> int:
    """One BOFT layer's saved tensors against the fully trained layer activations.layer_bytes counts (16-bit base):
    each adapted linear's linear_saved_bytes; x @ R saves the very inputs the full layer's linears save, so only the
    norms' normalized outputs go (as OFT's half mode: planner.estimate.oft.layer_delta_bytes)."""
    t = model.text
    out = sum(linear_saved_bytes(d, o, knobs.lora_rank, tokens) for d, o, _ in _linears(model, knobs, layer=True))
    return out - t.traits.norms_per_layer * 2 * tokens * t.hidden


def backward_temp_bytes(model, knobs, tokens: int) -> int:
    """The largest adapted linear's backward transient (linear_backward_temp_bytes), in the last layer's backward."""
    if not boft(knobs):
        return 0
    return max((linear_backward_temp_bytes(d, o, tokens) for d, o, _ in _linears(model, knobs, layer=True)), default=0)


def forward_temp_bytes(model, knobs, tokens: int) -> int:
    """The largest adapted linear's forward transient (linear_forward_temp_bytes): in the last layer's forward, or in
    a layer recomputed in backward under checkpointing."""
    if not boft(knobs):
        return 0
    return max((linear_forward_temp_bytes(d, o, tokens) for d, o, _ in _linears(model, knobs, layer=True)), default=0)
