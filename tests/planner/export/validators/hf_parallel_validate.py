"""Check an HF-family plan's parallel launch material with the libraries that read it (accelerate 1.15.0, transformers
5.24.0, DeepSpeed 0.19.8: this project's own venv), offline, on the CPU.

Usage: python hf_parallel_validate.py DIR [DIR ...]   (each DIR: what `planner suggest --emit` wrote for one plan)

For each folder:
1. accelerate_config.yaml (where written) goes through `accelerate launch`'s own path: its argument parser with
   `--config_file`, `_validate_launch_command` (which copies the file's sections onto the arguments,
   commands/launch.py:1202-1283), then the environment its DeepSpeed or multi-GPU launcher hands the ranks
   (utils/launch.py prepare_deepspeed_cmd_env / prepare_multi_gpu_env); every `parallelism_config_*` key must be a
   launcher argument (the copy would keep a misspelt one silently); accelerate's `ParallelismConfig()` is built from
   that environment, as the Accelerator builds it (accelerator.py:455-460), and its sizes must cover the processes
   (Ulysses: sp x data parallel; context parallel: accelerate's own total_size rule);
2. train_args.json's `parallelism_config` builds `ParallelismConfig(**fields)` with its handler, and the rest of the
   file parses as TrainingArguments fields;
3. ds_config.json (where written) is loaded by DeepSpeed's DeepSpeedConfig on a one-rank gloo group, with an mpu
   giving the plan's data-parallel size and Ulysses' train_batch_size as accelerate sets it (accelerator.py:2358-2365):
   its batch assertion and the tensor_parallel section's model run.
Prints "DIR: OK ..." per folder; "DIR: INVALID ..." and exit 1 on the first bad one.
"""

import json
import os
import sys
from pathlib import Path
from unittest import mock

from verdict import verdicts


def launcher_env(cfg_path: Path) -> tuple[dict, dict]:
    """(the accelerate config as loaded, the environment accelerate's launcher hands the ranks)."""
    import yaml
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_deepspeed_cmd_env, prepare_multi_gpu_env

    raw = yaml.safe_load(cfg_path.read_text())
    parser = launch_command_parser()
    known = {a.dest for a in parser._actions}
    bad = [k for k in raw.get("parallelism_config", {}) if k not in known]
    if bad:
        raise ValueError(f"not accelerate launch arguments: {bad}")
    args = parser.parse_args(["--config_file", str(cfg_path), "train.py"])
    args, defaults, _mp = _validate_launch_command(args)
    if args.use_deepspeed:  # as launch_command does before the DeepSpeed launcher (commands/launch.py:1393-1398)
        args.deepspeed_fields_from_accelerate_config = ",".join(defaults.deepspeed_config)
        _cmd, env = prepare_deepspeed_cmd_env(args)
    else:
        env = prepare_multi_gpu_env(args)
    return raw, {k: v for k, v in env.items() if k.startswith(("PARALLELISM_CONFIG_", "ACCELERATE_USE_PARALLELISM"))}


def check_accelerate(cfg_path: Path) -> tuple[str, object]:
    from accelerate.parallelism_config import ParallelismConfig

    raw, env = launcher_env(cfg_path)
    if not env:
        return "no parallelism section", None
    with mock.patch.dict(os.environ, env):
        pc = ParallelismConfig()
    world = raw["num_processes"]
    if pc.sp_enabled:  # DeepSpeed forms sp x dp itself (accelerate skips its size check, accelerator.py:369)
        if world % pc.sp_size:
            raise ValueError(f"sp_size {pc.sp_size} does not divide {world} processes")
    elif pc.total_size != world:
        raise ValueError(f"ParallelismConfig total_size {pc.total_size} != num_processes {world}")
    return f"accelerate sizes {pc._sizes}", pc


def check_train_args(path: Path) -> tuple[dict, object]:
    from accelerate.parallelism_config import ParallelismConfig
    from accelerate.utils import DeepSpeedSequenceParallelConfig, TorchContextParallelConfig
    from transformers import HfArgumentParser, TrainingArguments

    args = json.loads(path.read_text())
    fields = args.pop("parallelism_config", None)
    known = {f for f in TrainingArguments.__dataclass_fields__}
    extra = sorted(set(args) - known - {"model_init_kwargs", "packing", "padding_free"})  # TRL's SFTConfig
    if extra:
        raise ValueError(f"not TrainingArguments fields: {extra}")
    plain = {k: v for k, v in args.items() if k in known and k not in ("deepspeed", "fsdp", "fsdp_config")}
    HfArgumentParser(TrainingArguments).parse_dict({**plain, "output_dir": "out", "use_cpu": True})
    pc = None
    if fields:
        handlers = {"sp_handler": DeepSpeedSequenceParallelConfig, "cp_handler": TorchContextParallelConfig}
        built = {k: handlers[k](**v) if k in handlers else v for k, v in fields.items()}
        pc = ParallelismConfig(**built)
    return args, pc


class _Mpu:
    """The data-parallel group size DeepSpeed asks the mpu for (runtime/config.py:458-463)."""

    def __init__(self, dp: int):
        self.dp = dp

    def get_data_parallel_world_size(self) -> int:
        return self.dp


def check_deepspeed(path: Path, dp: int, accelerate_dp: int | None) -> str:
    """`dp`: the ranks DeepSpeed counts in its batch check (Ulysses' mpu: world / sp; otherwise HF passes no mpu
    and DeepSpeed counts every rank, AutoTP's included: deepspeed runtime/tensor_parallel/init_utils.py:89-90);
    `accelerate_dp`: under Ulysses, the data-parallel size accelerate multiplies the batch by."""
    import deepspeed
    import deepspeed.comm as dist
    from deepspeed.runtime.config import DeepSpeedConfig

    if not dist.is_initialized():
        # gloo alone, without the shared-memory collectives DeepSpeed would compile first (a minute of both cores;
        # recipe.dist.no_shm_collectives): the config is what is checked
        deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ.get("MASTER_PORT", "29533"))
        os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1")
        dist.init_distributed(dist_backend="gloo", auto_mpi_discovery=False)
    cfg = json.loads(path.read_text())
    if accelerate_dp is not None:  # accelerate's last-moment fix of the batch under Ulysses
        cfg["train_batch_size"] = (
            cfg["train_micro_batch_size_per_gpu"] * cfg["gradient_accumulation_steps"] * accelerate_dp
        )
    ds = DeepSpeedConfig(cfg, mpu=_Mpu(dp))
    return f"deepspeed batch {ds.train_batch_size}, autotp {ds.tensor_parallel_config.autotp_size}"


def check(folder: Path) -> str:
    notes, launched = [], None
    if (folder / "accelerate_config.yaml").exists():
        note, launched = check_accelerate(folder / "accelerate_config.yaml")
        notes.append(note)
    _args, field = check_train_args(folder / "train_args.json")
    world = json.loads((folder / "plan.json").read_text())["world_size"]
    if field is not None and launched is not None and field._sizes != launched._sizes:
        raise ValueError(f"TrainingArguments' parallelism_config {field._sizes} != the launcher's {launched._sizes}")
    if (folder / "ds_config.json").exists():
        sp = launched.sp_size if launched is not None else 1
        acc_dp = launched.data_parallel_size if sp > 1 else None
        notes.append(check_deepspeed(folder / "ds_config.json", world // sp, acc_dp))
    return "; ".join(notes)


def main(folders: list[str]) -> int:
    return verdicts(folders, check)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
