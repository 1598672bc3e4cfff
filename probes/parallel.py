"""The tensor- and sequence-parallel probe: real steps of the bundled trainer's tensor parallel (torch DTensor) and
Ulysses sequence parallel (recipe/parallel.py), FSDP2 over data x sequence parallel, under torchrun on gloo, measured
per rank against the terms of the rank's view (planner.estimate.parallel.view):
- model states after the optimizer step: this rank's local tensors of the parameters, gradients and optimizer states
  (probes.dist.fsdp_shards) -> state_terms.params_bytes, gradients_bytes, optimizer_bytes;
- the activations one micro-batch's forward saves for backward: the unique storages autograd's saved-tensor hooks
  receive (a DTensor's local tensor; parameters and FSDP2's resharded, freed gathers left out), the measure
  tests/planner/estimate/test_activations.py pins the single-process formulas with
  -> activation_terms.activations_bytes.
  torch's non-reentrant checkpoint saves a layer's inputs through the same hooks (torch/utils/checkpoint.py,
  _NoopSaveInputs), so full checkpointing is counted too;
- the logits/loss: the live-bytes tracker's peak over the trainer's loss (recipe.loss.loss_sum) and its backward
  to the logits, the logits themselves left out, as tests/planner/estimate/test_memory.py pins
  activations.logits_loss_bytes -> temp_terms.logits_loss_bytes;
- Ulysses' all-to-all copy: the bytes of the first layer's q, k and v after their all-to-all (the whole row for
  1/S of the heads, KV heads repeated to S first) -> parallel.ulysses_all_to_all_bytes. Only the copy's size: the
  trainer's exchange also stacks a send buffer (recipe.parallel._all_to_all), DeepSpeed's does not.

The model is built, split and sharded in trainer/setup.py's order (setup): recipe.model.build_model,
shard_tensor_parallel over the tp mesh, use_ulysses over the sp group, recipe.shard_fsdp over dp x sp. Context
parallelism cannot run here: torch's context_parallel shards only CUDA's SDPA kernels (torch 2.13
distributed/tensor/experimental/_context_parallel/_attention.py:918-945).

    python -m torch.distributed.run --nproc_per_node 4 -m probes.parallel JOB.json OUT_DIR
"""

from __future__ import annotations

import gc
import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

from probes.dist import fsdp_shards, measure_ranks
from probes.step import Case

TERMS = ("params", "grads", "states", "activations", "logits_loss", "all_to_all")


def analytic_terms(case: Case, world: int) -> dict[str, int]:
    """The planner's per-rank terms for the case on `world` ranks of one node: those of the rank's view."""
    from planner.estimate import activation_terms, parallel, state_terms, temp_terms
    from planner.estimate.activations import saved_dtype_bytes
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
    v = parallel.view(s)
    _, compute = saved_dtype_bytes(activation_terms.activation_profile(v.knobs))
    return {
        "params": state_terms.params_bytes(v),
        "grads": state_terms.gradients_bytes(v),
        "states": state_terms.optimizer_bytes(v),
        "activations": activation_terms.activations_bytes(v),
        "logits_loss": temp_terms.logits_loss_bytes(v),
        "all_to_all": parallel.ulysses_all_to_all_bytes(v, compute),
    }


def compare_parallel(cases: list[Case], world: int, timeout_s: float = 600) -> list[dict]:
    """One torchrun of `world` ranks runs every case (one step each); per case and rank, measured and analytic
    terms and their relative error (measured / analytic - 1; None where both are 0)."""
    job = {"rows": [{"config": c.config, "knobs": c.knobs.model_dump()} for c in cases]}
    ranks = measure_ranks(cases[0], world, 1, timeout_s, module="probes.parallel", job=job)
    out = []
    for i, case in enumerate(cases):
        analytic = analytic_terms(case, world)
        for r in ranks:
            measured = r["rows"][i]
            error = {k: round(measured[k] / analytic[k] - 1, 5) if analytic[k] else None for k in TERMS}
            error.update({k: None if measured[k] == 0 else 1.0 for k in TERMS if analytic[k] == 0})
            out.append({"rank": r["rank"], "world": world, "measured": measured, "analytic": analytic, "error": error})
    return out


