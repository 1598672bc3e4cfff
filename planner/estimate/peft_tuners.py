"""AdaLoRA's and VeRA's terms (--lora-variant adalora | vera, PEFT's AdaLoraConfig and VeraConfig at --lora-rank),
read in PEFT 0.20.0's source (the release ms-swift 4.6 pins; 0.21.2 and 0.22.0 run the same code but for ranknum):

- AdaLoRA (tuners/adalora/layer.py:67-73): per adapted linear lora_A (r x d_in), lora_E (r x 1) and lora_B
  (d_out x r) at init_r, all trained; target_r only masks lora_E in place (layer.py:485-488, model.py:333-342: the
  resize is commented out), so the tensors stay init_r wide. ranknum (one element) is frozen, but on a half base
  PEFT 0.21's autocast_adapter_dtype re-wraps it as a trained fp32 parameter (0.21.2 tuners_utils.py:2739-2745; not
  0.20.0 nor 0.22.0: planner.estimate.peft_release).
  Its RankAllocator keeps ipt, exp_avg_ipt and exp_avg_unc, a zeros_like of every lora_ parameter
  (layer.py:409-416), from the first update_and_allocate on (ms-swift calls it at every zero_grad:
  callbacks/adalora.py:23-28). The forward is LoRA's over lora_A * lora_E (layer.py:194-195); the orthogonal
  regularization (model.py:241-256) adds r x r products: bytes.
- VeRA (tuners/vera/layer.py:89-94, model.py:146-156): trained vera_lambda_b (d_out) and vera_lambda_d (r) per
  adapted linear; one pair of frozen fp32 buffers vera_A (r x the largest d_in) and vera_B (the largest d_out x r)
  shared by every layer. Its forward lambda_b * linear(lambda_d * linear(x, A[:, :d_in]), B[:d_out]) (layer.py:
  280-285) saves no copy of x (A is frozen) but lambda_b's input, tokens x d_out.
"""

from __future__ import annotations

from math import prod

from planner.estimate import peft_release


def adalora(knobs) -> bool:
    return bool(knobs.lora_rank) and knobs.lora_variant == "adalora"


def vera(knobs) -> bool:
    return bool(knobs.lora_rank) and knobs.lora_variant == "vera"


def _linears(model, knobs, layer: bool = False) -> list[tuple[int, int, int]]:
    """(d_in, d_out, how many) of the adapted linears (layer: the decoder layers' alone)."""
    return [
        (t.shape[-1], t.shape[-2], t.count * prod(t.shape[:-2]) * t.lora_rank_multiple(knobs.lora_targets))
        for t in model.tensors
        if t.adapted(knobs.lora_targets) and (t.role == "layer" or not layer)
    ]


def adalora_extra_params(model, knobs, half_base: bool) -> int:
    """AdaLoRA's trained parameters beyond LoRA's A and B at rank init_r: lora_E's r singular values per adapted
    linear, and ranknum's one element where the base is half and PEFT is 0.21 (its autocast_adapter_dtype
    makes it trained there: peft_release.trains_ranknum)."""
    if not adalora(knobs):
        return 0
    ranknum = int(half_base and peft_release.trains_ranknum(knobs))
    return sum(n * (knobs.lora_rank + ranknum) for _, _, n in _linears(model, knobs))


def vera_trained_params(model, knobs) -> int:
    """VeRA's trained vectors: lambda_b (d_out) and lambda_d (r) per adapted linear, in place of LoRA's A and B."""
    return sum(n * (d_out + knobs.lora_rank) for _, d_out, n in _linears(model, knobs))


def vera_projection_bytes(model, knobs) -> int:
    """VeRA's shared frozen projections vera_A (r x the largest d_in) and vera_B (the largest d_out x r), fp32 on any
    base (_kaiming_init on a CPU generator, model.py:154-156), half where DeepSpeed casts the module, buffers too
    (nn.Module.bfloat16 / half): one pair for the model."""
    if not vera(knobs):
        return 0
    linears = _linears(model, knobs)
    width = 2 if knobs.zero_stage and knobs.precision != "fp32" else 4
    return width * knobs.lora_rank * (max(d for d, _, _ in linears) + max(o for _, o, _ in linears))


def adalora_importance_bytes(adapter_params: int, bytes_per_param: int) -> int:
    """The RankAllocator's three buffers per lora_ parameter (A, E, B), each in the adapter's dtype."""
    return 3 * adapter_params * bytes_per_param


def tensor_sizes(model, knobs) -> list[tuple[int, int]]:
    """(elements of one tensor, how many) of the trained tensors AdaLoRA adds to LoRA's (lora_E) or VeRA trains."""
    if vera(knobs):
        return [x for d, o, n in _linears(model, knobs) for x in ((o, n), (knobs.lora_rank, n))]
    return [(knobs.lora_rank, n) for _, _, n in _linears(model, knobs)] if adalora(knobs) else []


def vera_saved_layer_bytes(model, knobs, tokens: int, saved_bytes: int, shared: int | None) -> int:
    """VeRA's saved tensors per layer against LoRA's at the same rank (planner.estimate.lora counts LoRA's): lambda_b's
    input (tokens x d_out) in the adapters' saved dtype `saved_bytes`, and no input of an adapted linear: under a
    cast (half, AMP, bf16-pure) LoRA's lora_A saves its own copy of each (d_in); in fp32 (`shared`: the input widths
    LoRA's adapters share, planner.estimate.lora.shared_inputs_width) the inputs themselves are kept by no one.
    lambda_d's input (tokens x r) and the half weight copies are LoRA's lora_B input and copies. One fp32 linear
    (tests/probes/test_peft_tuners.py) keeps tokens x (d_out + r) beside its output, exactly."""
    if not vera(knobs):
        return 0
    layers = model.text.layers
    linears = _linears(model, knobs, layer=True)
    inputs = shared if shared is not None else sum(d * n // layers for d, _, n in linears)
    return saved_bytes * tokens * (sum(o * n // layers for _, o, n in linears) - inputs)
