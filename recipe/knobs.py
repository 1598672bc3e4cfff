"""The recipe knobs as the probes and the bundled trainer run them (planner/estimate/recipe_terms.py plans them): the
checkpointing policies, the chunked and fused losses, the attention implementation, packed rows and the
optimizer stepped inside backward.

- selective-op: torchtitan's op-level policy (torchtitan/distributed/activation_checkpoint.py, `_custom_policy`)
  through torch's selective checkpoint contexts: outputs of the attention kernel and of every mm but every
  second one are kept, the rest recomputed;
- every-N: transformers' per-layer checkpointing left on for layers N, 2N, ... (1-based, torchtitan's ac_freq);
- offload: saved tensors go to pinned host memory (torch.autograd.graph.save_on_cpu's hooks, keeping parameters
  and tensors under 1 KiB on the device as torchtune's OffloadActivations does);
- chunked loss: torchtune's chunked cross-entropy (the head and the fp32 loss chunk by chunk);
- fused loss: the head and the cross-entropy computed chunk by chunk with their gradients in forward, so the
  logits are never whole: Liger's kernel on a GPU where liger-kernel imports, else a plain-torch form of it
  with Liger's chunk size (what the CPU tests run).
"""

from __future__ import annotations

from collections import defaultdict
from contextlib import ExitStack, contextmanager, nullcontext
from functools import partial

import torch
import torch.nn.functional as F

from planner.config.knobfields import CT_SCHEMES
from planner.estimate import recipe_terms
from recipe.prequant import CtStandIn, HqqStandIn

FLASH_STANDIN = "memplan_varlen"  # the sim's and CPU's stand-in for flash-attention (same saved tensors)


def attn_implementation(knobs, device_type: str) -> str | None:
    """transformers' attn_implementation for the knob (None: the family's default)."""
    if knobs.attention == "flash":
        return "flash_attention_2" if device_type == "cuda" else _register_flash_standin()
    return "eager" if knobs.attention == "eager" else None


