"""The probes' tracing harness, shared by the sim probe (fake tensors) and the cpu/cuda probes (real
tensors): the plan's model built with the HF recipe (recipe/, shared with the trainer), worst-case
inputs, and a step loop that tells the tracker where in the step it is.

Worst case inputs: every sample is `seq_len` tokens (text and image tokens), and sample 0 ends in a
padding token so that the padding mask is materialised, as in any padded batch.
"""

from __future__ import annotations

import re
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass

import torch

from planner.config.spec import Knobs
from planner.estimate.lora import dropout_zeroed
from probes.amp import CudaAutocast
from probes.tracker import LiveBytes, RecomputeGuard, module_stack_hooks
from recipe import HALF, allocate_ranks, make_optimizer
from recipe import model as recipe_model
from recipe.attention import pack
from recipe.checkpointing import offload_context
from recipe.in_backward import InBackward
from recipe.loss import loss_sum
from recipe.model import (
    amp,
    deepspeed_managed,
    fsdp_policy_half,
    vocab_of,  # noqa: F401 - the probes take it from here
)


@dataclass(frozen=True)
class Case:
    """What a probe runs: an HF config (dict), the plan's knobs and shapes."""

    config: dict
    knobs: Knobs
    micro_batch: int
    grad_accum: int
    seq_len: int
    image_tokens: int = 0


def build_model(case: Case, layers: int | None = None, paths: str = "cpu", value_head: bool = False) -> torch.nn.Module:
    """The plan's model as the trainer builds it (recipe.model), with the probes' recomputation context, the CPU's
    attention kernels (flash: its stand-in), and 4-bit stand-ins where bitsandbytes is missing."""
    k = case.knobs
    model = recipe_model.build_model(
        case.config,
        k,
        layers=layers,
        device_type="cpu",
        recompute=lambda: (nullcontext(), _Recompute(k, paths)),
        # bitsandbytes' import costs 3.3 s of a CPU (its ops' torch.compile registrations): asked only for a
        # quantized base, the one place the stand-in is chosen (recipe.quant.quantize_base)
        quant_standin=k.quant != "none" and not _bitsandbytes(),
        value_head=value_head,
    )
    zeroed = dropout_zeroed(k)  # the trainer zeroes every dropout, as TRL's disable_dropout_in_model does
    for name, m in model.named_modules():  # traced as CUDA runs it (_NoSdpaDropout)
        if zeroed and isinstance(m, torch.nn.Dropout):
            m.p = 0
        if ".lora_dropout." in name and isinstance(m, torch.nn.Dropout):
            m.memplan_lora = True
    return model


def _bitsandbytes() -> bool:
    try:
        import bitsandbytes  # noqa: F401
    except ImportError:
        return False
    return True


class _Recompute:
    """Checkpoint re-enters torch.autocast for a recomputation; ours is entered the same way
    (checkpoint's context_fn makes this object at forward time and enters it at recomputation)."""

    def __init__(self, k: Knobs, paths: str) -> None:
        self.k, self.paths = k, paths

    def __enter__(self):
        self.stack = ExitStack()
        self.stack.enter_context(RecomputeGuard())
        if amp(self.k) and not fsdp_policy_half(self.k) and self.paths == "cuda":
            self.stack.enter_context(CudaAutocast(HALF[self.k.precision], caching=False))
        return self

    def __exit__(self, *exc):
        return self.stack.__exit__(*exc)


def inputs(case: Case, vocab: int, device: str = "cpu") -> dict:
    b, s = case.micro_batch, case.seq_len
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (b, s), generator=g)
    if case.knobs.batching == "packed":  # one padding-free row of the micro-batch's samples
        return packed_inputs(case, ids, device)
    mask = torch.ones(b, s, dtype=torch.long)
    mask[0, -1] = 0
    labels = ids.masked_fill(mask == 0, -100)
    return {"input_ids": ids.to(device), "attention_mask": mask.to(device), "labels": labels.to(device)}


