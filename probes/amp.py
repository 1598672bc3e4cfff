"""CUDA autocast's op policy replayed on any device, for tracing a mixed-precision step on CPU.

torch.autocast on CPU casts a different set of ops than on CUDA (aten/src/ATen/autocast_mode.cpp:
the CPU fp32 list lacks pow, exp, rsqrt, softmax, layer_norm, sum, ...), so a step traced under CPU
autocast keeps some tensors in half precision that CUDA keeps in fp32 (GPT-2's GELU, for one).
`CudaAutocast` is a TorchFunctionMode (above autograd, where autocast sits, so the casts are graph
nodes and matmuls save the half copies exactly as on CUDA) that applies the CUDA lists:
- lower precision: matmul-like ops and scaled_dot_product_attention get half inputs, with the
  half copy of a leaf parameter cached until `clear_cache()` (autocast caches those casts until
  the outermost autocast region exits);
- fp32: the ops CUDA autocast runs in fp32 get fp32 inputs;
- promote: mixed inputs run in the widest type.
Ops are matched by their torch-function name (F.linear, Tensor.__matmul__, Tensor.pow, ...).
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map

# torch 2.13 aten/src/ATen/autocast_mode.cpp, CUDA lower_precision_fp / fp32 / promote lists.
LOWER = {
    "linear",
    "matmul",
    "__matmul__",
    "__rmatmul__",
    "mm",
    "mv",
    "bmm",
    "addmm",
    "addmv",
    "addr",
    "baddbmm",
    "addbmm",
    "einsum",
    "chain_matmul",
    "multi_dot",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "conv_tbc",
    "prelu",
    "scaled_dot_product_attention",
    "vecdot",
}
FP32 = {
    "acos",
    "asin",
    "cosh",
    "erfinv",
    "exp",
    "expm1",
    "log",
    "log10",
    "log2",
    "log1p",
    "reciprocal",
    "rsqrt",
    "sinh",
    "tan",
    "pow",
    "__pow__",
    "__rpow__",
    "softplus",
    "layer_norm",
    "group_norm",
    "norm",
    "cosine_similarity",
    "nll_loss",
    "cross_entropy",
    "kl_div",
    "l1_loss",
    "smooth_l1_loss",
    "huber_loss",
    "mse_loss",
    "binary_cross_entropy_with_logits",
    "dist",
    "pdist",
    "cdist",
    "renorm",
    "logsumexp",
    "interpolate",
}
# fp32_set_opt_dtype: run with dtype=float32 unless the caller gave a dtype
SET_DTYPE = {"softmax", "log_softmax", "cumsum", "cumprod", "prod", "sum", "vector_norm", "matrix_norm"}
PROMOTE = {"addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "index_put", "scatter_add", "tensordot"}
_CASTABLE = (torch.float32, torch.float16, torch.bfloat16)


def _half_inputs(args) -> bool:
    return any(
        isinstance(x, torch.Tensor) and x.dtype in (torch.float16, torch.bfloat16) for x in tree_flatten(args)[0]
    )


class CudaAutocast(TorchFunctionMode):
    def __init__(self, dtype: torch.dtype, caching: bool = True) -> None:
        super().__init__()
        self.dtype = dtype
        self.caching = caching
        self._cache: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def clear_cache(self) -> None:
        self._cache.clear()

    def _to_half(self, x):
        if not isinstance(x, torch.Tensor) or x.dtype != torch.float32:
            return x
        if self.caching and x.is_leaf and x.requires_grad:
            hit = self._cache.get(id(x))
            if hit is None or hit[0] is not x:
                hit = self._cache[id(x)] = (x, x.to(self.dtype))
            return hit[1]
        return x.to(self.dtype)

    @staticmethod
    def _to(dtype):
        return lambda x: x.to(dtype) if isinstance(x, torch.Tensor) and x.dtype in _CASTABLE else x

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in LOWER:
            args, kwargs = tree_map(self._to_half, (args, kwargs))
        elif name in FP32:
            args, kwargs = tree_map(self._to(torch.float32), (args, kwargs))
        elif name in SET_DTYPE and kwargs.get("dtype") is None and _half_inputs(args):
            kwargs = {**kwargs, "dtype": torch.float32}
        elif name in PROMOTE:
            kinds = {
                x.dtype for x in tree_flatten((args, kwargs))[0] if isinstance(x, torch.Tensor) and x.dtype in _CASTABLE
            }
            if len(kinds) > 1:
                args, kwargs = tree_map(self._to(torch.float32), (args, kwargs))
        return func(*args, **kwargs)
