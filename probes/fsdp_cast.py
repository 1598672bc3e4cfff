"""What a forward saves for backward under FSDP2's bf16 MixedPrecisionPolicy with PEFT's LoRA, measured on real CPU
ranks (gloo): the tensors autograd saves (saved_tensors_hooks), unique storages by dtype, parameters left out (a
frozen linear saves its weight, or a view of it; FSDP2's unsharded parameters are freed or kept by FSDP, not by the graph). The same
count on one process without FSDP tells which one-rank trace the sim must run for an FSDP bf16 plan: the module as
built (a bf16 base, PEFT's fp32 adapters: bf16-pure's) or every floating parameter cast to bf16, as FSDP2 all-gathers
them (torch 2.13 distributed/fsdp/_fully_shard/_fsdp_param.py:586-599: param_dtype for every floating parameter
whose dtype differs; _fsdp_collectives.py:343 gathers mixed dtypes as bytes).

With the job's `peak` (measure_fsdp_peak): the peak bytes a rank holds in a steady step, counted from the CPU
allocator through torch's profiler (allocated_timeline), which a one-rank trace cannot show: the sharded parameters
in their stored dtype beside the gathered compute-dtype copies of the running units and the root.

    python -m torch.distributed.run --nproc_per_node 2 -m probes.fsdp_cast JOB.json OUT_DIR
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from probes.dist import fsdp_shards, measure_ranks, read_job
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

    from probes.step import build_model, inputs, vocab_of

    torch.manual_seed(0)
    model = build_model(case, paths="cpu")
    if cast:
        for p in model.parameters():
            if p.dtype.is_floating_point:
                p.data = p.data.to(torch.bfloat16)
    return saved_bytes_by_dtype(model, inputs(case, vocab_of(model)))


def measure_fsdp_peak(case: Case, world: int = 2) -> list[dict]:
    """Two optimizer steps of `case` under FSDP2 (recipe.shard_fsdp) on `world` gloo ranks: per rank, the peak
    bytes the second step holds (peak_step_bytes), what it holds at its start, and the first forward's saved
    bytes by dtype."""
    return measure_ranks(case, world, steps=2, module="probes.fsdp_cast", timeout_s=300, job={"peak": True})


def allocated_timeline(prof) -> list[tuple[int, int]]:
    """(time in ns, bytes allocated) after each allocation or free the CPU allocator reported to the profiler
    (torch profile_memory: c10 ProfiledCPUMemoryReporter), counted from the profile's start. Unlike a dispatch
    mode it sees FSDP2's storage resizes (the unsharded parameters are allocated and freed with
    untyped_storage().resize_, torch 2.13 distributed/fsdp/_fully_shard/_fsdp_common.py, _alloc_storage /
    _free_storage)."""
    mem = sorted((e.start_ns(), e.nbytes()) for e in prof.kineto_results.events() if e.name() == "[memory]")
    out, total = [], 0
    for t, n in mem:
        total += n
        out.append((t, total))
    return out


def peak_in(prof, timeline: list[tuple[int, int]], mark: str) -> dict[str, int]:
    """The bytes allocated at the start of the record_function range `mark` and the most within it."""
    ev = next(e for e in prof.kineto_results.events() if e.name() == mark)
    start, end = ev.start_ns(), ev.start_ns() + ev.duration_ns()
    before = [b for t, b in timeline if t < start]
    within = [b for t, b in timeline if start <= t <= end]
    at_start = before[-1] if before else 0
    return {"start": at_start, "peak": max([at_start, *within])}


def live_storage_bytes() -> int:
    """Bytes of the distinct CPU storages Python's live tensors hold now (gc), whichever thread allocated them."""
    import gc

    import torch
    from torch.distributed.tensor import DTensor

    gc.collect()
    seen = {}
    for o in gc.get_objects():  # a DTensor's bytes are its local tensor's, itself a live tensor
        if isinstance(o, torch.Tensor) and not isinstance(o, DTensor) and o.device.type == "cpu" and not o.is_meta:
            st = o.untyped_storage()
            seen[st.data_ptr()] = st.nbytes()
    return sum(n for p, n in seen.items() if p)


def _peak_main(case: Case, rank: int, out_dir: str) -> None:
    """Everything this rank's main thread allocates, from the model's build to the second step's end, through the
    profiler; the second step (forward, backward, optimizer step) is the steady one: its optimizer states exist."""
    import torch
    from torch.autograd.profiler import profile, record_function

    from probes.step import build_model, inputs, vocab_of
    from recipe import make_optimizer, shard_fsdp

    saved: dict[str, int] = {}
    with profile(profile_memory=True) as prof:
        torch.manual_seed(0)
        model = shard_fsdp(build_model(case, paths="cpu"), case.knobs)
        batch = inputs(case, vocab_of(model))
        opt = make_optimizer([p for p in model.parameters() if p.requires_grad], case.knobs.optimizer)
        saved = saved_bytes_by_dtype(model, batch)  # the first step: its forward's saved tensors counted
        opt.step()
        opt.zero_grad()
        held = live_storage_bytes()
        with record_function("memplan-step"):
            model(**batch).loss.backward()
            opt.step()
            opt.zero_grad()
    step = peak_in(prof, allocated_timeline(prof), "memplan-step")
    # the profiler's count is per thread: a buffer gloo's worker thread drops (a reduce-scatter's input, at random
    # on one rank or the other) stays counted; what the live tensors hold at the step's start corrects it
    unseen = step["start"] - held
    out = {"rank": rank, "saved": saved, "step_start_bytes": held, "peak_step_bytes": step["peak"] - unseen}
    out["profiler_unseen_frees"], out["shards"] = unseen, fsdp_shards(model, opt)
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(out))


def _rank_main(job_path: str, out_dir: str) -> None:
    import torch
    import torch.distributed as dist

    from probes.step import build_model, inputs, vocab_of
    from recipe import shard_fsdp

    job, case = read_job(job_path)
    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo")
    if job.get("peak"):
        _peak_main(case, rank, out_dir)
        dist.barrier()
        dist.destroy_process_group()
        return
    torch.manual_seed(0)
    model = build_model(case, paths="cpu")
    batch = inputs(case, vocab_of(model))
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
