"""Check a TRL plan's files (train_args.json and launch.sbatch's `train.py --flags`) with the installed TRL release's
own config class, on a host without a GPU: what tests/planner/export/test_old_releases_parse.py runs in each TRL venv
of tools/fwenv_old.sh (trl 0.14.0 .. 1.10.0).

Usage: python trl_validate.py CONFIG:DIR [CONFIG:DIR ...]   (CONFIG: SFTConfig, DPOConfig or GRPOConfig; each DIR:
what `planner suggest --framework trl@LINE --emit` wrote for one plan). CONFIG TrainingArguments checks HF's Trainer
the same way (`--framework hf@4`, hf@4.54: the venvs hf-4.53.0 and hf-4.57.1, each with the TRL of its month, whose
ModelConfig names the LoRA flags written: planner/intake/loraargs.py).

For each folder, from inside it (--fsdp_config names fsdp_config.json beside the script; command.sh, where the test
wrote one, the command as memplan hands it out, which names the model):
1. train_args.json through transformers' HfArgumentParser over (CONFIG, trl.ModelConfig): `parse_dict` refuses a key
   neither dataclass has (hf_argparser.py parse_dict, allow_extra_keys=False), and the config's __post_init__ runs
   (TrainingArguments' own checks; GRPOConfig's batch rules where the release has them);
2. the flags launch.sbatch hands train.py (the script of TRL's examples parses them with the same two dataclasses,
   TrlParser((ScriptArguments, CONFIG, ModelConfig))): parse_args_into_dataclasses, every flag one of theirs, each
   value of the field's type and choices, and a model_name_or_path among them;
3. an FSDP plan's FSDP2 plugin as torchrun's ranks build it (the variables TrainingArguments and the Slurm script set),
   and, with accelerate_config.yaml beside it, as `accelerate launch --config_file accelerate_config.yaml train.py
   FLAGS` runs it with the venv's accelerate (accelerate_launch.py: its parser, _validate_launch_command, the ranks'
   environment; the flags parsed under that environment, the plugin the Trainer's Accelerator builds), then the model
   on the meta device with that plugin's wrap classes and the LoRA targets (meta_model.py).
bf16 is reported available (HF refuses bf16 on a host without a bf16 GPU). Exits 1 at the first folder refused.
"""

import contextlib
import importlib
import json
import os
import shlex
import sys
from pathlib import Path

from accelerate_launch import launched
from meta_model import check_names
from verdict import verdicts

ACCELERATE = "accelerate_config.yaml"
CONFIGS: dict[Path, str] = {}  # folder -> the config class its plan's trainer takes


def patch_host() -> None:
    import transformers.training_args as ta

    ta.is_torch_bf16_gpu_available = lambda *a, **k: True
    with contextlib.suppress(Exception):  # newer transformers ask accelerate's device check instead
        importlib.import_module("transformers.utils.import_utils").is_torch_bf16_gpu_available = lambda *a, **k: True


def flags_of(script: str) -> list[str]:
    """The arguments after `train.py` in the launch script (inside srun's bash -c '...' where there is one)."""
    toks = shlex.split(script.replace("\\\n", " "), comments=True)
    for tok in toks:
        if "train.py" in tok and tok != "train.py":  # the srun ... bash -c 'torchrun ... train.py --flags' string
            return flags_of(tok)
    return toks[toks.index("train.py") + 1 :]


def parser(config: str):
    import transformers
    import trl

    cls = getattr(trl, config, None) or getattr(transformers, config)  # TrainingArguments: HF's Trainer (hf@4 lines)
    return transformers.HfArgumentParser((cls, trl.ModelConfig))


