"""The multi-rank cpu probe: real training steps under torchrun on gloo, with torch DDP (zero 0) or
DeepSpeed ZeRO 1-3, measuring what every rank keeps resident (model states) so that the analytic
ZeRO terms (planner.estimate.memory) are checked against DeepSpeed's real sharding, not assumed.

Resident bytes are counted by walking every live tensor at quiescent moments (after DeepSpeed's or
DDP's setup, and after each optimizer step, when no autograd graph is alive): unique storages,
rounded as the CUDA allocator rounds, split into parameters (a module parameter's storage, or its
ZeRO-3 partition `ds_tensor`), optimizer (the inner torch optimizer's parameters, i.e. DeepSpeed's
fp32 master partitions, and its states) and other (gradient and communication buffers, inputs).
The live-bytes tracker is not used here: DeepSpeed swaps `param.data` under tensors it did not see.

CPU-only differences from a GPU run, each one harmless to the model-state sizes:
- DeepSpeed's optimizer is a client torch optimizer (recipe.make_optimizer) instead of its
  FusedAdam, which would be compiled at run time on CPU; the fp32 master partitions and two
  moments are the same bytes;
- DeepSpeed's shared-memory CPU collectives (another run-time build) are off: gloo carries all.

    python -m torch.distributed.run --nproc_per_node 2 -m probes.dist JOB.json OUT_DIR
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tempfile
from contextlib import nullcontext
from dataclasses import fields
from pathlib import Path

from probes.step import Case
from recipe.dist import client_optimizer_config, free_port, init_deepspeed


def measure_ranks(
    case: Case,
    world: int = 2,
    steps: int = 2,
    timeout_s: float = 600,
    module: str = "probes.dist",
    job: dict | None = None,
) -> list[dict]:
    """Run `steps` optimizer steps on `world` local ranks under `module`'s rank main (this one's `_rank_main`, or
    probes.zero's), the job's fields beside the case; one result per rank."""
    with tempfile.TemporaryDirectory(prefix="memplan-dist-") as tmp:
        path = Path(tmp) / "job.json"
        path.write_text(
            json.dumps(
                {
                    "case": {**{f.name: getattr(case, f.name) for f in fields(case)}, "knobs": case.knobs.model_dump()},
                    "steps": steps,
                    **(job or {}),
                }
            )
        )
        env = {**os.environ, "OMP_NUM_THREADS": "1", "DS_ACCELERATOR": "cpu"}
        for _ in range(3):  # a port taken between free_port and torchrun's bind: again on another
            cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(world)]
            cmd += ["--master_addr", "127.0.0.1", "--master_port", str(free_port()), "-m", module, str(path), tmp]
            proc = subprocess.run(
                cmd,
                check=False,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                env=env,
                cwd=Path(__file__).resolve().parents[1],
            )
            if proc.returncode == 0 or "EADDRINUSE" not in proc.stderr:
                break
        if proc.returncode != 0:
            raise RuntimeError(f"torchrun exited {proc.returncode}: {proc.stderr[-2000:]}")
        return [json.loads((Path(tmp) / f"rank{r}.json").read_text()) for r in range(world)]


def read_job(job_path: str) -> tuple[dict, Case]:
    """A rank's job as measure_ranks wrote it: the job's fields and its Case."""
    from planner.config.spec import Knobs

    job = json.loads(Path(job_path).read_text())
    c = job["case"]
    case = Case(c["config"], Knobs(**c["knobs"]), c["micro_batch"], c["grad_accum"], c["seq_len"], c["image_tokens"])
    return job, case


def compare_states(case: Case, world: int = 2, steps: int = 2) -> list[dict]:
    """Per rank, the model states resident after the last optimizer step against planner.estimate.memory's
    terms: parameters (params_bytes); optimizer states with DeepSpeed's fp32 master partition, plus
    the gradient partition ZeRO-3 keeps between steps (optimizer_bytes, gradients_bytes); DDP's
    buckets (comm_bucket_bytes). ZeRO-2's reduce buckets live only during backward: not compared."""
    from planner.estimate import state_terms
    from planner.estimate.setup import Setup
    from planner.model.families import from_config

    s = Setup(
        from_config(case.config, "probe"),
        case.knobs,
        case.micro_batch,
        case.grad_accum,
        case.seq_len,
        gpus_per_node=world,
    )
    zero = case.knobs.zero_stage
    if case.knobs.fsdp != "off":
        return _compare_fsdp(case, s, world, steps)
    analytic = {
        "params": state_terms.params_bytes(s),
        "states": state_terms.optimizer_bytes(s) + (state_terms.gradients_bytes(s) if zero == 3 else 0),
        "buckets": state_terms.comm_bucket_bytes(s) if zero == 0 else 0,
    }
    rows = []
    for r in measure_ranks(case, world, steps):
        last = r["after_steps"][-1]
        q = r.get("quant_state", 0)  # a 4-bit base's constants, outside the parameters: counted with them
        measured = {
            "params": last["params"] + q,
            "states": last["optimizer"] + (last["other"] - q if zero else 0),
            "buckets": r["ddp_buckets"],
        }
        rows.append(
            {
                "rank": r["rank"],
                "world": world,
                "zero": zero,
                "precision": case.knobs.precision,
                "measured": measured,
                "analytic": analytic,
                "losses": r["losses"],
            }
        )
    return rows