def vlm_inputs(case: Case, model: torch.nn.Module, device: str = "cpu", traced: bool = False) -> tuple[dict, int]:
    """A VLM case's batch with images' inputs at its image tokens per sample (probes.images), and the tokens it
    holds. Packed: a Qwen-VL micro-batch under flash in the sim's trace only (`traced`, packed_vlm)."""
    from probes.images import vlm_batch

    packed = case.knobs.batching == "packed"
    if packed and not (traced and case.knobs.attention == "flash"):
        raise ValueError(
            "packed batches with images are traced for Qwen-VL under flash only: pad them (--batching padded)"
        )
    batch, tokens = vlm_batch(model, case.config, case.micro_batch, case.seq_len, case.image_tokens)
    if packed:
        if "image_grid_thw" not in batch or "position_ids" not in batch:
            raise ValueError("packed batches with images are traced for Qwen-VL only: pad them (--batching padded)")
        batch = packed_vlm(batch)
    return {k: v.to(device) for k, v in batch.items()}, tokens


def packed_vlm(batch: dict) -> dict:
    """A Qwen-VL micro-batch packed as verl's remove-padding actor runs it (v0.7.0 workers/actor/dp_actor.py:118-131,
    :198-204): the rows' unpadded tokens in one row with their M-RoPE positions unpadded alike, no attention mask
    (flash-attn's varlen), and every row's pixel_values and image_grid_thw concatenated (utils/model.py:719-736): one
    tower call over every row's patches."""
    keep = batch.pop("attention_mask").bool()
    out = {k: (v[keep].unsqueeze(0) if v.shape == keep.shape else v) for k, v in batch.items() if k != "position_ids"}
    return {**out, "position_ids": batch["position_ids"][:, keep].unsqueeze(1)}


def packed_inputs(case: Case, ids: torch.Tensor, device: str) -> dict:
    """One packed row. On fake tensors transformers cannot find the samples' boundaries in position_ids (a
    data-dependent check), so the trace hands it the (1, 1, T, T) block mask it would have built instead:
    bool for SDPA, additive in the matmul dtype for eager (the flash stand-in takes none)."""
    from torch._guards import detect_fake_mode

    if detect_fake_mode() is None:
        return {k: v.to(device) for k, v in pack(ids.tolist()).items()}
    t = ids.numel()
    batch = {"input_ids": ids.reshape(1, t), "labels": ids.reshape(1, t).clone()}
    if case.knobs.attention == "flash":
        return batch
    if case.knobs.attention == "eager" or _family_eager(case.config):
        dtype = torch.float32 if case.knobs.precision == "fp32" else HALF[case.knobs.precision]
        batch["attention_mask"] = torch.zeros(1, 1, t, t, dtype=dtype)
    else:
        batch["attention_mask"] = torch.ones(1, 1, t, t, dtype=torch.bool)
    return batch


def _family_eager(config: dict) -> bool:
    """The family runs eager attention by default (planner.model.modelspec's reading; gpt-oss's sinks aside)."""
    from planner.model.families import from_config

    t = from_config(config, "probe").text
    return t.attention == "eager" and not t.sinks


def decoder_layers(model: torch.nn.Module, n: int) -> list[torch.nn.Module]:
    """The decoder's n layers: the largest list of n modules outside a vision tower."""
    lists = [
        (not re.search(r"vision|visual", name), sum(p.numel() for p in m.parameters()), m)
        for name, m in model.named_modules()
        if isinstance(m, torch.nn.ModuleList) and len(m) == n
    ]
    return list(max(lists, key=lambda x: x[:2])[2]) if lists else []


def position(k: int, n: int) -> tuple[str, int]:
    """Where k completed layers of n lie: the two first and two last positions are kept apart,
    the middle ones (linear in k, so never the extreme) are pooled."""
    if k <= 1:
        return ("start", k)
    if n - k <= 1:
        return ("end", n - k)
    return ("middle", 0)