def _register_flash_standin() -> str:
    """SDPA on the whole row, causal, no mask, k/v unrepeated: it saves q, k, v, out and the log-sum-exp as
    flash-attention does (memory only: across a packed row's samples it attends where flash would not)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    def attend(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kw):
        out = F.scaled_dot_product_attention(
            query,
            key,
            value,
            is_causal=True,
            scale=scaling,
            dropout_p=dropout,
            enable_gqa=key.shape[1] != query.shape[1],
        )
        return out.transpose(1, 2).contiguous(), None

    AttentionInterface.register(FLASH_STANDIN, attend)
    AttentionMaskInterface.register(FLASH_STANDIN, lambda *a, **kw: None)
    return FLASH_STANDIN


# -- checkpointing -------------------------------------------------------------------------------------
_SAVE_OPS = {
    "mm",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_flash_attention_for_cpu",
}


def selective_contexts(extra=None):
    """torchtitan's op-level policy: save the outputs of the ops above, except every second mm (counted
    separately in forward and in recomputation). `extra`: a context_fn whose recompute context is entered too."""
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    meta = defaultdict(int)

    def policy(ctx, func, *args, **kwargs):
        name = func.overloadpacket.__name__
        key = f"{'recompute' if ctx.is_recompute else 'forward'}_mm"
        if name == "mm":
            meta[key] += 1
        save = name in _SAVE_OPS and not (name == "mm" and meta[key] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if save else CheckpointPolicy.PREFER_RECOMPUTE

    fwd, rec = create_selective_checkpoint_contexts(policy)
    if extra is None:
        return fwd, rec
    efwd, erec = extra()
    return _both(fwd, efwd), _both(rec, erec)


@contextmanager
def _both(a, b):
    with a, b:
        yield


def apply_checkpointing(model, knobs, context_fn=None) -> None:
    """Turn on the plan's checkpointing (not offload: offload_context wraps the step instead). `context_fn`:
    the probes' recomputation context (checkpoint's context_fn)."""
    mode = knobs.checkpointing
    if mode in ("off", "offload"):
        return
    kw = {"use_reentrant": False}
    if mode == "selective-op":
        kw["context_fn"] = partial(selective_contexts, context_fn)
    elif context_fn is not None:
        kw["context_fn"] = context_fn
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kw)
    if mode.startswith("every-"):
        from transformers.modeling_layers import GradientCheckpointingLayer

        n = int(mode.removeprefix("every-"))
        layers = [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]
        for i, layer in enumerate(layers, start=1):
            layer.gradient_checkpointing = i % n == 0


def offload_context(knobs, device_type: str):
    """--checkpointing offload: saved tensors to pinned host memory until backward brings them back."""
    if knobs.checkpointing != "offload":
        return nullcontext()
    pin = device_type == "cuda"

    from torch._subclasses.fake_tensor import FakeTensor

    def pack(t):
        if isinstance(t, torch.nn.Parameter) or t.untyped_storage().nbytes() < recipe_terms.OFFLOAD_MIN_BYTES:
            return (None, t)
        if isinstance(t, FakeTensor):  # the sim: the host copy holds no device memory; backward allocates anew
            return (t.device, (t.size(), t.stride(), t.dtype))
        host = torch.empty(t.size(), dtype=t.dtype, layout=t.layout, pin_memory=pin)
        host.copy_(t)
        return (t.device, host)

    def unpack(packed):
        device, t = packed
        if device is None:
            return t
        if isinstance(t, tuple):
            return torch.empty_strided(t[0], t[1], dtype=t[2], device=device)
        return t.to(device, non_blocking=pin)

    return torch.autograd.graph.saved_tensors_hooks(pack, unpack)


# -- loss ----------------------------------------------------------------------------------------------
def shifted_labels(labels: torch.Tensor) -> torch.Tensor:
    """Targets of every position (the next token's label; -100 at the end), as transformers' ForCausalLMLoss."""
    return F.pad(labels, (0, 1), value=-100)[:, 1:]


def _softcap(logits, cap):
    return torch.tanh(logits / cap) * cap if cap else logits


def chunked_loss_sum(hidden, head: torch.nn.Module, targets, softcap=None) -> torch.Tensor:
    """torchtune's chunked cross-entropy: the head and the fp32 loss over sequence chunks."""
    total = hidden.new_zeros((), dtype=torch.float32)
    for h, y in zip(
        hidden.chunk(recipe_terms.CHUNKED_LOSS_CHUNKS, dim=1), targets.chunk(recipe_terms.CHUNKED_LOSS_CHUNKS, dim=1)
    ):
        logits = _softcap(head(h).float(), softcap)
        total = total + F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=-100, reduction="sum")
    return total


class FusedLinearCrossEntropy(torch.autograd.Function):
    """Summed cross-entropy of (hidden @ weight^T) without the whole logits: each chunk's logits, loss and
    gradients are made in forward; backward returns the gradients it kept (Liger's scheme, in torch)."""

    @staticmethod
    def forward(ctx, hidden, weight, targets, chunk: int, softcap, dtype):
        grad_h = torch.empty_like(hidden)
        grad_w = torch.zeros_like(weight) if weight.requires_grad else None
        loss = hidden.new_zeros((), dtype=torch.float32)
        w = weight.to(dtype)  # the matmul dtype, cast once (autocast's cached copy)
        for start in range(0, hidden.shape[0], chunk):
            h, y = hidden[start : start + chunk].to(dtype), targets[start : start + chunk]
            raw = (h @ w.t()).float()
            logits = _softcap(raw, softcap)
            valid = y != -100
            safe = y.clamp(min=0)
            lse = torch.logsumexp(logits, dim=-1)
            loss = loss + ((lse - logits.gather(1, safe[:, None])[:, 0]) * valid).sum()
            grad = torch.softmax(logits, dim=-1)
            grad.scatter_add_(1, safe[:, None], -torch.ones_like(lse)[:, None])
            grad.mul_(valid[:, None])
            if softcap:
                grad.mul_(1 - (logits / softcap) ** 2)
            grad = grad.to(h.dtype)
            grad_h[start : start + chunk] = (grad @ w).to(grad_h.dtype)
            if grad_w is not None:
                grad_w.addmm_(grad.t().to(grad_w.dtype), h.to(grad_w.dtype))  # in place, as Liger's addmm
        ctx.save_for_backward(grad_h, grad_w)
        return loss

    @staticmethod
    def backward(ctx, g):
        grad_h, grad_w = ctx.saved_tensors  # scaled in place, as Liger does: no second copy of either
        return grad_h.mul_(g), None if grad_w is None else grad_w.mul_(g), None, None, None, None