def _compare_fsdp(case: Case, s, world: int, steps: int) -> list[dict]:
    """FSDP2: this rank's shards of parameters, gradients and optimizer states (their local tensors) after the
    last step, against planner.estimate.memory's (sharded) params_bytes, gradients_bytes and optimizer_bytes."""
    from planner.estimate import state_terms

    analytic = {
        "params": state_terms.params_bytes(s),
        "grads": state_terms.gradients_bytes(s),
        "states": state_terms.optimizer_bytes(s),
    }
    return [
        {
            "rank": r["rank"],
            "world": world,
            "fsdp": case.knobs.fsdp,
            "precision": case.knobs.precision,
            "measured": {**r["after_steps"][-1], "params": r["after_steps"][-1]["params"] + r.get("quant_state", 0)},
            "analytic": analytic,
            "losses": r["losses"],
        }
        for r in measure_ranks(case, world, steps)
    ]


def unsharded_grad_bytes(model) -> int:
    """Bytes of the unsharded gradients FSDP2 keeps for its parameters (torch 2.13 _fsdp_param.py:802-821): the
    reduce-dtype copy (unsharded_accumulated_grad), or the gradient summed in place on the unsharded parameter."""
    total = 0
    for module in model.modules():
        get = getattr(module, "_get_fsdp_state", None)
        group = get()._fsdp_param_group if get else None
        for fp in group.fsdp_params if group else ():
            for g in (fp.unsharded_accumulated_grad, fp._unsharded_param.grad):
                total += g.numel() * g.element_size() if g is not None else 0
    return total


def quant_state_bytes(model, rounded: bool = False) -> int:
    """Bytes of the 4-bit quant states (absmax constants, code tables) this rank holds: bitsandbytes keeps them as an
    attribute of each Linear4bit (and its weight), never a parameter, so no sharding reaches them. `rounded`: as
    the CUDA allocator rounds each (as resident_bytes counts)."""
    import torch

    from probes.tracker import rounded_bytes

    seen, total = set(), 0
    for m in model.modules():
        for st in (getattr(m, "quant_state", None), getattr(getattr(m, "weight", None), "quant_state", None)):
            while st is not None:
                for t in (st.absmax, st.code, st.offset):
                    if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in seen:
                        seen.add(t.untyped_storage().data_ptr())
                        n = t.numel() * t.element_size()
                        total += rounded_bytes(n) if rounded else n
                st = st.state2
    return total


def fsdp_shards(model, optimizer) -> dict[str, int]:
    """Bytes of this rank's local shards: parameters, gradients, optimizer states (DTensors' local tensors)."""
    import torch

    def local(t):
        t = t.to_local() if hasattr(t, "to_local") else t
        return t.numel() * t.element_size()

    states = [v for st in optimizer.state.values() for v in st.values() if isinstance(v, torch.Tensor) and v.dim() > 0]
    return {
        "params": sum(local(p) for p in model.parameters()),
        "grads": sum(local(p.grad) for p in model.parameters() if p.grad is not None),
        "states": sum(local(v) for v in states),
    }


def resident_bytes(model, inner_optimizer) -> dict[str, int]:
    """Unique live tensor storages now, by parameters / optimizer / other, allocator-rounded."""
    import torch

    from probes.tracker import rounded_bytes

    def key(t):
        s = t.untyped_storage()
        return s.data_ptr(), s.nbytes()

    params = set()
    for p in model.parameters():
        params.add(key(getattr(p, "ds_tensor", None) if getattr(p, "ds_tensor", None) is not None else p))
    opt = set()
    if inner_optimizer is not None:
        for g in inner_optimizer.param_groups:
            opt.update(key(p) for p in g["params"])
        for st in inner_optimizer.state.values():
            opt.update(key(v) for v in st.values() if isinstance(v, torch.Tensor) and v.dim() > 0)
    gc.collect()
    every = {key(o) for o in gc.get_objects() if isinstance(o, torch.Tensor) and o.device.type == "cpu"}
    every |= params | opt
    out = {"params": 0, "optimizer": 0, "other": 0}
    for k in every:
        if k[1] == 0 or k[0] == 0:
            continue
        out["params" if k in params else "optimizer" if k in opt else "other"] += rounded_bytes(k[1])
    return out


