"""Check a Hugging Face Trainer plan's files (train_args.json and launch.sbatch's `train.py --flags`) with the
installed transformers release's own TrainingArguments, on a host without a GPU: what
tests/planner/export/test_old_releases_parse.py runs in the hf venvs of tools/fwenv_old.sh (transformers 4.53.0,
4.57.1: the hf@4 and hf@4.54 lines).

Usage: python hf_validate.py DIR [DIR ...]   (each DIR: what `planner suggest --framework hf@LINE --emit` wrote for one
plan)

For each folder, from inside it (--fsdp_config names fsdp_config.json beside the script, --deepspeed ds_config.json):
1. train_args.json through HfArgumentParser((TrainingArguments, trl.ModelConfig)).parse_dict: a key the release's TrainingArguments
   lacks is refused (allow_extra_keys=False), output_dir included, and its __post_init__ runs (the optimizer's name
   among the release's OptimizerNames, the fsdp words, the DeepSpeed JSON read);
2. the flags launch.sbatch hands train.py, parsed by the same parser with TRL's ModelConfig, whose names the LoRA
   flags written are (a script's HfArgumentParser((TrainingArguments, ModelConfig)), as the reader reads them:
   planner/intake/loraargs.py): every flag one of their fields, each value of the field's type and choices, the same batch,
   accumulation, precision and checkpointing as the JSON.
bf16 is reported available (HF refuses bf16 on a host without a bf16 GPU). Exits 1 at the first folder refused.
"""

import json
import os
import sys
from pathlib import Path

from trl_validate import flags_of, patch_host
from verdict import verdicts

SAME = ("per_device_train_batch_size", "gradient_accumulation_steps", "bf16", "gradient_checkpointing", "optim")


def parser():
    from transformers import HfArgumentParser, TrainingArguments
    from trl import ModelConfig

    return HfArgumentParser((TrainingArguments, ModelConfig))


def check(folder: Path) -> str:
    os.chdir(folder)
    cfg, _ = parser().parse_dict(json.loads((folder / "train_args.json").read_text()))
    argv = flags_of((folder / "launch.sbatch").read_text())
    cfg2, model, rest = parser().parse_args_into_dataclasses(args=argv, return_remaining_strings=True)
    if rest:
        raise ValueError(f"flags TrainingArguments and ModelConfig do not take: {rest}")
    for field in SAME:
        if getattr(cfg, field) != getattr(cfg2, field):
            raise ValueError(f"{field}: train_args.json {getattr(cfg, field)} != flags {getattr(cfg2, field)}")
    import transformers

    return (
        f"transformers {transformers.__version__} TrainingArguments: output_dir={cfg.output_dir} "
        f"micro={cfg.per_device_train_batch_size} accum={cfg.gradient_accumulation_steps} optim={cfg.optim} "
        f"fsdp={cfg.fsdp} deepspeed={cfg.deepspeed} peft={model.use_peft}"
    )


def main(args: list[str]) -> int:
    patch_host()
    return verdicts(args, check)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