class Progress:
    """Names the tracker's segment as (phase, position) from decoder-layer forward completions and
    from the gradients of each layer's trainable parameters arriving in backward."""

    def __init__(self, tracker: LiveBytes, model: torch.nn.Module, n_layers: int, drop_grads: bool) -> None:
        self.t, self.n = tracker, n_layers
        self.layers = decoder_layers(model, n_layers)
        self.handles = module_stack_hooks(tracker, model)
        self.pending: dict[int, int] = {}
        self.done = 0
        self.drop_grads = drop_grads
        self.backward_start_modules: dict[str, int] = {}  # activations by module as backward starts
        for i, layer in enumerate(self.layers):
            self.handles.append(layer.register_forward_hook(self._forward_done))
        owner = {id(p): i for i, layer in enumerate(self.layers) for p in layer.parameters() if p.requires_grad}
        self.trainable_in = {i: sum(1 for o in owner.values() if o == i) for i in range(len(self.layers))}
        for p in model.parameters():
            if p.requires_grad:
                self.handles.append(p.register_post_accumulate_grad_hook(self._grad(owner.get(id(p)))))

    def phase(self, name: str) -> None:
        if name == "backward":
            self.backward_start_modules = self.t.live_by_module()
        self.t.phase = name
        self.done = 0
        self.pending = dict(self.trainable_in)
        self.t.set_segment((name, position(0, self.n)) if name in ("forward", "backward") else (name,))

    def _forward_done(self, *_):
        if self.t.phase == "forward":
            self.done += 1
            self.t.set_segment(("forward", position(self.done, self.n)))

    def _grad(self, layer: int | None):
        def hook(p):
            if self.drop_grads:
                p.grad = None  # DeepSpeed moves gradients into its own buffers
            else:
                self.t.retag(p.grad, "grads")
            if layer is not None:
                self.pending[layer] -= 1
                if self.pending[layer] == 0:
                    self.done += 1
                    self.t.set_segment(("backward", position(self.done, self.n)))

        return hook

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def autocast_for(k: Knobs, paths: str):
    """The AMP context: CUDA's op policy (paths 'cuda') or torch's own autocast for CPU ('cpu'); none under FSDP's
    bf16 policy, which computes in bf16 itself (probes.sim.as_fsdp_casts)."""
    if not amp(k) or fsdp_policy_half(k):
        return None
    if paths == "cuda":
        return CudaAutocast(HALF[k.precision])
    return torch.autocast("cpu", dtype=HALF[k.precision])


def train_steps(
    case: Case, model, tracker: LiveBytes, batch: dict, steps: int = 2, paths: str = "cuda", n_layers: int | None = None
) -> dict[str, int]:
    """Run `steps` optimizer steps (min(accum, 2) micro-steps each: more accumulate the same way),
    forgetting the peaks of all but the last. Under DeepSpeed's stages the optimizer and gradients
    are DeepSpeed's: gradients are dropped as they arrive and no optimizer runs. Returns the
    activation bytes by module at the start of the last backward."""
    k = case.knobs
    zero = deepspeed_managed(k)
    params = [p for p in model.parameters() if p.requires_grad]
    progress = Progress(tracker, model, n_layers or 0, drop_grads=zero)
    opt = None if zero or k.optimizer_in_backward else make_optimizer(params, k.optimizer)
    in_backward = InBackward(params, k.optimizer).opts if k.optimizer_in_backward else []
    ctx = autocast_for(k, paths)
    sdpa_like_cuda = _NoSdpaDropout() if paths == "cuda" else nullcontext()
    try:
        with sdpa_like_cuda:
            for step in range(steps):
                if step == steps - 1:
                    tracker.reset_peaks()
                for _ in range(min(case.grad_accum, 2)):
                    progress.phase("forward")
                    with ctx if ctx is not None else nullcontext(), offload_context(k, paths):
                        loss = _loss(model, batch, k) / case.grad_accum
                    if isinstance(ctx, CudaAutocast):
                        ctx.clear_cache()
                    progress.phase("backward")
                    loss.backward()
                    del loss
                for o in in_backward:
                    for state in o.state.values():
                        for v in state.values():
                            if isinstance(v, torch.Tensor):
                                tracker.retag(v, "optimizer")
                if opt is not None:
                    progress.phase("optimizer")
                    opt.step()
                    for state in opt.state.values():
                        for v in state.values():
                            if isinstance(v, torch.Tensor):
                                tracker.retag(v, "optimizer")
                    progress.phase("other")
                    allocate_ranks(model, step + 1)  # AdaLoRA's allocator (recipe), before zero_grad
                    opt.zero_grad(set_to_none=True)
                else:
                    for p in params:
                        p.grad = None
    finally:
        progress.remove()
    return progress.backward_start_modules