def check(folder: Path) -> str:
    config = CONFIGS[folder]
    os.chdir(folder)
    cfg, _ = parser(config).parse_dict(json.loads((folder / "train_args.json").read_text()))
    argv = flags_of((folder / "launch.sbatch").read_text())
    cfg2, model, rest = parser(config).parse_args_into_dataclasses(args=argv, return_remaining_strings=True)
    if rest:
        raise ValueError(f"flags {config} and ModelConfig do not take: {rest}")
    if not model.model_name_or_path:  # the printed command names it; the Slurm script must too
        raise ValueError("launch.sbatch names no --model_name_or_path")
    # fsdp and fsdp_config too: a quote of `--fsdp 'full_shard auto_wrap'` inside srun's bash -c '...' once ended
    # the string there, and train.py got `--fsdp full_shard` and no fsdp_config
    fields = ("per_device_train_batch_size", "gradient_accumulation_steps", "bf16", "gradient_checkpointing", "fsdp")
    for field in (*fields, "fsdp_config"):
        if getattr(cfg, field) != getattr(cfg2, field):
            raise ValueError(f"{field}: train_args.json {getattr(cfg, field)} != flags {getattr(cfg2, field)}")
    import transformers
    import trl

    raw = json.loads((folder / "train_args.json").read_text())
    sbatch = (folder / "launch.sbatch").read_text()
    extra = (
        fsdp_plugin(cfg, raw, sbatch) + mesh(exported(sbatch, "PARALLELISM_", "ACCELERATE_USE_"), sbatch)
        if cfg.fsdp
        else ""
    )
    if (folder / ACCELERATE).is_file():  # the command's flags (the model named there) under accelerate's launcher
        command = folder / "command.sh"
        extra += accelerate_launched(config, flags_of(command.read_text()) if command.is_file() else argv, raw)
    extra += (
        f" output_dir={cfg.output_dir} transformers {transformers.__version__}" if config == "TrainingArguments" else ""
    )
    extra += f" num_generations={cfg.num_generations}" if hasattr(cfg, "num_generations") else ""
    return (
        f"trl {trl.__version__} {config}: micro={cfg.per_device_train_batch_size} "
        f"accum={cfg.gradient_accumulation_steps} fsdp={cfg.fsdp} peft={model.use_peft} "
        f"model={model.model_name_or_path}{extra}"
    )


def fsdp_plugin(cfg, raw: dict, sbatch: str) -> str:
    """The FSDP plugin the Trainer's Accelerator builds for this run (accelerate's FullyShardedDataParallelPlugin from
    TrainingArguments' fsdp_plugin_args where it has them, else the FSDP_* variables it set and those the Slurm script
    exports), checked FSDP2 (memplan plans FSDP2:
    planner/export/export.py fsdp_config) with the plan's resharding (reshard_after_forward false for shard_grad_op)."""
    from unittest import mock

    from accelerate.utils import FullyShardedDataParallelPlugin

    # transformers 5 builds it from TrainingArguments.fsdp_plugin_args (5.6.0 trainer.py:798-801), 4.x from the
    # environment alone (the next folder's script sets its own)
    with mock.patch.dict(os.environ, exported(sbatch, "FSDP_")):
        plugin = FullyShardedDataParallelPlugin(**(getattr(cfg, "fsdp_plugin_args", None) or {}))
    return planned_fsdp2(cfg, raw, plugin)


def exported(sbatch: str, *prefixes: str) -> dict[str, str]:
    """The variables the Slurm script exports whose names start with one of `prefixes`."""
    lines = (line.removeprefix("export ").partition("=") for line in sbatch.splitlines() if line.startswith("export "))
    return {k: v for k, _, v in lines if k.startswith(prefixes)}


