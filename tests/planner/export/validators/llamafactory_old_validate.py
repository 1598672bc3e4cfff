"""Check LLaMA-Factory training YAMLs with an OLDER release's own parser (0.5.3 .. 0.9.4; llmtuner on PyPI before
0.7.1), on a host without a GPU: what tests/planner/export/test_old_releases_parse.py runs in each venv of
tools/fwenv_old.sh.

Usage: python llamafactory_old_validate.py A.yaml [B.yaml ...]   (the python of a venv with that release)

For each file, from the file's folder:
1. the YAML read as the release reads it (yaml.safe_load at v0.5.3-v0.9.2, hparams/parser.py `_parse_args`;
   OmegaConf from v0.9.3);
2. `get_train_args(dict)`: the release's whole argument path (HfArgumentParser over its five dataclasses, unknown keys
   refused by transformers hf_argparser.py parse_dict's allow_extra_keys=False, then the release's own checks:
   stage/finetuning_type/quantization/lora_target rules, its dependency pins (check_dependencies)); launched without
   torchrun, so the one check of a distributed launch (DeepSpeed) is the only one left out;
3. the same keys as a command line (sys.argv, the path `llamafactory-cli train --key value` takes), which also enforces
   the dataclass fields' choices (stage, finetuning_type, flash_attn's words at each release).
bf16 is reported available (HF refuses bf16 on a host without a bf16 GPU, training_args.py). Exits 1 with the
framework's error on the first bad file.
"""

import contextlib
import importlib
import os
import sys
from pathlib import Path

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


def patch_host() -> None:
    import transformers.training_args as ta

    ta.is_torch_bf16_gpu_available = lambda *a, **k: True
    with contextlib.suppress(Exception):  # DeepSpeed builds a shared-memory op on import on CPU-only hosts
        importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None


def argv_of(cfg: dict) -> list[str]:
    out = []
    for key, value in cfg.items():
        out += [f"--{key}", str(value).lower() if isinstance(value, bool) else str(value)]
    return out


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
    version = importlib.import_module(name).__version__
    return (
        f"{name} {version}: stage={finetuning_args.stage} finetuning_type={finetuning_args.finetuning_type} "
        f"cutoff_len={data_args.cutoff_len} flash_attn={model_args.flash_attn} "
        f"gc_disabled={model_args.disable_gradient_checkpointing} bf16={training_args.bf16}"
    )


def main(paths: list[str]) -> int:
    patch_host()
    return verdicts(paths, check)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