def _rank_main(job_path: str, out_dir: str) -> None:
    import torch
    import torch.distributed as dist

    from probes.step import build_model, inputs, vocab_of
    from recipe import make_optimizer

    job, case = read_job(job_path)
    k = case.knobs
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.manual_seed(0)
    model = build_model(case, paths="cpu")
    batch = inputs(case, vocab_of(model))
    params = [p for p in model.parameters() if p.requires_grad]
    extra = {"ddp_buckets": 0}
    if k.fsdp != "off":
        return _fsdp_rank_main(job, case, model, batch, out_dir, rank, world)
    opt = make_optimizer(params, k.optimizer)
    if k.zero_stage == 0:
        from torch.nn.parallel import DistributedDataParallel

        from probes.tracker import LiveBytes

        dist.init_process_group("gloo")
        # the reducer's buckets live in C++, out of the tensor walk. init_sync=False: every rank builds the same
        # seeded model, and the init broadcast's flat copy (torch 2.13 nn/parallel/distributed.py:1062-1072) is
        # freed when gloo's worker thread drops its work, which can come after this block: once under load the
        # buckets read 2x (56,773,120 B for 28,386,304)
        with LiveBytes() as held:
            engine = DistributedDataParallel(model, init_sync=False)
        inner, extra["ddp_buckets"] = opt, held.live
    else:
        import deepspeed

        from planner.export.configs import deepspeed_config_for
        from planner.model.families import from_config

        init_deepspeed("gloo", cpu=True)
        ds = deepspeed_config_for(k, case.micro_batch, case.grad_accum, world, from_config(case.config, "probe"))
        engine, wrapper, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=client_optimizer_config(ds))
        inner = wrapper.optimizer
    after_init = resident_bytes(model, inner)
    after_steps, losses = [], []
    for _ in range(job["steps"]):
        for micro in range(case.grad_accum):
            if k.zero_stage == 0:
                last = micro == case.grad_accum - 1
                with engine.no_sync() if not last else nullcontext():
                    loss = engine(**batch).loss / case.grad_accum
                    loss.backward()
            else:
                loss = engine(**batch).loss
                engine.backward(loss)
                engine.step()
            losses.append(float(loss))
            del loss
        if k.zero_stage == 0:
            inner.step()
            inner.zero_grad(set_to_none=True)
        after_steps.append(resident_bytes(model, inner))
    Path(out_dir, f"rank{rank}.json").write_text(
        json.dumps(
            {
                "rank": rank,
                "world": world,
                **extra,
                "after_init": after_init,
                "after_steps": after_steps,
                "losses": losses,
                "quant_state": quant_state_bytes(model, rounded=True),
            }
        )
    )
    dist.barrier()
    dist.destroy_process_group()


def _fsdp_rank_main(job: dict, case: Case, model, batch: dict, out_dir: str, rank: int, world: int) -> None:
    import torch.distributed as dist

    from recipe import make_optimizer, shard_fsdp

    dist.init_process_group("gloo")
    model = shard_fsdp(model, case.knobs)
    opt = make_optimizer([p for p in model.parameters() if p.requires_grad], case.knobs.optimizer)
    after_steps, losses, accumulated = [], [], []
    for _ in range(job["steps"]):
        for micro in range(case.grad_accum):
            model.set_requires_gradient_sync(micro == case.grad_accum - 1)
            loss = model(**batch).loss / case.grad_accum
            loss.backward()
            losses.append(float(loss))
            del loss
            if micro < case.grad_accum - 1:  # between micro-steps: what FSDP2 holds without a reduce-scatter
                accumulated.append(unsharded_grad_bytes(model))
        opt.step()
        opt.zero_grad(set_to_none=False)  # HF and torchtitan keep the sharded gradients between steps
        after_steps.append(fsdp_shards(model, opt))
    out = {"rank": rank, "world": world, "after_steps": after_steps, "losses": losses, "accumulated": accumulated}
    out["quant_state"] = quant_state_bytes(model)
    if job.get("save"):
        out.update(full_state_dict_bytes(model, opt))
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(out))
    dist.barrier()
    dist.destroy_process_group()


def state_dict_bytes(state) -> int:
    """Bytes of the distinct storages a (nested) state dict holds."""
    import torch

    seen, total, stack = set(), 0, [state]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            stack.extend(x.values())
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
        elif isinstance(x, torch.Tensor):
            st = x.untyped_storage()
            if st.data_ptr() not in seen:
                seen.add(st.data_ptr())
                total += st.nbytes()
    return total


def full_state_dict_bytes(model, opt) -> dict[str, int]:
    """What each rank holds of FSDP2's full state dicts as HF's Trainer saves them with FULL_STATE_DICT (accelerate
    1.15 accelerator.py:4096-4100 and fsdp_utils.py:322-337: full_state_dict and cpu_offload): rank 0 all, the others
    nothing."""
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_model_state_dict,
        get_optimizer_state_dict,
    )

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return {
        "save_model_bytes": state_dict_bytes(get_model_state_dict(model, options=options)),
        "save_optimizer_bytes": state_dict_bytes(get_optimizer_state_dict(model, opt, options=options)),
    }


if __name__ == "__main__":
    from recipe.dist import exit_rank

    _rank_main(sys.argv[1], sys.argv[2])
    exit_rank(0)
