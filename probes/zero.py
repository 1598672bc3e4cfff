"""DeepSpeed as it allocates, read from DeepSpeed's own state while real ZeRO steps run on CPU ranks (gloo):
what the analytic ZeRO terms (planner.estimate.zero) are pinned to.

Per rank it reports:
- ZeRO-3's gathered parameters: at every module's start (right after DeepSpeed's
  PartitionedParameterCoordinator.fetch_sub_module, prefetches and retained modules included), the elements
  of every parameter not NOT_AVAILABLE; the largest per step, in forward and in backward (recomputation
  included), and at the loss (after the forward returns). Step 1 records DeepSpeed's trace (no prefetch, every
  module released at once), so steps 2 and later are the run's working set;
- ZeRO-3's all-gather buffers beside the copies of their parameters (staging), alone and with the gathered
  parameters at the same moment (held), and the largest full gradient its reduce hook takes;
- ZeRO-3's persistent parameters (ds_persist) and the buffers it keeps for the whole run: the gradient
  partition buffer (grad_partitions_flat_buffer) and the reduce (IPG) bucket, with their element sizes;
- ZeRO-3's optimizer sub-groups (fp16_partitioned_groups_flat_numel) and the bytes the optimizer step
  allocates and holds at its peak (the live-bytes tracker around engine.step(), from step 2 on, when the
  optimizer states exist);
- the bytes each backward allocates and holds at its peak (the live-bytes tracker around engine.backward()): at
  ZeRO-1/2's accumulation boundary with the optimizer offloaded, the fp64 copies that take each gradient's norm;
- the module's parameters by dtype after deepspeed.initialize (elements, trained ones apart), and ZeRO-1/2's fp32
  master partitions (single_partition_of_fp32_groups): what the sim's cast (probes.sim.as_deepspeed_casts) follows;
- with "save" in the job, the bytes of the weights a checkpoint save holds on the rank's host.

A model narrowed in width (narrowed: every matrix 1/k^2 of its elements, DeepSpeed's element limits too) runs as
the whole model would on a GPU, on CPU ranks.

    python -m torch.distributed.run --nproc_per_node 2 -m probes.zero JOB.json OUT_DIR
"""

from __future__ import annotations

import json
import os
import sys
import weakref
from pathlib import Path

from probes.dist import measure_ranks, read_job
from probes.step import Case


def measure_zero(
    case: Case, zero: dict | None = None, world: int = 2, steps: int = 3, save: bool = False
) -> list[dict]:
    """Run `steps` ZeRO steps of `case` with the exported DeepSpeed config, its zero_optimization updated by
    `zero` (then a save's weights with `save`); one result per rank."""
    return measure_ranks(case, world, steps, module="probes.zero", job={"zero": zero or {}, "save": save})