def mesh(env: dict[str, str], sbatch: str) -> str:
    """The data-parallel mesh the ranks' Accelerator builds under `env` (accelerate's ParallelismConfig where
    ACCELERATE_USE_PARALLELISM_CONFIG is true: 1.10.1 accelerator.py:454-476; FSDP2 shards over mesh[fsdp_dim_names],
    utils/fsdp_utils.py:624-631): ValueError unless it covers the script's nodes x GPUs a node with one replica a node
    (memplan's HSDP: planner.export.parallel.hsdp_fields). Empty where no mesh is built (a full shard)."""
    from unittest import mock

    if env.get("ACCELERATE_USE_PARALLELISM_CONFIG", "false").lower() != "true":
        return ""
    try:
        from accelerate.parallelism_config import ParallelismConfig
    except ImportError as e:  # accelerate before 1.10.0: the variables are never read, every rank one shard group
        raise ValueError(f"the script sets {sorted(env)}, which this accelerate never reads: {e}") from None
    with mock.patch.dict(os.environ, env):
        pc = ParallelismConfig()
    nodes = int(sbatch.split("#SBATCH --nodes=", 1)[1].split()[0])
    gpus = int(sbatch.split("#SBATCH --gpus-per-node=", 1)[1].split()[0])
    if pc.total_size != nodes * gpus or (pc.dp_replicate_size > 1 and pc.dp_replicate_size != nodes):
        raise ValueError(f"ParallelismConfig {pc._sizes} over {nodes} nodes x {gpus} GPUs")
    return f" mesh={tuple(pc.fsdp_dim_names)} {pc.dp_replicate_size}x{pc.dp_shard_size}"


def planned_fsdp2(cfg, raw: dict, plugin) -> str:
    """ValueError unless `plugin` is FSDP2 with the plan's resharding as written (reshard_after_forward false for
    shard_grad_op; transformers 5.x turns a string `fsdp` into True, the options into fsdp_config)."""
    grad_op = (
        "shard_grad_op" in str(raw.get("fsdp", ""))
        or (raw.get("fsdp_config") or {}).get("reshard_after_forward") is False
    )
    if plugin.fsdp_version != 2 or plugin.reshard_after_forward != (not grad_op):
        raise ValueError(
            f"fsdp {cfg.fsdp}: accelerate builds FSDP{plugin.fsdp_version} with reshard_after_forward "
            f"{plugin.reshard_after_forward}, not the planned FSDP2"
        )
    return f" FSDP{plugin.fsdp_version} reshard_after_forward={plugin.reshard_after_forward}"


def accelerate_launched(config: str, argv: list[str], raw: dict) -> str:
    """The plan launched as `accelerate launch --config_file accelerate_config.yaml train.py FLAGS`: the ranks'
    environment the launcher prepares (accelerate_launch.py), the flags parsed under it (4.x's TrainingArguments add
    their FSDP_* variables there), the plugin the Trainer's Accelerator builds from both, FSDP2 as planned; then its
    wrap classes and the LoRA targets on the meta model."""
    from unittest import mock

    from accelerate.utils import FullyShardedDataParallelPlugin

    version, env, _ = launched(ACCELERATE, "train.py", *argv)
    with mock.patch.dict(os.environ, env, clear=True):
        cfg, model, _ = parser(config).parse_args_into_dataclasses(args=argv, return_remaining_strings=True)
        plugin = FullyShardedDataParallelPlugin(**(getattr(cfg, "fsdp_plugin_args", None) or {}))
    planned_fsdp2(cfg, raw, plugin)
    launched_mesh = mesh(env, Path("launch.sbatch").read_text())
    targets = model.lora_target_modules if model.use_peft else None
    wrap = plugin.transformer_cls_names_to_wrap
    remote = getattr(model, "trust_remote_code", False)  # TRL 1.10's ModelConfig has none
    names = check_names(model.model_name_or_path, remote, True, wrap, targets)
    return f" accelerate launch {version}: FSDP{plugin.fsdp_version}{launched_mesh} wrap={wrap}; {names}"


def main(args: list[str]) -> int:
    paths = []
    for arg in args:
        config, _, folder = arg.partition(":")
        CONFIGS[Path(folder).resolve()] = config
        paths.append(folder)
    patch_host()
    return verdicts(paths, check)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
