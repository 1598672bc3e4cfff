"""Check torchtitan 0.3.0 config modules (a function returning `Trainer.Config`) with torchtitan's own code, on a host
without a GPU: one process stands for rank 0 of the launch's world over torch's fake process group.

Usage: python torchtitan_validate.py A.py [B.py ...]   (the python of a venv with torchtitan==0.3.0; each module's
docstring holds its launch line, `Run: torchrun --nnodes N --nproc_per_node G ... --config F`)

For each module (torchtitan 0.3.0, paths under torchtitan/):
1. ConfigManager().parse_args(["--module", M, "--config", F]) as torchtitan.train does (train.py, config/manager.py:34-46):
   imports the module from its folder, calls the function, tyro rebuilds the dataclasses, so every __post_init__ runs
   (ParallelismConfig, Trainer.Config, ChatDataLoader.Config, CompileConfig);
2. ParallelDims.from_config with the launch's world size: replicate x shard x cp x tp x pp must be the world
   (distributed/parallel_dims.py:152-189), and its device mesh is built (on CPU, over the fake process group);
3. the batch rule the trainer asserts (trainer.py:415-433): global batch = local batch x data-parallel degree x the
   accumulation, the data-parallel degree being the mesh's "batch" size (replicate x shard, parallel_dims.py:395);
4. the model is built on the meta device and parallelized as the model's parallelize function starts
   (models/llama3/parallelize.py:42-59): the spmd backends' CP/attention check (distributed/full_dtensor.py:30-53),
   model.parallelize over the mesh (tensor and context parallel shardings), then the activation checkpointing policy
   is applied; FSDP's fully_shard is not (on CPU it needs the trainer's SPMD setup: torchtitan's own dry run,
   COMM_MODE=fake_backend, needs one GPU);
5. the loss is built (components/loss.py).
Exits 1 with the framework's error on the first bad module.
"""

import os
import re
import sys
from pathlib import Path

from verdict import verdicts

os.environ.setdefault("WANDB_MODE", "disabled")


def launch_of(path: Path) -> tuple[int, str]:
    """(world size, config function) from the module's `Run:` line."""
    run = re.search(r"Run: (torchrun .*)", path.read_text())
    if not run:
        raise ValueError("no `Run: torchrun ...` line in the module's docstring")
    words = run.group(1).split()
    opts = dict(zip(words[1::2], words[2::2]))
    return int(opts["--nnodes"]) * int(opts["--nproc_per_node"]), words[words.index("--config") + 1]


def parse(path: Path, fn: str):
    from torchtitan.config import ConfigManager

    sys.path.insert(0, str(path.parent))
    try:
        sys.modules.pop(path.stem, None)
        return ConfigManager().parse_args(["--module", path.stem, "--config", fn])
    finally:
        sys.path.remove(str(path.parent))


def fake_world(world: int) -> None:
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)


def mesh(cfg, world: int):
    from torchtitan.distributed import parallel_dims

    parallel_dims.device_type = "cpu"  # tools/utils.py:55 falls back to cuda where no accelerator is found
    dims = parallel_dims.ParallelDims.from_config(cfg.parallelism, world)
    dims.build_mesh()
    return dims


def check_batch(cfg, dims) -> int:
    """trainer.py:415-433."""
    t, degree = cfg.training, dims.dp_replicate * dims.dp_shard
    global_batch = t.global_batch_size if t.global_batch_size > 0 else t.local_batch_size * degree
    if global_batch % (t.local_batch_size * degree):
        raise ValueError(f"global batch {global_batch} % (local {t.local_batch_size} x data parallel {degree}) != 0")
    return global_batch // (t.local_batch_size * degree)


def check_model(cfg, dims, scratch: str) -> None:
    import torch
    from torchtitan.distributed.full_dtensor import validate_config

    with torch.device("meta"):
        model = cfg.model_spec.model.build()
    if cfg.parallelism.spmd_backend in ("full_dtensor", "spmd_types"):
        validate_config(dims, model)
        model.parallelize(dims)
    elif dims.tp_enabled:
        model.parallelize(dims)
    if cfg.activation_checkpoint is not None:
        cfg.activation_checkpoint.build(dump_folder=scratch).apply(model)


def check(path: Path) -> str:
    world, fn = launch_of(path)
    cfg = parse(path, fn)
    fake_world(world)
    dims = mesh(cfg, world)
    accum = check_batch(cfg, dims)
    check_model(cfg, dims, str(path.parent / "outputs"))
    cfg.loss.build(compile_config=cfg.compile)
    p = cfg.parallelism
    return (
        f"world={world} replicate={dims.dp_replicate} shard={dims.dp_shard} tp={p.tensor_parallel_degree} "
        f"cp={p.context_parallel_degree} local={cfg.training.local_batch_size} accum={accum} "
        f"ac={type(cfg.activation_checkpoint).__qualname__}"
    )


def main(paths: list[str]) -> int:
    return verdicts(paths, check)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
