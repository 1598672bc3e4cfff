"""What a forward saves for backward under FSDP2's bf16 MixedPrecisionPolicy with PEFT's LoRA, measured on real CPU
ranks (gloo): the tensors autograd saves (saved_tensors_hooks), unique storages by dtype, parameters left out (a
frozen linear saves its weight, or a view of it; FSDP2's unsharded parameters are freed or kept by FSDP, not by the graph). The same
count on one process without FSDP tells which one-rank trace the sim must run for an FSDP bf16 plan: the module as
built (a bf16 base, PEFT's fp32 adapters: bf16-pure's) or every floating parameter cast to bf16, as FSDP2 all-gathers
them (torch 2.13 distributed/fsdp/_fully_shard/_fsdp_param.py:586-599: param_dtype for every floating parameter
whose dtype differs; _fsdp_collectives.py:343 gathers mixed dtypes as bytes).

    python -m torch.distributed.run --nproc_per_node 2 -m probes.fsdp_cast JOB.json OUT_DIR
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from probes.dist import measure_ranks, read_job
from probes.step import Case


def measure_fsdp_saved(case: Case, world: int = 2) -> list[dict]:
    """One forward and backward of `case` under FSDP2 (recipe.shard_fsdp) on `world` gloo ranks: per rank, the
    saved bytes by dtype (saved_bytes_by_dtype)."""
    return measure_ranks(case, world, steps=1, module="probes.fsdp_cast", timeout_s=300)


def saved_bytes_by_dtype(model, batch: dict) -> dict[str, int]:
    """Bytes of the distinct storages one forward saves for backward, by dtype, parameters left out; the backward
    then runs, so that the graph is freed as in a step."""
    import torch

    seen: dict[tuple[int, int], str] = {}
    held = []  # every packed tensor kept until the count: a storage freed early cannot lend its address to another

    def parameter_storages() -> set[int]:  # FSDP2 registers the unsharded parameters on their modules in forward
        ps = (p for m in model.modules() for p in m._parameters.values() if p is not None)
        return {getattr(p, "_local_tensor", p).untyped_storage().data_ptr() for p in ps}

    def pack(t):
        s = t.untyped_storage()
        if s.nbytes() and s.data_ptr() not in parameter_storages():
            seen[(s.data_ptr(), s.nbytes())] = str(t.dtype)
            held.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(**batch).loss
    loss.backward()
    held.clear()
    out: dict[str, int] = {}
    for (_, n), dtype in seen.items():
        out[dtype] = out.get(dtype, 0) + n
    return out


def one_process_saved(case: Case, cast: bool) -> dict[str, int]:
    """saved_bytes_by_dtype on one process without FSDP, the model built for `case`'s knobs and, with `cast`, every
    floating parameter cast to bf16 (what FSDP2's bf16 policy computes with)."""
    import torch

    from probes.step import build_model, inputs

    torch.manual_seed(0)
    model = build_model(case, paths="cpu")
    if cast:
        for p in model.parameters():
            if p.dtype.is_floating_point:
                p.data = p.data.to(torch.bfloat16)
    return saved_bytes_by_dtype(model, inputs(case, model.get_input_embeddings().num_embeddings))


def _rank_main(job_path: str, out_dir: str) -> None:
    import torch
    import torch.distributed as dist

    from probes.step import build_model, inputs
    from recipe import shard_fsdp

    _, case = read_job(job_path)
    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = build_model(case, paths="cpu")
    batch = inputs(case, model.get_input_embeddings().num_embeddings)
    built = {str(p.dtype) for p in model.parameters() if p.requires_grad}
    model = shard_fsdp(model, case.knobs)
    saved = saved_bytes_by_dtype(model, batch)
    out = {"rank": rank, "saved": saved, "trained_dtypes_built": sorted(built)}
    out["trained_dtypes_stored"] = sorted({str(p.dtype) for p in model.parameters() if p.requires_grad})
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(out))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    from recipe.dist import exit_rank

    _rank_main(sys.argv[1], sys.argv[2])
    exit_rank(0)
