"""Run by the gptqmodel venv (tools/fwenv.sh gptqmodel), not by memplan's: one training step of gptqmodel's GPTQ
TorchLinear and AWQ AwqTorchLinear (4 bits, group 128) on the CPU, printing as JSON each layer's buffers (bytes) and
the tensors autograd saves for backward (shape, dtype, bytes, whether it is the input).

    python tests/probes/gptqmodel_layers.py K N ROWS DTYPE
"""

import json
import os
import sys

os.environ.setdefault("TORCH_COMPILE_DISABLE", "1")  # the eager dequantization: the same tensors saved, no compiler

import torch


def layer(kind: str, k: int, n: int):
    if kind == "gptq":
        from gptqmodel.nn_modules.qlinear.torch import TorchLinear as cls
    else:
        from gptqmodel.nn_modules.qlinear.torch_awq import AwqTorchLinear as cls
    q = cls(
        bits=4,
        group_size=128,
        sym=True,
        desc_act=False,
        in_features=k,
        out_features=n,
        bias=False,
        register_buffers=True,
    )
    q.qweight.copy_(torch.randint(-(2**31), 2**31 - 1, q.qweight.shape, dtype=torch.int32))
    q.qzeros.copy_(torch.randint(-(2**31), 2**31 - 1, q.qzeros.shape, dtype=torch.int32))
    q.scales.copy_(torch.rand(q.scales.shape, dtype=torch.float16) * 0.01)
    if kind == "gptq":
        q.g_idx.copy_(torch.arange(k, dtype=torch.int32) // 128)
    q.post_init()
    return q.train()


def measure(kind: str, k: int, n: int, rows: int, dtype: torch.dtype) -> dict:
    q = layer(kind, k, n)
    x = torch.randn(rows, k, dtype=dtype, requires_grad=True)
    q(x).sum().backward()  # once first: AwqTorchLinear casts its scales on its first forward
    saved = []

    def pack(t):
        saved.append(
            {
                "shape": list(t.shape),
                "dtype": str(t.dtype).removeprefix("torch."),
                "bytes": t.nbytes,
                "is_input": t.untyped_storage().data_ptr() == x.untyped_storage().data_ptr(),
            }
        )
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = q(x)
    y.sum().backward()
    return {"buffers": {name: b.nbytes for name, b in q.named_buffers()}, "saved": saved}


if __name__ == "__main__":
    import gptqmodel

    k, n, rows, dtype = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), getattr(torch, sys.argv[4])
    out = {kind: measure(kind, k, n, rows, dtype) for kind in ("gptq", "awq")}
    print(json.dumps({"gptqmodel": gptqmodel.__version__, **out}))
