"""What a weight sync to vLLM and HF generation gather on each rank, measured on CPU ranks (gloo) through TRL's own
code, where planner.estimate.weight_sync and planner.estimate.rl.generation_weights_bytes are pinned:

- `sync`: TRL 1.16's VLLMGeneration._iter_named_params (trl/generation/vllm_generation.py:435-479), the tensors
  sync_weights hands vLLM, colocated or to a server (:481-517): under ZeRO-3 one parameter gathered at a time
  (trl/distributed.py:57-71 GatheredParameters), with PEFT the whole model gathered and the adapters merged into it;
  under FSDP2 each parameter's full_tensor (:408-426);
- `generate`: TRL 1.16's _unwrap_model_for_generation (trl/models/utils.py:106-150), ZeRO-3's whole-model gather
  around HF generate (ds3_gather_for_generation, on by default).

The VLLMGeneration is TRL's class without its engine (its __init__ starts vLLM, which the CPU has not): the model,
the accelerator's distributed state and TRL's DistributedBackend, what _iter_named_params reads. Per rank it reports
the bytes held above the rank's own storages at each tensor the sync yields (every live tensor storage, unique,
allocator-rounded: probes.dist.resident_bytes), the largest; the same inside the generation's gather; and under
PEFT the peak of merge_adapter's temporaries (probes.tracker.LiveBytes, inside the whole-model gather). What the
collectives allocate in flight is gloo's, not NCCL's, and is not counted: the bytes are those a sync holds.

    python -m torch.distributed.run --nproc_per_node 2 -m probes.sync JOB.json OUT_DIR
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

from probes.dist import measure_ranks, read_job
from probes.step import Case


def measure_sync(case: Case, ops: tuple[str, ...], world: int = 2) -> list[dict]:
    """Run `ops` ("sync", "generate") in turn on `world` CPU ranks; one result per rank."""
    return measure_ranks(case, world, steps=0, module="probes.sync", job={"ops": list(ops)})


def held_bytes(model) -> int:
    """Every live tensor storage of the rank now (a DTensor's local shard), unique, allocator-rounded."""
    import gc

    import torch

    from probes.tracker import rounded_bytes

    gc.collect()
    seen = {}
    params = list(model.parameters())
    shards = [p.ds_tensor for p in params if getattr(p, "ds_tensor", None) is not None]
    for o in [*gc.get_objects(), *params, *shards]:
        if isinstance(o, torch.Tensor) and o.device.type == "cpu":
            t = o._local_tensor if hasattr(o, "_local_tensor") else o
            s = t.untyped_storage()
            if s.data_ptr():
                seen[s.data_ptr()] = s.nbytes()
    return sum(rounded_bytes(n) for n in seen.values())


def trl_accelerator(engine, zero3: bool):
    """What TRL reads of accelerate's Accelerator here: its device, unwrap_model and the distributed plugins."""
    import torch

    plugins = {
        "deepspeed_plugin": SimpleNamespace(zero_stage=3) if zero3 else None,
        "fsdp_plugin": None if zero3 else SimpleNamespace(fsdp_version=2),
    }
    return SimpleNamespace(
        device=torch.device("cpu"),
        state=SimpleNamespace(**plugins),
        unwrap_model=lambda m: getattr(m, "module", m),
    )


def trl_generation(model, accelerator):
    """TRL's VLLMGeneration without its engine: what _iter_named_params reads."""
    from trl.distributed import DistributedBackend
    from trl.generation.vllm_generation import VLLMGeneration

    gen = object.__new__(VLLMGeneration)
    gen.model, gen.accelerator, gen._dist = model, accelerator, DistributedBackend(accelerator)
    return gen


def sync_peak(model, accelerator, base: int) -> dict:
    """The largest bytes held above `base` at a tensor TRL's sync yields, and how many it yields."""
    most, count = 0, 0
    for _name, _tensor in trl_generation(model, accelerator)._iter_named_params():
        most, count = max(most, held_bytes(model) - base), count + 1
    return {"held_above_bytes": most, "tensors": count}


def merge_peak(model) -> int:
    """Peak bytes PEFT's merge_adapter allocates, inside ZeRO-3's whole-model gather as TRL runs it (then unmerged)."""
    import deepspeed

    from probes.tracker import LiveBytes

    with deepspeed.zero.GatheredParameters(list(model.parameters())):
        with LiveBytes() as t:
            model.merge_adapter()
        model.unmerge_adapter()
    return t.peak


def generate_peak(engine, accelerator, base: int) -> int:
    """Bytes held above `base` inside TRL's generation gather (ZeRO-3, ds3_gather_for_generation on)."""
    from trl.models.utils import _unwrap_model_for_generation

    with _unwrap_model_for_generation(engine, accelerator) as model:
        return held_bytes(model) - base


def _rank_main(job_path: str, out_dir: str) -> None:
    import gc

    import torch

    from planner.export.configs import deepspeed_config_for
    from planner.model.families import from_config
    from probes.step import build_model
    from recipe import make_optimizer, shard_fsdp
    from recipe.dist import client_optimizer_config, init_deepspeed

    job, case = read_job(job_path)
    k = case.knobs
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.manual_seed(0)
    model = build_model(case, paths="cpu")
    opt = make_optimizer([p for p in model.parameters() if p.requires_grad], k.optimizer)
    if k.zero_stage == 3:
        import deepspeed

        init_deepspeed("gloo", cpu=True)
        ds = deepspeed_config_for(k, case.micro_batch, case.grad_accum, world, from_config(case.config, "probe"))
        engine, *_ = deepspeed.initialize(model=model, optimizer=opt, config=client_optimizer_config(ds))
    else:
        torch.distributed.init_process_group("gloo")
        engine = model = shard_fsdp(model, k)
    accelerator = trl_accelerator(engine, k.zero_stage == 3)
    gc.collect()
    gc.freeze()  # what exists now is left out of every walk (the parameters are walked on their own): walks stay short
    base = held_bytes(model)
    out = {"rank": rank, "world": world, "base_bytes": base}
    if "sync" in job["ops"]:
        out["sync"] = sync_peak(model, accelerator, base)
    if "sync" in job["ops"] and k.lora_rank and k.zero_stage == 3:
        out["merge_peak_bytes"] = merge_peak(model)
    if "generate" in job["ops"]:
        out["generate_held_above_bytes"] = generate_peak(engine, accelerator, held_bytes(model))
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(out))
    torch.distributed.barrier()


if __name__ == "__main__":
    from recipe.dist import exit_rank

    _rank_main(sys.argv[1], sys.argv[2])
    exit_rank(0)