class SavedTensors:
    """`with SavedTensors() as s: forward` then s.bytes(model): the unique storages autograd saved, by their local
    tensors, without the parameters' (those registered now: FSDP2's root keeps its gathered ones until backward)
    and without storages freed since (FSDP2 frees a resharded layer's gathered weights by resizing them to 0)."""

    def __enter__(self):
        import torch

        self.storages: dict = {}
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc):
        return self._hooks.__exit__(*exc)

    def _pack(self, t):
        st = _local(t).untyped_storage()
        self.storages[st.data_ptr()] = st
        return t

    def bytes(self, model) -> int:
        params = {_local(p).untyped_storage().data_ptr() for p in model.parameters()}
        return sum(st.nbytes() for ptr, st in self.storages.items() if ptr not in params)


def _local(t):
    """The plain tensor under a DTensor (its local shard) or under the AsyncCollectiveTensor that a DTensor's
    redistribution hands back to a module (torch 2.13 distributed/tensor/_api.py:596-597; the wrapper's `elem`,
    distributed/_functional_collectives.py:1055-1126)."""
    import torch
    from torch.distributed._functional_collectives import AsyncCollectiveTensor
    from torch.distributed.tensor import DTensor

    if isinstance(t, DTensor):
        with torch.no_grad():
            t = t.to_local()
    return t.wait() if isinstance(t, AsyncCollectiveTensor) else t


@contextmanager
def all_to_all_outputs():
    """The bytes of every Ulysses exchange's output while inside (recipe.parallel._all_to_all)."""
    from recipe import parallel as rp

    real, sizes = rp._all_to_all, []

    def record(x, group, scatter: int, gather: int):
        out = real(x, group, scatter, gather)
        sizes.append(out.untyped_storage().nbytes())
        return out

    rp._all_to_all = record
    try:
        yield sizes
    finally:
        rp._all_to_all = real


def build(case: Case, world: int, rank: int):
    """(recipe.parallel.Mesh, model): built, split and sharded as trainer/setup.py's setup does."""
    import torch

    from recipe import shard_fsdp
    from recipe.model import build_model
    from recipe.parallel import Mesh, shard_tensor_parallel, use_ulysses

    k = case.knobs
    par = Mesh.make(world, rank, k.sequence_parallel, k.tensor_parallel, "cpu")
    torch.manual_seed(0)
    model = build_model(case.config, k, device_type="cpu")
    if par.tp > 1:
        shard_tensor_parallel(model, par.mesh["tp"])
    if par.sp > 1:
        use_ulysses(model, par.group("sp"))
    model = shard_fsdp(model, k, "cpu", par.shard_mesh() if par.tp > 1 else None)
    return par, model


def measure_step(case: Case, world: int, rank: int) -> dict[str, int]:
    """One micro-batch (the probes' worst-case padded batch; a sequence-parallel rank's slice of it) and one
    optimizer step: the measured terms of TERMS."""
    from probes.step import inputs, vocab_of
    from probes.tracker import LiveBytes
    from recipe import make_optimizer
    from recipe.loss import loss_sum
    from recipe.parallel import local_slice

    par, model = build(case, world, rank)
    opt = make_optimizer([p for p in model.parameters() if p.requires_grad], case.knobs.optimizer)
    batch = inputs(case, vocab_of(model))
    if par.sp > 1:
        batch = local_slice(batch, par.sp, par.mesh["sp"].get_local_rank())
    model_inputs = {k: v for k, v in batch.items() if k not in ("labels", "targets")}
    with SavedTensors() as saved, all_to_all_outputs() as exchanged:
        logits = model(**model_inputs).logits
    activations = saved.bytes(model)
    held = _local(logits).detach().requires_grad_()
    with LiveBytes() as loss_bytes:
        loss_sum(_returning(held), model_inputs, batch.get("labels"), case.knobs, batch.get("targets")).backward()
    logits.backward(held.grad)
    opt.step()
    out = {
        **fsdp_shards(model, opt),
        "activations": activations,
        "logits_loss": loss_bytes.peak,
        "all_to_all": sum(exchanged[:3]),
    }
    del model, opt, logits, saved
    gc.collect()
    return out


def _returning(logits):
    """A stand-in model for recipe.loss.loss_sum, which reads model(**inputs).logits: these logits."""
    return lambda **_: SimpleNamespace(logits=logits)


def _rank_main(job_path: str, out_dir: str) -> None:
    import torch.distributed as dist

    from planner.config.spec import Knobs

    job = json.loads(Path(job_path).read_text())
    c = job["case"]
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo")
    rows = []
    for row in job["rows"]:
        case = Case(row["config"], Knobs(**row["knobs"]), c["micro_batch"], c["grad_accum"], c["seq_len"])
        rows.append(measure_step(case, world, rank))
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps({"rank": rank, "world": world, "rows": rows}))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    from recipe.dist import exit_rank

    _rank_main(sys.argv[1], sys.argv[2])
    exit_rank(0)
