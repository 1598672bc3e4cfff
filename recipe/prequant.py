"""Stand-ins for the prequantized bases transformers 4.57 loads through other libraries than bitsandbytes and
gptqmodel (--quant ct-w4a16, hqq: planner.estimate.quant): compressed-tensors' CompressedLinear and hqq's HQQLinear
as they hold and train a frozen linear, for tracing on fake tensors (recipe.quant.quantize_base picks them)."""

import torch


class CtStandIn(torch.nn.Module):
    """A frozen linear as compressed-tensors 0.12.2's CompressedLinear holds a weight-only scheme once its first
    forward has run (planner.estimate.quant): pack-quantized (kind int), weight_packed at `bits`, the half-precision
    weight_scale per `scale` (a group's size, None a row, (rows, cols) a block), weight_shape, and the dense weight it
    decompressed and kept; float-quantized (fp8), the scales and the dense weight that replaced the float8 one. Each
    forward fake-quantizes that dense weight (3 weights transient in groups, 2 a row or a block, and fp8's float8
    copy) and multiplies by the fake-quantized copy, which autograd saves for the input gradient
    (tests/probes/test_prequant.py, test_ct_schemes.py)."""

    def __init__(self, linear: torch.nn.Linear, kind: str = "int", bits: int = 4, scale=128) -> None:
        super().__init__()
        k, n, dev, dt = linear.in_features, linear.out_features, linear.weight.device, linear.weight.dtype
        self.in_features, self.out_features = k, n
        rows, cols = scale if isinstance(scale, tuple) else (1, scale or k)
        if kind == "int":
            self.register_buffer("weight_packed", torch.empty(n, k * bits // 32, dtype=torch.int32, device=dev))
            self.register_buffer("weight_shape", torch.empty(2, dtype=torch.int64, device=dev))
        self.register_buffer("weight_scale", torch.empty(-(-n // rows), -(-k // cols), dtype=dt, device=dev))
        self.register_buffer("weight", torch.empty(n, k, dtype=dt, device=dev))
        self.bias = linear.bias
        self.copies = 3 if isinstance(scale, int) else 2  # forward.py's group branch alone allocates its output first
        self.fp8 = kind == "float"  # quant_args.py:378-390: the cast to float8 and back

    def forward(self, x):
        copies = [torch.empty_like(self.weight) for _ in range(self.copies)]  # forward.py:379-393's fake quantization
        if self.fp8:
            copies.append(torch.empty(self.weight.shape, dtype=torch.uint8, device=self.weight.device))
        fake_quantized = torch.empty_like(self.weight)
        del copies
        return torch.nn.functional.linear(x, fake_quantized, self.bias)


class _HqqMatmul(torch.autograd.Function):
    """hqq 0.2.8's HQQMatmulNoCacheMul (core/quantize.py:322-352): saves only the input; forward and backward each
    dequantize the whole weight in fp32 (the unpacked copy, (W_q - zero) and its product with the scale) and cast it."""

    @staticmethod
    def forward(ctx, x, w_q, shape):
        ctx.save_for_backward(x, w_q)
        ctx.shape = shape
        return torch.matmul(x, _HqqMatmul.dequantized(x, shape).t())

    @staticmethod
    def dequantized(x, shape):
        parts = [torch.empty(shape, dtype=torch.float32, device=x.device) for _ in range(3)]
        return parts[-1].to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        x, _ = ctx.saved_tensors
        return torch.matmul(g, _HqqMatmul.dequantized(x, ctx.shape)), None, None


class HqqStandIn(torch.nn.Module):
    """A frozen linear as transformers 4.57 builds hqq's HQQLinear (4 bits, groups of 64, fp32 compute dtype: W_q
    uint8, fp32 scale and zero a group; planner.estimate.quant) and trains it (_HqqMatmul)."""

    def __init__(self, linear: torch.nn.Linear) -> None:
        super().__init__()
        k, n, dev = linear.in_features, linear.out_features, linear.weight.device
        self.in_features, self.out_features = k, n
        self.register_buffer("W_q", torch.empty(n * k // 2, dtype=torch.uint8, device=dev))
        self.register_buffer("scale", torch.empty(n * k // 64, dtype=torch.float32, device=dev))
        self.register_buffer("zero", torch.empty(n * k // 64, dtype=torch.float32, device=dev))
        self.bias = linear.bias

    def forward(self, x):
        out = _HqqMatmul.apply(x, self.W_q, (self.out_features, self.in_features))
        return out + self.bias if self.bias is not None else out
