"""What accumulation costs, counted and timed on CPU ranks (gloo): one global batch per rank split into 1, 2, 4 or 8
micro-steps, run by torch DDP or FSDP2 (with and without no_sync) or DeepSpeed ZeRO-2/3 as HF's loop runs them; per
optimizer step, every collective torch.distributed ran (its op, the bytes of its whole tensor, its calls) and the wall time.
What planner.estimate.microstep's collectives (once a step or on every micro-step) are pinned to.

Counting: torch.distributed's collectives are wrapped before DeepSpeed's backend binds them (deepspeed/comm/torch.py
binds all_gather_into_tensor and reduce_scatter_tensor at its init), a nested call counted once; DDP's reducer runs
its buckets' all-reduces in C++, so DDP gets torch's own Python all-reduce hook (default_hooks.allreduce_hook, the
same all-reduce of the bucket divided by the world size), which calls torch.distributed.all_reduce; FSDP2 calls
all_gather_single and reduce_scatter_single (counted as all_gather_into_tensor and reduce_scatter_tensor).

    python -m torch.distributed.run --nproc_per_node 2 -m probes.accum JOB.json OUT_DIR
"""

from __future__ import annotations

import json
import os
import sys
import time
from contextlib import nullcontext
from pathlib import Path

from probes.dist import measure_ranks, read_job
from probes.step import Case

COUNTED = (
    "all_gather_single",  # FSDP2's (torch 2.13 _fsdp_collectives.py:119, 184)
    "reduce_scatter_single",
    "all_reduce",
    "reduce",
    "all_gather_into_tensor",
    "reduce_scatter_tensor",
    "all_gather",
    "reduce_scatter",
    "broadcast",
)
# where the tensor a collective moves as a whole is (the gathered output, the scattered input): keyword, position
WHOLE = {
    "all_gather_into_tensor": ("output_tensor", 0),
    "all_gather_single": ("output_tensor", 0),
    "reduce_scatter_single": ("input", 1),
    "reduce_scatter_tensor": ("input", 1),
    "all_gather": ("tensor_list", 0),
    "reduce_scatter": ("input_list", 1),
}
SMALL_CALL_BYTES = 64  # a call under this is a flag or a norm (DeepSpeed's overflow check, the gradient norm): "small"
# ddp, fsdp: HF's loop (no_sync but on the last micro-step); -sync: without (accelerate's sync_each_batch, verl's FSDP)
MODES = ("ddp", "ddp-sync", "fsdp", "fsdp-sync", "zero2", "zero3")


def measure_accum(case: Case, mode: str, accums: list[int], world: int = 2, steps: int = 3) -> list[dict]:
    """Per rank, per accumulation in `accums` (the case's micro_batch x grad_accum split into micro-batches of
    micro_batch x grad_accum / accumulation rows): the steps' collectives and seconds."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: accepted {', '.join(MODES)}")
    return measure_ranks(case, world, steps, module="probes.accum", job={"mode": mode, "accums": accums})


TORCH_OP = {
    "all-reduce": "all_reduce",
    "all-gather": "all_gather_into_tensor",
    "reduce-scatter": "reduce_scatter_tensor",
}
SAME_OP = {"all_gather_single": "all_gather_into_tensor", "reduce_scatter_single": "reduce_scatter_tensor"}


def planned(case: Case, mode: str, accum: int, world: int = 2) -> dict[str, dict]:
    """What planner.estimate.microstep plans for one optimizer step of the case split into `accum` micro-steps, by
    the torch.distributed call that runs it: {op: {"bytes", "calls", "per_micro_step"}}."""
    from planner.estimate import microstep
    from planner.estimate.setup import Setup
    from planner.model.families import from_config

    rows = case.micro_batch * case.grad_accum
    s = Setup(from_config(case.config, "probe"), case.knobs, rows // accum, accum, case.seq_len, world, 1)
    out: dict[str, dict] = {}
    for c in microstep.collectives(s, no_sync=not mode.endswith("-sync")):
        if not c.tensor_bytes:
            continue
        row = out.setdefault(TORCH_OP[c.op], {"bytes": 0, "calls": 0, "per_micro_step": c.per_micro_step})
        row["bytes"] += c.tensor_bytes * c.occurrences(accum)
        row["calls"] += c.calls * c.occurrences(accum)
    return out


def _bytes_of(name: str, args: tuple, kwargs: dict) -> int:
    """Bytes of the whole tensor the call moves (an all-gather's or a reduce-scatter's list of them: their sum)."""
    import torch

    key, at = WHOLE.get(name, ("tensor", 0))
    x = kwargs.get(key, args[at] if len(args) > at else None)
    xs = x if isinstance(x, (list, tuple)) else [x]
    return sum(t.numel() * t.element_size() for t in xs if isinstance(t, torch.Tensor))


def count_collectives(log: list) -> None:
    """Wrap torch.distributed's collectives: each call appends (op, bytes of its whole tensor, seconds in the call)."""
    import torch.distributed as dist

    inside = [False]

    def wrap(name, fn):
        def counted(*args, **kwargs):
            if inside[0]:
                return fn(*args, **kwargs)
            inside[0] = True
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                inside[0] = False
                log.append((name, _bytes_of(name, args, kwargs), time.perf_counter() - t0))

        return counted

    for name in COUNTED:
        setattr(dist, name, wrap(name, getattr(dist, name)))


