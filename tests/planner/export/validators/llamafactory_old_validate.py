"""Check LLaMA-Factory training YAMLs with an OLDER release's own parser (0.5.3 .. 0.9.4; llmtuner on PyPI before
0.7.1), on a host without a GPU: what tests/planner/export/test_old_releases_parse.py runs in each venv of
tools/fwenv_old.sh.

Usage: python llamafactory_old_validate.py A.yaml [B.yaml ...]   (the python of a venv with that release)

For each file, from the file's folder:
1. the YAML read as the release reads it (yaml.safe_load at v0.5.3-v0.9.2, hparams/parser.py `_parse_args`;
   OmegaConf from v0.9.3);
2. `get_train_args(dict)`: the release's whole argument path (HfArgumentParser over its five dataclasses, unknown keys
   refused by transformers hf_argparser.py parse_dict's allow_extra_keys=False, then the release's own checks:
   stage/finetuning_type/quantization/lora_target rules, its dependency pins (check_dependencies)), with
   TrainingArguments told it runs under torchrun (as_launched);
3. the same keys as a command line (sys.argv, the path `llamafactory-cli train --key value` takes), which also enforces
   the dataclass fields' choices (stage, finetuning_type, flash_attn's words at each release);
4. with a DeepSpeed JSON: HF's DeepSpeed config against the arguments (every mismatch but train_batch_size, which
   depends on the world size; transformers integrations/deepspeed.py trainer_config_process);
5. with an accelerate config (an FSDP plan, v0.9.3 on: the command is `accelerate launch --config_file
   accelerate_fsdp_config.yaml src/train.py x.yaml`): the release's own accelerate (v0.9.3 requirements.txt pins
   accelerate<=1.7.0, v0.9.4 pyproject.toml <=1.11.0; the venvs hold those) reads it as that command does
   (commands/launch.py launch_command_parser and _validate_launch_command: load_config_from_file refuses an unknown key
   and a bad enum; an fsdp_config key the launcher has no flag for, which it drops, is refused here), turns it into the ranks' environment (utils/launch.py prepare_multi_gpu_env, the FSDP_* variables)
   and builds the FullyShardedDataParallelPlugin the Accelerator builds from them; then the model on the meta device
   with the plugin's wrap classes and the LoRA targets (meta_model.py, as llamafactory_validate.py).
bf16 is reported available (HF refuses bf16 on a host without a bf16 GPU, training_args.py). Exits 1 with the
framework's error on the first bad file.
"""

import importlib
import os
import sys
from pathlib import Path

from accelerate_launch import launched
from llamafactory_validate import ACCELERATE, argv_of, names_of, patch_host
from verdict import verdicts


def package():
    """llamafactory, or llmtuner (the PyPI name of v0.5.x-v0.7.1)."""
    for name in ("llamafactory", "llmtuner"):
        try:
            return importlib.import_module(name + ".hparams.parser"), name
        except ModuleNotFoundError as e:
            if e.name != name:
                raise
    raise ModuleNotFoundError("neither llamafactory nor llmtuner is installed")


def as_launched() -> None:
    """TrainingArguments as under torchrun (parallel_mode DISTRIBUTED, as LOCAL_RANK makes it: transformers
    training_args.py parallel_mode), so the releases that refuse DeepSpeed outside a distributed launch (v0.8.3 on:
    "Please use `FORCE_TORCHRUN=1` to launch DeepSpeed training", hparams/parser.py get_train_args) run their other
    checks on a ZeRO plan's YAML; no process group is started."""
    from transformers import TrainingArguments
    from transformers.training_args import ParallelMode

    TrainingArguments.parallel_mode = property(lambda self: ParallelMode.DISTRIBUTED)


def check(path: Path) -> str:
    import yaml

    parser, name = package()
    os.chdir(path.parent)
    cfg = yaml.safe_load(path.read_text())
    model_args, data_args, training_args, finetuning_args, _ = parser.get_train_args(dict(cfg))
    argv, sys.argv = sys.argv, ["llamafactory-cli", *argv_of(cfg)]
    try:
        parser._parse_train_args(None)
    finally:
        sys.argv = argv
    ds = getattr(training_args, "hf_deepspeed_config", None)
    bad = [m for m in getattr(ds, "mismatches", []) if "train_batch_size=" not in m]
    if bad:  # as llamafactory_validate.py: every mismatch but the world-size one
        raise ValueError("DeepSpeed config disagrees with the arguments:\n" + "\n".join(bad))
    version = importlib.import_module(name).__version__
    fsdp = ""
    if (path.parent / ACCELERATE).is_file():
        fsdp = f" fsdp: {accelerate_plugin(path)}; {names_of(path, model_args, finetuning_args)}"
    return (
        f"{name} {version}: stage={finetuning_args.stage} finetuning_type={finetuning_args.finetuning_type} "
        f"cutoff_len={data_args.cutoff_len} flash_attn={model_args.flash_attn} "
        f"gc_disabled={model_args.disable_gradient_checkpointing} bf16={training_args.bf16}{fsdp}"
    )


def accelerate_plugin(path: Path) -> str:
    """The accelerate config beside `path` as `accelerate launch --config_file` reads it, and the FSDP plugin the
    ranks build from the environment the launcher hands them (accelerate_launch.py)."""
    version, env, plugin = launched(ACCELERATE, "src/train.py", path.name)
    return (
        f"accelerate {version} fsdp_version={plugin.fsdp_version} "
        f"wrap={plugin.transformer_cls_names_to_wrap} mixed_precision={env['ACCELERATE_MIXED_PRECISION']}"
    )


def main(paths: list[str]) -> int:
    patch_host()
    as_launched()
    return verdicts(paths, check)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