def narrowed(config: dict, k: int) -> dict:
    """A model's config at 1/k of its width, its depth and head counts kept: hidden, intermediate, vocabulary and head
    sizes divided by k, so every matrix holds 1/k^2 of its elements (norms and biases 1/k). HF's "auto" bucket
    sizes follow the hidden size (h^2, 0.9 h^2); with narrowed_limits, ZeRO-3 prefetches, keeps and releases as on
    the whole model, where the buckets are the size of its matrices (a debug model's are not)."""
    c = dict(config)
    head = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    sizes = {key: c[key] for key in ("hidden_size", "intermediate_size", "vocab_size")} | {"head_dim": head}
    if any(v % k for v in sizes.values()):
        raise ValueError(f"{sizes} are not all divisible by {k}")
    c.update({key: v // k for key, v in sizes.items()})
    return c


def narrowed_limits(k: int) -> dict:
    """DeepSpeed's element limits for a model narrowed by k (narrowed): its defaults (1e9, config.py:245, 251) over
    k^2."""
    from planner.estimate.zero import ZeroSettings as Z  # its defaults are DeepSpeed's

    return {
        "stage3_max_live_parameters": Z.max_live_parameters // k**2,
        "stage3_max_reuse_distance": Z.max_reuse_distance // k**2,
    }


def narrowed_case(model: str, lora_rank: int, k: int) -> tuple[Case, dict]:
    """A catalog model narrowed by k (narrowed) as the ZeRO-3 probe runs it: bf16, SGD as the client optimizer, full
    checkpointing, LoRA of this rank (0: full fine-tuning), micro-batch 1 x 64 tokens; and its limits."""
    from planner.config.spec import Knobs
    from planner.model.catalog import model_config

    knobs = Knobs(precision="bf16", zero_stage=3, optimizer="sgd", lora_rank=lora_rank, checkpointing="full")
    return Case(narrowed(model_config(model), k), knobs, 1, 1, 64), narrowed_limits(k)


def planned(case: Case, zero: dict, world: int = 2):
    """The Setup and ZeroSettings planner.estimate.zero reads for a case the probe runs with these
    zero_optimization values."""
    from dataclasses import replace

    from planner.estimate import zero as terms
    from planner.estimate.setup import Setup
    from planner.model.families import from_config

    s = Setup(from_config(case.config, "probe"), case.knobs, case.micro_batch, case.grad_accum, case.seq_len, world, 1)
    names = {"stage3_max_live_parameters": "max_live_parameters", "stage3_max_reuse_distance": "max_reuse_distance"}
    return s, replace(terms.settings(s.model.text.hidden), **{names.get(k, k): v for k, v in zero.items()})


def _gathered_numel(params: list) -> int:
    from deepspeed.runtime.zero.partition_parameters import ZeroParamStatus

    return sum(p.ds_numel for p in params if p.ds_status != ZeroParamStatus.NOT_AVAILABLE)


PEAKS = ("gathered", "forward", "backward", "staging", "held", "full_grad")  # per step: the largest seen


def _watch_fetches(params: list, peak: dict[str, int]) -> None:
    """Record, each time DeepSpeed has fetched a module's parameters, the gathered elements (in forward, and in
    backward, recomputation included: autograd is running a graph task) and the staging elements: the flat buffers
    of coalesced all-gathers already waited for whose batch has a parameter still to be used (the buffer lives in
    the handle the inflight registry holds for each of the batch's parameters, beside the copies wait() made:
    partition_parameters.py:1343-1371, 795; before its wait the buffer is what the gathered elements count).
    Each time a gradient reaches ZeRO-3's reduce hook, its elements: the full gradient held before the reduce
    bucket takes it (stage3.py:1569-1590, 1621-1642)."""
    import torch
    from deepspeed.runtime.zero import partition_parameters as pp
    from deepspeed.runtime.zero.partitioned_param_coordinator import PartitionedParameterCoordinator
    from deepspeed.runtime.zero.stage3 import DeepSpeedZeroOptimizer_Stage3 as Stage3

    fetch, init, reduce = (
        PartitionedParameterCoordinator.fetch_sub_module,
        pp.AllGatherCoalescedHandle.__init__,
        Stage3.reduce_independent_p_g_buckets_and_remove_grads,
    )
    handles = weakref.WeakSet()

    def watched_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        handles.add(self)

    def watched(self, module, forward):
        fetch(self, module, forward)
        gathered = _gathered_numel(params)
        phase = "backward" if torch._C._current_graph_task_id() != -1 else "forward"
        staging = sum(sum(t.numel() for t in h.partitions) for h in list(handles) if h.complete)
        for key, n in (("gathered", gathered), (phase, gathered), ("staging", staging), ("held", gathered + staging)):
            peak[key] = max(peak[key], n)

    def watched_reduce(self, param):
        peak["full_grad"] = max(peak["full_grad"], param.grad.numel())
        reduce(self, param)

    pp.AllGatherCoalescedHandle.__init__ = watched_init
    PartitionedParameterCoordinator.fetch_sub_module = watched
    Stage3.reduce_independent_p_g_buckets_and_remove_grads = watched_reduce


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


def dtype_elements(model) -> dict:
    """The module's parameter elements by dtype, all and trained: {"all": {dtype: n}, "trained": {dtype: n}}."""
    out = {"all": {}, "trained": {}}
    for p in model.parameters():
        n = getattr(p, "ds_numel", p.numel())
        for part in ("all", "trained") if p.requires_grad else ("all",):
            out[part][str(p.dtype)] = out[part].get(str(p.dtype), 0) + n
    return out


def _master_partitions(wrapper) -> dict:
    """ZeRO-1/2's fp32 master partitions of this rank (deepspeed 0.19.8 zero/stage_1_and_2.py:557-577)."""
    groups = wrapper.single_partition_of_fp32_groups
    return {
        "master_partition_numel": sum(g.numel() for g in groups),
        "master_partition_element_bytes": sorted({g.element_size() for g in groups}),
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


def _run_steps(engine, model, batch: dict, accum: int, steps: int, stage3: bool) -> dict:
    """Run the steps; per step the peaks _watch_fetches records (ZeRO-3), the gathered elements at each loss and the
    bytes each optimizer step holds at its peak; per micro-step the bytes its backward holds at its peak."""
    from probes.tracker import LiveBytes

    peak, params = dict.fromkeys(PEAKS, 0), list(model.parameters())
    if stage3:
        _watch_fetches(params, peak)
    peaks, after_forward, step_peaks, backward_peaks = {k: [] for k in PEAKS}, [], [], []
    for _ in range(steps):
        peak.update(dict.fromkeys(PEAKS, 0))
        for micro in range(accum):
            loss = engine(**batch).loss
            after_forward.append(_gathered_numel(params) if stage3 else 0)
            with LiveBytes() as backward:
                engine.backward(loss)
            backward_peaks.append(backward.peak)
            if micro == accum - 1:
                with LiveBytes() as held:
                    engine.step()
                step_peaks.append(held.peak)
            else:
                engine.step()
            del loss
        for k in PEAKS:
            peaks[k].append(peak[k])
    out = {"step_peak_bytes": step_peaks, "after_forward_numel": after_forward, "backward_peak_bytes": backward_peaks}
    return out | {("gathered_numel" if k == "gathered" else f"{k}_numel"): v for k, v in peaks.items()}


def _rank_main(job_path: str, out_dir: str) -> None:
    import deepspeed
    import torch

    from planner.export.configs import deepspeed_config_for
    from planner.model.families import from_config
    from probes.step import build_model, inputs, vocab_of
    from recipe import make_optimizer
    from recipe.dist import client_optimizer_config, init_deepspeed

    job, case = read_job(job_path)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.manual_seed(0)
    model = build_model(case, paths="cpu")
    batch = inputs(case, vocab_of(model))
    init_deepspeed("gloo", cpu=True)
    ds = deepspeed_config_for(case.knobs, case.micro_batch, case.grad_accum, world, from_config(case.config, "probe"))
    ds["zero_optimization"].update(job["zero"])
    opt = make_optimizer([p for p in model.parameters() if p.requires_grad], case.knobs.optimizer)
    config = client_optimizer_config(ds)
    if case.knobs.offload != "none":  # the client optimizer steps on the host (DeepSpeed asks for its CPUAdam else)
        config["zero_force_ds_cpu_optimizer"] = False
    engine, wrapper, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=config)
    stage3 = case.knobs.zero_stage == 3
    held = {"param_dtype_elements": dtype_elements(model)} | ({} if stage3 else _master_partitions(wrapper))
    out = {
        "rank": rank,
        "world": world,
        **held,
        **_run_steps(engine, model, batch, case.grad_accum, job["steps"], stage3),
    }
    if stage3:
        out.update(_zero3_state(model, wrapper))
    staging = getattr(wrapper, "temp_grad_buffer_for_gpu_offload", None)  # ZeRO-1/2 with the optimizer offloaded
    if staging is not None:
        out.update(offload_staging_numel=staging.numel(), offload_staging_element_bytes=staging.element_size())
    if job.get("save"):
        out["save_state_dict_bytes"] = _saved_weights_bytes(engine, stage3)
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(out))
    torch.distributed.barrier()


if __name__ == "__main__":
    from recipe.dist import exit_rank

    _rank_main(sys.argv[1], sys.argv[2])
    exit_rank(0)