def fused_loss_sum(hidden, head: torch.nn.Module, targets, softcap=None, dtype=None) -> torch.Tensor:
    """`dtype`: the head matmul's dtype (the autocast dtype under AMP; else the weight's)."""
    from planner.model.modelspec import TextSpec

    h2 = hidden.flatten(0, 1)
    spec = TextSpec(
        hidden=h2.shape[1],
        layers=1,
        heads=1,
        kv_heads=1,
        head_dim=1,
        intermediate=1,
        vocab=head.weight.shape[0],
        tied=False,
        max_positions=0,
    )
    liger = _liger_loss(softcap) if h2.is_cuda else None
    if liger is not None:  # Liger's Triton kernel where it imports (a GPU host)
        return liger(head.weight, h2.to(dtype or head.weight.dtype), targets.flatten())
    chunk = recipe_terms.fused_chunk_tokens(h2.shape[0], spec)
    return FusedLinearCrossEntropy.apply(h2, head.weight, targets.flatten(), chunk, softcap, dtype or head.weight.dtype)


def _liger_loss(softcap):
    """Liger's fused linear cross-entropy, summed, or None where liger-kernel does not import."""
    try:
        from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss
    except ImportError:
        return None
    return LigerFusedLinearCrossEntropyLoss(ignore_index=-100, reduction="sum", softcap=softcap)


def loss_sum(model, inputs: dict, labels: torch.Tensor | None, knobs, targets: torch.Tensor | None = None):
    """Summed next-token loss under the plan's --loss. standard: the model's logits, upcast (transformers'
    loss, labels shifted rather than logits, which would copy the largest activation of the step); `targets`:
    labels already shifted (a sequence-parallel rank's slice, recipe.parallel.local_slice)."""
    targets = shifted_labels(labels) if targets is None else targets
    if knobs.loss == "standard":
        logits = model(**inputs).logits
        return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=-100, reduction="sum")
    hidden = _trunk(model, inputs)(**inputs).last_hidden_state
    head = model.get_output_embeddings()
    cap = getattr(model.config.get_text_config(), "final_logit_softcapping", None)
    if knobs.loss == "chunked":
        return chunked_loss_sum(hidden, head, targets, cap)
    from recipe import HALF

    return fused_loss_sum(hidden, head, targets, cap, HALF.get(knobs.precision))


def _trunk(model, inputs: dict):
    """The model without its head: its decoder, or with images the VLM's own model (tower, projector, decoder)."""
    if "pixel_values" not in inputs:
        return model.get_decoder()
    return (model.get_base_model() if hasattr(model, "get_base_model") else model).model


# -- packing -------------------------------------------------------------------------------------------
def pack(ids: list[list[int]]) -> dict:
    """A padding-free row of samples (TRL's padding_free collator): one row, positions restarting at each
    sample, and no sample's first token a target of the one before it."""
    flat = [t for s in ids for t in s]
    positions = [p for s in ids for p in range(len(s))]
    labels = list(flat)
    start = 0
    for s in ids:
        if start:
            labels[start] = -100
        start += len(s)
    return {
        "input_ids": torch.tensor([flat]),
        "position_ids": torch.tensor([positions]),
        "labels": torch.tensor([labels]),
    }


def step_context(knobs, device_type: str):
    stack = ExitStack()
    stack.enter_context(offload_context(knobs, device_type))
    return stack


