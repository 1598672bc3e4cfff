"""The --quant knob as the probes and the bundled trainer run it: every frozen linear of the decoder quantized, by
bitsandbytes on real tensors (Linear4bit, Linear8bitLt), or as a stand-in that holds what the format stores and
trains as its kernel does, for tracing on fake tensors (4-bit and int8 bitsandbytes, GPTQ and AWQ as gptqmodel
trains them; compressed-tensors and HQQ: recipe/prequant.py)."""

from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F

from planner.config.knobfields import CT_SCHEMES
from recipe.prequant import CtStandIn, HqqStandIn


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
    real layer's saved tensors: tests/probes/test_gptqmodel.py). The eager dequantization holds the int8 codes, their
    difference from the gathered zeros, the gathered fp16 scales and the product at once (qlinear/__init__.py:
    1057-1104; 6 bytes a weight measured, tests/probes/test_gptq_tf5.py)."""

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
        shape, dev = (self.in_features, self.out_features), x.device
        codes, diff = (torch.empty(shape, dtype=torch.int8, device=dev) for _ in range(2))
        scales, w = (torch.empty(shape, dtype=torch.float16, device=dev) for _ in range(2))
        del codes, diff, scales
        out = torch.matmul(x, w.to(x.dtype))
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
} | {q: partial(CtStandIn, kind=kind, bits=bits, scale=scale) for q, (kind, bits, scale) in CT_SCHEMES.items()}


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