def _loss(model, batch: dict, k: Knobs):
    """transformers' own loss for the standard one (what HF Trainer runs), the recipe's otherwise."""
    if k.loss == "standard":
        return model(**batch).loss
    inputs = {key: v for key, v in batch.items() if key != "labels"}
    return loss_sum(model, inputs, batch["labels"], k) / (batch["labels"] != -100).sum()


def _mem_efficient_sdpa(q, k, v, mask, is_causal: bool, scale):
    """SDPA as CUDA runs it when v's head size differs from q's and k's (DeepSeek's latent attention: 192 and
    128): flash needs equal sizes, so CUDA picks the memory-efficient kernel, which saves q, k, v, the float
    bias made from a boolean mask, the output and its log-sum-exp. CPU would fall back to the math kernel and
    save the s x s probabilities, which no CUDA run keeps (the sim's CUDA paths)."""
    from torch.overrides import _get_current_function_mode_stack

    for mode in _get_current_function_mode_stack():  # the aten op is below the autocast replay: cast here
        if isinstance(mode, CudaAutocast):
            q, k, v = (x.to(mode.dtype) if x.dtype == torch.float32 else x for x in (q, k, v))
    if mask is not None and mask.dtype == torch.bool:  # aten attention.cpp, convert_boolean_attn_mask
        mask = torch.zeros(mask.shape, dtype=q.dtype, device=q.device).masked_fill(~mask, float("-inf"))
    if mask is not None:
        mask = mask.expand(q.shape[0], q.shape[1], q.shape[2], k.shape[2])
    out = torch.ops.aten._scaled_dot_product_efficient_attention(
        q, k, v, mask, True, 0.0, is_causal and mask is None, scale=scale
    )
    return out[0]


class _NoSdpaDropout:
    """CUDA's memory-efficient SDPA kernel keeps no dropout mask (it regenerates it from the Philox
    seed in backward); CPU falls back to the math kernel, which saves one. Trace with p = 0. LoRA's dropout
    (PEFT's lora_dropout modules) runs CUDA's fused native_dropout, which keeps a bool mask where CPU's
    dropout keeps a noise tensor of the input's dtype: traced with native_dropout. (The model's own dropout,
    GPT-2's, is traced as before: its terms were fitted to the CPU form; not re-examined.)"""

    def __enter__(self):
        import torch.nn.functional as F

        self._orig = F.scaled_dot_product_attention
        self._drop = torch.nn.Dropout.forward

        def sdpa(*a, **kw):
            kw["dropout_p"] = 0.0
            q, k, v = a[:3]
            if q.shape[-1] != v.shape[-1] and q.shape[-1] == k.shape[-1]:
                return _mem_efficient_sdpa(
                    q,
                    k,
                    v,
                    kw.get("attn_mask", a[3] if len(a) > 3 else None),
                    kw.get("is_causal", False),
                    kw.get("scale"),
                )
            return self._orig(*a, **kw)

        drop = self._drop

        def dropout(module, x):  # PEFT's LoRA dropout only (build_model marks it); the model's own as before
            if getattr(module, "memplan_lora", False) and module.training and module.p:
                return torch.native_dropout(x, module.p, True)[0]
            return drop(module, x)

        F.scaled_dot_product_attention = sdpa
        torch.nn.Dropout.forward = dropout
        return self

    def __exit__(self, *exc):
        import torch.nn.functional as F

        F.scaled_dot_product_attention = self._orig
        torch.nn.Dropout.forward = self._drop
