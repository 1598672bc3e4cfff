"""One rank of `python -m torch.distributed.run --nproc_per_node 4 hsdp_mesh.py DIR` (gloo, CPU): the HSDP plan
memplan wrote into DIR as its ranks build it with the venv's transformers and accelerate. The Slurm script's
exports and train.py flags; TrainingArguments and the FSDP plugin from them; accelerate's ParallelismConfig and its
device mesh (get_device_mesh) where the variables ask for one (the Accelerator's own step, accelerate 1.10.1
accelerator.py:454-476); fully_shard over mesh[fsdp_dim_names], as accelerate's fsdp2_prepare_model calls it
(utils/fsdp_utils.py:624-631; mesh None without a ParallelismConfig), on a tiny Qwen2's layers and root. accelerate
builds no FSDP Accelerator on a CPU host (ParallelismConfig._validate_accelerator refuses MULTI_CPU), hence the
steps by hand. Prints each rank's mesh, placements and share of the parameters."""

import os
import shlex
import sys
from pathlib import Path


def exported_and_flags(sbatch: str) -> tuple[dict[str, str], list[str]]:
    env = {}
    for line in sbatch.splitlines():
        if line.startswith("export ") and not line.startswith("export MASTER"):
            key, _, value = line.removeprefix("export ").partition("=")
            env[key] = value
    toks = shlex.split(sbatch.replace("\\\n", " "), comments=True)
    inner = shlex.split(next(t for t in toks if "train.py" in t and t != "train.py"))
    flags = inner[inner.index("train.py") + 1 :]
    if "--model_name_or_path" in flags:  # the script's ModelConfig's (trl_validate parses it), not TrainingArguments'
        at = flags.index("--model_name_or_path")
        flags = flags[:at] + flags[at + 2 :]
    return env, flags


def main(folder: Path) -> None:
    env, argv = exported_and_flags((folder / "launch.sbatch").read_text())
    os.environ.update(env)
    os.chdir(folder)
    import accelerate
    import torch.distributed as dist
    import transformers
    import transformers.training_args as ta
    from accelerate.utils import FullyShardedDataParallelPlugin
    from torch.distributed.fsdp import fully_shard

    ta.is_torch_bf16_gpu_available = lambda *a, **k: True
    parser = transformers.HfArgumentParser(transformers.TrainingArguments)
    (args,) = parser.parse_args_into_dataclasses(args=[*argv, "--output_dir", str(folder / "out")])
    plugin = FullyShardedDataParallelPlugin(**(getattr(args, "fsdp_plugin_args", None) or {}))
    if not dist.is_initialized():  # TrainingArguments of some releases start it themselves
        dist.init_process_group("gloo")
    mesh, sizes = None, None
    if os.environ.get("ACCELERATE_USE_PARALLELISM_CONFIG", "false").lower() == "true":
        from accelerate.parallelism_config import ParallelismConfig

        pc = ParallelismConfig()
        mesh, sizes = pc.get_device_mesh("cpu")[tuple(pc.fsdp_dim_names)], pc._sizes
    cfg = transformers.Qwen2Config(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2
    )
    cfg.vocab_size = 256
    model = transformers.Qwen2ForCausalLM(cfg)
    full = sum(p.numel() for p in model.parameters())
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh, reshard_after_forward=plugin.reshard_after_forward)
    fully_shard(model, mesh=mesh, reshard_after_forward=plugin.reshard_after_forward)
    local = sum(p.to_local().numel() for p in model.parameters())
    w = model.model.layers[0].mlp.up_proj.weight
    print(
        f"rank {dist.get_rank()}: transformers {transformers.__version__} accelerate {accelerate.__version__} "
        f"FSDP{plugin.fsdp_version} ParallelismConfig {sizes} mesh {w.device_mesh.mesh.tolist()} "
        f"{w.device_mesh.mesh_dim_names} {w.placements} params {local}/{full} = {local / full:.3f}",
        flush=True,
    )
    dist.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve())
