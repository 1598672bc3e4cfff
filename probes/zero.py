"""DeepSpeed as it allocates, read from DeepSpeed's own state while real ZeRO steps run on CPU ranks (gloo):
what the analytic ZeRO terms (planner.estimate.zero) are pinned to.

Per rank it reports:
- ZeRO-3's gathered parameters: at every module's start (right after DeepSpeed's
  PartitionedParameterCoordinator.fetch_sub_module, prefetches and retained modules included), the elements
  of every parameter not NOT_AVAILABLE; the largest per step. Step 1 records DeepSpeed's trace (no prefetch,
  every module released at once), so steps 2 and later are the run's working set;
- ZeRO-3's persistent parameters (ds_persist) and the buffers it keeps for the whole run: the gradient
  partition buffer (grad_partitions_flat_buffer) and the reduce (IPG) bucket, with their element sizes;
- ZeRO-3's optimizer sub-groups (fp16_partitioned_groups_flat_numel) and the bytes the optimizer step
  allocates and holds at its peak (the live-bytes tracker around engine.step(), from step 2 on, when the
  optimizer states exist);
- with "save" in the job, the bytes of the weights a checkpoint save holds on the rank's host.

    python -m torch.distributed.run --nproc_per_node 2 -m probes.zero JOB.json OUT_DIR
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from probes.dist import measure_ranks
from probes.step import Case


def measure_zero(
    case: Case, zero: dict | None = None, world: int = 2, steps: int = 3, save: bool = False
) -> list[dict]:
    """Run `steps` ZeRO steps of `case` with the exported DeepSpeed config, its zero_optimization updated by
    `zero` (then a save's weights with `save`); one result per rank."""
    return measure_ranks(case, world, steps, module="probes.zero", job={"zero": zero or {}, "save": save})


def _gathered_numel(params: list) -> int:
    from deepspeed.runtime.zero.partition_parameters import ZeroParamStatus

    return sum(p.ds_numel for p in params if p.ds_status != ZeroParamStatus.NOT_AVAILABLE)


def _watch_fetches(params: list, peak: list[int]) -> None:
    """Record the gathered elements each time DeepSpeed has fetched a module's parameters."""
    from deepspeed.runtime.zero.partitioned_param_coordinator import PartitionedParameterCoordinator

    fetch = PartitionedParameterCoordinator.fetch_sub_module

    def watched(self, module, forward):
        fetch(self, module, forward)
        peak[0] = max(peak[0], _gathered_numel(params))

    PartitionedParameterCoordinator.fetch_sub_module = watched


def _zero3_state(model, wrapper) -> dict:
    """What ZeRO-3 keeps for the run: persistent parameters, gradient partition buffer, reduce bucket."""
    params = list(model.parameters())
    buffer = wrapper.grad_partitions_flat_buffer
    buckets = [b.buffer for b in wrapper.ipg_buckets.values() if getattr(b, "buffer", None) is not None]
    return {
        "persistent_numel": sum(p.ds_numel for p in params if p.ds_persist),
        "model_numel": sum(p.ds_numel for p in params),
        "grad_partition_numel": buffer.numel(),
        "grad_partition_element_bytes": buffer.element_size(),
        "reduce_bucket_numels": [b.numel() for b in buckets],
        "reduce_bucket_element_bytes": [b.element_size() for b in buckets],
        "sub_group_numels": [int(n) for n in wrapper.fp16_partitioned_groups_flat_numel],
    }


def _saved_weights_bytes(engine, stage3: bool) -> int:
    """The weights HF's save_model holds on each rank's host, through the calls accelerate 1.15 makes
    (accelerator.py:4070-4095): ZeRO-3 with stage3_gather_16bit_weights_on_model_save gathers every module into rank
    0's state dict; ZeRO-1/2 clone the whole module's state dict on every rank."""
    from deepspeed.checkpoint.utils import clone_tensors_for_torch_save

    from probes.dist import state_dict_bytes

    sd = (
        engine._zero3_consolidated_16bit_state_dict()
        if stage3
        else clone_tensors_for_torch_save(engine.module.state_dict())
    )
    return state_dict_bytes(sd or {})


def _rank_main(job_path: str, out_dir: str) -> None:
    import deepspeed
    import torch

    from planner.config.spec import Knobs
    from planner.export.export import deepspeed_config_for
    from planner.model.modelspec import from_config
    from probes.step import build_model, inputs
    from probes.tracker import LiveBytes
    from recipe import make_optimizer
    from recipe.dist import client_optimizer_config, init_deepspeed

    job = json.loads(Path(job_path).read_text())
    c = job["case"]
    case = Case(c["config"], Knobs(**c["knobs"]), c["micro_batch"], c["grad_accum"], c["seq_len"], c["image_tokens"])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.manual_seed(0)
    model = build_model(case, paths="cpu")
    batch = inputs(case, model.get_input_embeddings().num_embeddings)
    init_deepspeed("gloo", cpu=True)
    ds = deepspeed_config_for(case.knobs, case.micro_batch, case.grad_accum, world, from_config(case.config, "probe"))
    ds["zero_optimization"].update(job["zero"])
    opt = make_optimizer([p for p in model.parameters() if p.requires_grad], case.knobs.optimizer)
    engine, wrapper, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=client_optimizer_config(ds))
    stage3 = case.knobs.zero_stage == 3
    peak = [0]
    if stage3:
        _watch_fetches(list(model.parameters()), peak)
    gathered, step_peaks = [], []
    for _ in range(job["steps"]):
        peak[0] = 0
        for _micro in range(case.grad_accum):
            loss = engine(**batch).loss
            engine.backward(loss)
            if _micro == case.grad_accum - 1:
                with LiveBytes() as held:
                    engine.step()
                step_peaks.append(held.peak)
            else:
                engine.step()
            del loss
        gathered.append(peak[0])
    out = {"rank": rank, "world": world, "gathered_numel": gathered, "step_peak_bytes": step_peaks}
    if stage3:
        out.update(_zero3_state(model, wrapper))
    if job.get("save"):
        out["save_state_dict_bytes"] = _saved_weights_bytes(engine, stage3)
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(out))
    torch.distributed.barrier()


if __name__ == "__main__":
    from recipe.dist import exit_rank

    _rank_main(sys.argv[1], sys.argv[2])
    exit_rank(0)
