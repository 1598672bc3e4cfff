"""One CUDA prior, measured in a fresh process (run by gpu_parts.priors_measure): `python gpu_priors.py KIND`
prints {"bytes": ..., "detail": ...}, the device memory NVML sees it add.
- context: the CUDA context and the loaded libraries (a one-element tensor), minus what the allocator holds;
- cublas, cudnn, sdpa: what a bf16 matmul, a conv and a flash/memory-efficient SDPA call add beyond their
  tensors (library handles and workspaces);
- nccl: a one-rank NCCL group and one all-reduce (communicator buffers).
"""

from __future__ import annotations

import json
import os
import sys


def used() -> int:
    import pynvml

    pynvml.nvmlInit()
    try:
        return int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).used)
    finally:
        pynvml.nvmlShutdown()


def main(kind: str) -> dict:
    import torch

    base = used()
    x = torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    after_context = used()
    if kind == "context":
        return {"bytes": after_context - base - torch.cuda.memory_reserved(), "detail": {"nvml_before": base}}
    before = used() - torch.cuda.memory_reserved()
    if kind == "cublas":
        a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
        (a @ a).sum().item()
    elif kind == "cudnn":
        conv = torch.nn.Conv2d(3, 64, 7).cuda().half()
        conv(torch.randn(8, 3, 224, 224, device="cuda", dtype=torch.half)).sum().item()
    elif kind == "sdpa":
        q = torch.randn(4, 32, 2048, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
    elif kind == "nccl":
        import torch.distributed as dist

        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ.get("MASTER_PORT", "29531"))
        dist.init_process_group("nccl", rank=0, world_size=1)
        dist.all_reduce(x)
        torch.cuda.synchronize()
    else:
        raise SystemExit(f"unknown prior {kind!r}")
    torch.cuda.synchronize()
    grown = used() - torch.cuda.memory_reserved() - before
    return {"bytes": grown, "detail": {"context_bytes": after_context - base}}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