def summary(log: list) -> dict:
    """{op: {"calls", "bytes", "seconds"}} over a step's log, calls under SMALL_CALL_BYTES as op "small"."""
    out: dict[str, dict] = {}
    for name, n, sec in log:
        op = SAME_OP.get(name, name) if n >= SMALL_CALL_BYTES else "small"
        row = out.setdefault(op, {"calls": 0, "bytes": 0, "seconds": 0.0})
        row["calls"], row["bytes"], row["seconds"] = row["calls"] + 1, row["bytes"] + n, row["seconds"] + sec
    return out


def _engine(case: Case, mode: str, model, world: int):
    """(the engine to run, the optimizer to step by hand: None when DeepSpeed steps it)."""
    from planner.export.configs import deepspeed_config_for
    from planner.model.families import from_config
    from recipe import make_optimizer
    from recipe.dist import client_optimizer_config

    if mode.startswith("fsdp"):
        from recipe import shard_fsdp

        model = shard_fsdp(model, case.knobs)
    opt = make_optimizer([p for p in model.parameters() if p.requires_grad], case.knobs.optimizer)
    if mode.startswith("fsdp"):
        return model, opt
    if mode.startswith("ddp"):
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        from torch.nn.parallel import DistributedDataParallel

        ddp = DistributedDataParallel(model)
        ddp.register_comm_hook(None, default_hooks.allreduce_hook)
        return ddp, opt
    import deepspeed

    ds = deepspeed_config_for(case.knobs, case.micro_batch, case.grad_accum, world, from_config(case.config, "probe"))
    engine, *_ = deepspeed.initialize(model=model, optimizer=opt, config=client_optimizer_config(ds))
    return engine, None


def _step(engine, opt, batch: dict, accum: int, sync_each: bool) -> None:
    """One optimizer step as HF's loop runs it (transformers trainer.py:1944-1955): DDP under no_sync but on the last
    micro-step (every one with sync_each), FSDP2 likewise through set_requires_gradient_sync (accelerate's no_sync
    for FSDP2, accelerator.py:1133-1135), DeepSpeed's backward and step on every micro-step."""
    for micro in range(accum):
        if opt is None:
            engine.backward(engine(**batch).loss)
            engine.step()
            continue
        last = micro == accum - 1
        if hasattr(engine, "set_requires_gradient_sync"):  # FSDP2
            engine.set_requires_gradient_sync(last or sync_each)
        with nullcontext() if last or sync_each or not hasattr(engine, "no_sync") else engine.no_sync():
            (engine(**batch).loss / accum).backward()
    if opt is not None:
        opt.step()
        opt.zero_grad(set_to_none=True)


def _run(job: dict, case: Case, accum: int, log: list, world: int) -> dict:
    import torch

    from probes.step import build_model, inputs, vocab_of

    rows = case.micro_batch * case.grad_accum
    split = Case(case.config, case.knobs, rows // accum, accum, case.seq_len)
    torch.manual_seed(0)
    model = build_model(split, paths="cpu")
    engine, opt = _engine(split, job["mode"], model, world)
    batch = inputs(split, vocab_of(model))
    steps = []
    for _ in range(job["steps"]):
        torch.distributed.barrier()
        log.clear()
        t0 = time.perf_counter()
        _step(engine, opt, batch, accum, job["mode"].endswith("-sync"))
        steps.append({"seconds": time.perf_counter() - t0, "collectives": summary(log)})
    if opt is None:
        engine.destroy()
    return {"accum": accum, "micro_batch": split.micro_batch, "steps": steps}


def _rank_main(job_path: str, out_dir: str) -> None:
    import torch

    from recipe.dist import init_deepspeed

    job, case = read_job(job_path)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    log: list = []
    count_collectives(log)  # before DeepSpeed's backend binds its functions
    if job["mode"].startswith(("ddp", "fsdp")):
        torch.distributed.init_process_group("gloo")
    else:
        init_deepspeed("gloo", cpu=True)
    runs = [_run(job, case, a, log, world) for a in job["accums"]]
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps({"rank": rank, "world": world, "runs": runs}))
    torch.distributed.barrier()


if __name__ == "__main__":
    from recipe.dist import exit_rank

    _rank_main(sys.argv[1], sys.argv[2])
    exit_rank(0)
