"""Check ms-swift launch scripts with an OLDER 3.x release's own argument classes (3.0.3, 3.4.1, 3.7.3: the lines
swift@3, swift@3.4, swift@3.7), offline: no model download, no GPU. What tests/planner/export/test_old_releases_parse.py
runs in each ms-swift venv of tools/fwenv_old.sh.

Usage: python swift_old_validate.py A.sh [B.sh ...]   (the python of a venv with that ms-swift)

For each script, from its folder:
1. shlex splits it; the leading `NAME=value` assignments set aside; the command must be `swift sft` or `swift rlhf`;
2. HfArgumentParser over swift.llm's TrainArguments (SftArguments) / RLHFArguments parses the flags as swift's parse_args does
   (swift/utils/utils.py parse_args at each tag): a wrong type or a value outside a Literal's choices (rlhf_type,
   train_type, attn_impl) exits 2, and swift raises on leftovers (swift/llm/base.py _parse_args: remaining_argv);
3. the trainer's arguments built from them as swift builds them (swift/trainers/trainer_factory.py
   get_training_args: the TRAINING_ARGS_MAPPING class of the rlhf_type, or Seq2SeqTrainingArguments, given the
   fields its signature takes, less those swift leaves None for its __post_init__ to fill), so transformers' TrainingArguments.__post_init__ runs on the written values: the
   --fsdp options and --fsdp_config, --deepspeed (a swift preset name resolved to swift's own JSON, as
   swift/llm/argument/train_args.py does), bf16, optim. SftArguments' own __post_init__ is not run: it fetches the
   model's config from the hub.
bf16 is reported available. Exits 1 with the framework's error on the first bad script.
"""

import dataclasses
import importlib
import inspect
import os
import sys
from pathlib import Path

from swift_validate import argv_of
from verdict import verdicts

DS_PRESETS = {"zero0", "zero1", "zero2", "zero3", "zero2_offload", "zero3_offload"}


def parse(sub: str, argv: list[str]):
    from swift import llm
    from transformers import HfArgumentParser

    sft = getattr(llm, "TrainArguments", None) or llm.SftArguments  # SftArguments' name at the older tags
    parser = HfArgumentParser([sft if sub == "sft" else llm.RLHFArguments])
    ns, unknown = parser.parse_known_args(argv)
    if unknown:
        raise ValueError(f"remaining_argv: {unknown}")
    return ns


def training_args(ns):
    """swift's TrainerFactory.get_training_args over the parsed namespace."""
    from swift.trainers import TrainerFactory

    method = getattr(ns, "rlhf_type", None) or "causal_lm"
    module, name = TrainerFactory.TRAINING_ARGS_MAPPING[method].rsplit(".", 1)
    cls = getattr(importlib.import_module(module), name)
    given = vars(ns).copy()
    if given.get("deepspeed") in DS_PRESETS:
        ds_dir = Path(importlib.import_module("swift.llm").__file__).parent / "ds_config"
        given["deepspeed"] = str(ds_dir / f"{given['deepspeed']}.json")
    params = inspect.signature(cls).parameters
    fields = {f.name for f in dataclasses.fields(cls) if f.init}
    # a field swift leaves None for its own __post_init__ to fill (eval_strategy ...) takes the class's default
    return cls(**{k: v for k, v in given.items() if k in params and k in fields and v is not None})


def check(path: Path) -> str:
    import swift

    os.chdir(path.parent)
    _, sub, argv = argv_of(path)
    ns = parse(sub, argv)
    ta = training_args(ns)
    return (
        f"ms-swift {swift.__version__} {sub} {getattr(ns, 'rlhf_type', '') or ''} {type(ta).__name__}: "
        f"train_type={ns.train_type} micro={ta.per_device_train_batch_size} fsdp={ta.fsdp} "
        f"deepspeed={bool(ta.deepspeed)}"
    )


def main(paths: list[str]) -> int:
    import transformers.training_args as ta

    ta.is_torch_bf16_gpu_available = lambda *a, **k: True
    return verdicts(paths, check)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