# -- optimizer in backward -----------------------------------------------------------------------------
class InBackward(torch.optim.Optimizer):
    """One optimizer per parameter, stepped by a hook the moment its gradient is complete, which then frees the
    gradient (torchtune's optimizer_in_bwd). To the trainer it is one optimizer whose step() has nothing left to
    do: its param_groups are the per-parameter optimizers' own (a scheduler moves their lr) and its state dict
    holds theirs, in parameter order (checkpoints)."""

    def __init__(self, params: list, optimizer: str, lr: float = 1e-5) -> None:
        from recipe import make_optimizer

        self.opts = [make_optimizer([p], optimizer, lr) for p in params]
        self.param_groups = [g for o in self.opts for g in o.param_groups]
        self.defaults, self.state = self.opts[0].defaults if self.opts else {}, {}
        self._optimizer_step_pre_hooks, self._optimizer_step_post_hooks = {}, {}
        self.handles = [p.register_post_accumulate_grad_hook(self._hook(o)) for p, o in zip(params, self.opts)]

    @staticmethod
    def _hook(opt):
        def step(p):
            opt.step()
            p.grad = None

        return step

    def step(self, closure=None):  # every parameter was stepped in backward
        return None

    def zero_grad(self, set_to_none: bool = True) -> None:
        for o in self.opts:
            o.zero_grad(set_to_none=True)

    def state_dict(self) -> dict:
        return {"per_parameter": [o.state_dict() for o in self.opts]}

    def load_state_dict(self, state: dict) -> None:
        for o, s in zip(self.opts, state["per_parameter"], strict=True):
            o.load_state_dict(s)


# -- QLoRA ---------------------------------------------------------------------------------------------
class _Dequantized(torch.autograd.Function):
    """x @ W^T with W rebuilt from its 4-bit storage for the forward matmul and again for the input gradient,
    keeping only the storage (bitsandbytes' MatMul4Bit). The stand-in's W holds no data: it is an allocation of
    the dequantized size (the sim's fake tensors carry none either)."""

    @staticmethod
    def forward(ctx, x, packed, shape, bias):
        ctx.shape, ctx.dtype = shape, x.dtype
        w = torch.empty(shape, dtype=x.dtype, device=x.device)
        return F.linear(x, w, bias)

    @staticmethod
    def backward(ctx, g):
        w = torch.empty(ctx.shape, dtype=ctx.dtype, device=g.device)
        return g @ w, None, None, None


class Linear4bitStandIn(torch.nn.Module):
    """A frozen linear stored as bitsandbytes stores it in 4 bits with double quantization (packed weights,
    8-bit absmax per 64, fp32 absmax per 256 blocks: planner.estimate.quant), for tracing on fake tensors."""

    def __init__(self, linear: torch.nn.Linear, nested: bool = True) -> None:
        super().__init__()
        n = linear.weight.numel()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        dev = linear.weight.device
        self.register_buffer("packed", torch.empty((n + 1) // 2, dtype=torch.uint8, device=dev))
        if nested:  # double quantization: 8-bit absmax, and their fp32 absmax per 256 blocks
            self.register_buffer("absmax", torch.empty(-(-n // 64), dtype=torch.uint8, device=dev))
            self.register_buffer("absmax2", torch.empty(-(-n // (64 * 256)), dtype=torch.float32, device=dev))
        else:
            self.register_buffer("absmax", torch.empty(-(-n // 64), dtype=torch.float32, device=dev))
        self.bias = linear.bias

    def forward(self, x):
        return _Dequantized.apply(x, self.packed, (self.out_features, self.in_features), self.bias)


class _Int8Matmul(_Dequantized):
    """bitsandbytes' MatMul8bitLt with a frozen weight (0.50.2 autograd/_functions.py:120-238, the CUDA path): the
    input kept as a ctx attribute (ctx.tensors, which checkpointing's saved-tensor hooks never see) and the whole
    weight dequantized for the input gradient."""

    @staticmethod
    def forward(ctx, x, weight, shape, bias):
        ctx.tensors = (None, None, x)
        return _Dequantized.forward(ctx, x, weight, shape, bias)


class Linear8bitStandIn(torch.nn.Module):
    """A frozen linear as bitsandbytes' Linear8bitLt stores it (int8 CB [N, K], fp32 SCB [N]), for tracing on fake
    tensors."""

    def __init__(self, linear: torch.nn.Linear) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        dev = linear.weight.device
        self.register_buffer("CB", torch.empty(linear.weight.shape, dtype=torch.int8, device=dev))
        self.register_buffer("SCB", torch.empty(linear.out_features, dtype=torch.float32, device=dev))
        self.bias = linear.bias

    def forward(self, x):
        return _Int8Matmul.apply(x, self.CB, (self.out_features, self.in_features), self.bias)


class GptqStandIn(torch.nn.Module):
    """A frozen linear as gptqmodel 7.7.0's TorchLinear holds a 4-bit, group-128 GPTQ weight (buffers qweight, qzeros,
    fp16 scales, g_idx: planner.estimate.quant) and trains it: the whole weight dequantized to fp16, cast to the
    input's dtype, and multiplied under plain autograd, which saves the dequantized weight (torch.py:344-376; the
    real layer's saved tensors: tests/probes/test_gptqmodel.py)."""

    def __init__(self, linear: torch.nn.Linear) -> None:
        super().__init__()
        k, n, dev = linear.in_features, linear.out_features, linear.weight.device
        self.in_features, self.out_features = k, n
        self.register_buffer("qweight", torch.empty(k // 8, n, dtype=torch.int32, device=dev))
        self.register_buffer("qzeros", torch.empty(-(-k // 128), n // 8, dtype=torch.int32, device=dev))
        self.register_buffer("scales", torch.empty(-(-k // 128), n, dtype=torch.float16, device=dev))
        self.register_buffer("g_idx", torch.empty(k, dtype=torch.int32, device=dev))
        self.bias = linear.bias

    def forward(self, x):
        w = torch.empty(self.in_features, self.out_features, dtype=torch.float16, device=x.device).to(x.dtype)
        out = torch.matmul(x, w)
        return out + self.bias if self.bias is not None else out


class _AwqGemm(torch.autograd.Function):
    """gptqmodel 7.7.0's AwqGemmFn and AwqGemmTritonFn (qlinear/gemm_awq.py:43-110, gemm_awq_triton.py:44-156): they save
    only the packed tensors; forward dequantizes the weight to fp16 for more than 1024 rows (the fused kernel
    otherwise), and backward dequantizes it again for the input gradient."""

    @staticmethod
    def forward(ctx, x, qweight, shape):
        ctx.save_for_backward(qweight)
        ctx.shape = shape
        k, n = shape
        if x.numel() // k > 1024:
            w = torch.empty(k, n, dtype=torch.float16, device=x.device)
            return torch.matmul(x, w.to(x.dtype))
        return torch.empty(*x.shape[:-1], n, dtype=x.dtype, device=x.device)

    @staticmethod
    def backward(ctx, g):
        k, n = ctx.shape
        w = torch.empty(k, n, dtype=torch.float16, device=g.device).to(g.dtype)
        return torch.matmul(g, w.transpose(-1, -2)), None, None


class AwqStandIn(torch.nn.Module):
    """A frozen linear as gptqmodel's AwqGEMMLinear and AwqGEMMTritonLinear hold a 4-bit, group-128 AWQ weight
    (qweight, qzeros, fp16 scales) and train it (_AwqGemm)."""

    def __init__(self, linear: torch.nn.Linear) -> None:
        super().__init__()
        k, n, dev = linear.in_features, linear.out_features, linear.weight.device
        self.in_features, self.out_features = k, n
        self.register_buffer("qweight", torch.empty(k, n // 8, dtype=torch.int32, device=dev))
        self.register_buffer("qzeros", torch.empty(-(-k // 128), n // 8, dtype=torch.int32, device=dev))
        self.register_buffer("scales", torch.empty(-(-k // 128), n, dtype=torch.float16, device=dev))
        self.bias = linear.bias

    def forward(self, x):
        out = _AwqGemm.apply(x, self.qweight, (self.in_features, self.out_features))
        return out + self.bias if self.bias is not None else out


STAND_INS = {  # 4-bit: Linear4bitStandIn(nested)
    "int8": Linear8bitStandIn,
    "gptq": GptqStandIn,
    "awq": AwqStandIn,
    "hqq": HqqStandIn,
} | {q: partial(CtStandIn, bits=bits, group=group) for q, (bits, group) in CT_SCHEMES.items()}


def quantize_base(model, knobs, fake: bool) -> None:
    """--quant: every linear inside the decoder (LoRA's base layers included; the head stays) quantized:
    bitsandbytes' Linear4bit or Linear8bitLt on real tensors, the stand-ins on fake ones. GPTQ, AWQ,
    compressed-tensors and HQQ bases are always stand-ins (gptqmodel is not a dependency; the bundled trainer refuses them: planner/frameworks/memplan.py),
    so real CPU steps of them measure the stand-in's allocations, not a real kernel's."""
    if knobs.quant == "none":
        return
    head = model.get_output_embeddings()
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is torch.nn.Linear and child is not head and not child.weight.requires_grad:
                if fake and knobs.quant in ("nf4", "fp4"):
                    setattr(parent, name, Linear4bitStandIn(child, nested=knobs.quant_absmax == "8bit"))
                elif fake or knobs.quant in ("gptq", "awq", *CT_SCHEMES, "hqq"):
                    setattr(parent, name, STAND_INS[knobs.quant](child))
                elif knobs.quant == "int8":
                    setattr(parent, name, _bnb_linear8(child))
                else:
                    setattr(parent, name, _bnb_linear(child, knobs))


def _bnb_linear8(linear: torch.nn.Linear):
    """bitsandbytes' Linear8bitLt from a linear, as transformers builds it for load_in_8bit (threshold 6.0, no fp16
    weights: transformers utils/quantization_config.py:444-447); quantized by the move to its device."""
    import bitsandbytes as bnb

    q = bnb.nn.Linear8bitLt(
        linear.in_features, linear.out_features, bias=linear.bias is not None, has_fp16_weights=False, threshold=6.0
    )
    q.weight = bnb.nn.Int8Params(linear.weight.data.cpu(), requires_grad=False, has_fp16_weights=False)
    if linear.bias is not None:
        q.bias = torch.nn.Parameter(linear.bias.data, requires_grad=False)
    return q.to(linear.weight.device)


def _bnb_linear(linear: torch.nn.Linear, knobs):
    """bitsandbytes' Linear4bit from a linear; sharded plans store the packed weight in the linear's dtype
    (bnb_4bit_quant_storage, as exported: planner.export.configs.quant_storage) so that FSDP and ZeRO-3 shard it."""
    import bitsandbytes as bnb

    quant = knobs.quant
    sharded = knobs.fsdp != "off" or knobs.zero_stage == 3
    storage = linear.weight.dtype if sharded else torch.uint8

    q = bnb.nn.Linear4bit(
        linear.in_features,
        linear.out_features,
        bias=linear.bias is not None,
        compute_dtype=linear.weight.dtype,
        compress_statistics=knobs.quant_absmax == "8bit",
        quant_type=quant,
        quant_storage=storage,
        device="meta",
    )
    q.weight = bnb.nn.Params4bit(
        linear.weight.data,
        requires_grad=False,
        compress_statistics=knobs.quant_absmax == "8bit",
        quant_type=quant,
        blocksize=64,
        quant_storage=storage,
        module=q,  # keeps the quant state on the module, where Linear4bit finds it after FSDP swaps the parameter
    )
    if linear.bias is not None:
        q.bias = torch.nn.Parameter(linear.bias.data, requires_grad=False)
    return q.to(linear.weight.device)
