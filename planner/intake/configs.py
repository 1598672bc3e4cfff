"""A configuration file's format, told from its content (the keys only one framework writes), and the reader each
format goes to: LLaMA-Factory, axolotl and ms-swift YAML / JSON, DeepSpeed JSON, accelerate configs, and transformers /
TRL argument files, torchtune recipe configs. A model's own config.json and LLaMA-Factory's experimental v1 schema are
refused by name.
"""

from __future__ import annotations

from pathlib import Path

from planner.errors import BadInput
from planner.frameworks import ARGS, ARGS_FORMAT, FRAMEWORKS, PLAIN, by_trainer
from planner.frameworks import reader as framework_reader
from planner.intake.collect import Collector, accepted, parse_yaml
from planner.intake.flags import Flag, from_mapping
from planner.intake.limits import OverLimit, load_json, read_config_text

ACCEPTED = (
    "accepted: a launch script (.sh), a Python training script (.py), a LLaMA-Factory, axolotl, ms-swift, "
    "accelerate, torchtune or TRL / transformers YAML or JSON, or a DeepSpeed JSON"
)
LF_KEYS = {"stage", "finetuning_type", "cutoff_len", "lora_target", "template", "dataset_dir", "pure_bf16"}
SWIFT_KEYS = {"tuner_type", "train_type", "rlhf_type", "target_modules", "torch_dtype", "attn_impl", "freeze_vit"}


def text_of(path: Path) -> str:
    """A configuration file's text (limits.read_config_text); BadInput naming the file where it cannot be read."""
    try:
        return read_config_text(path)
    except FileNotFoundError:
        raise BadInput(f"--config {path}: no such file ({ACCEPTED})", "config") from None
    except IsADirectoryError:
        raise BadInput(f"--config {path}: a folder, not a file ({ACCEPTED})", "config") from None
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(f"--config {path}: cannot be read ({e.__class__.__name__}; {ACCEPTED})", "config") from None


def load(path: Path, text: str | None = None) -> object:
    """A JSON or YAML file's content; BadInput naming the file where it is neither."""
    text = text_of(path) if text is None else text
    try:
        return load_json(text, path) if path.suffix.lower() == ".json" else parse_yaml(text, path)
    except OverLimit:
        raise
    except ValueError as e:
        kind = "JSON" if path.suffix.lower() == ".json" else "YAML"
        raise BadInput(f"--config {path}: not valid {kind} ({' '.join(str(e).split())[:160]})", "config") from None


def kind(data: object) -> str | None:
    """Which format a mapping is, or None."""
    if not isinstance(data, dict):
        return None
    k = set(map(str, data))
    if any(isinstance(v, dict) and "_component_" in v for v in data.values()):  # torchtune's config.instantiate
        return "torchtune"
    if "zero_optimization" in k or k & {
        "train_micro_batch_size_per_gpu",
        "train_batch_size",
        "zero_allow_untested_optimizer",
    }:
        return "deepspeed"
    if k & {"distributed_type", "compute_environment"}:
        return "accelerate"
    if "architectures" in k or ("model_type" in k and k & {"hidden_size", "text_config", "vision_config"}):
        return "model"
    if "base_model" in k:
        return "axolotl"
    if "dist_config" in k or {"model", "micro_batch_size"} <= k:
        return "lf-v1"
    if k & LF_KEYS and "model" not in k:
        return "llamafactory"
    if "model" in k and (k & SWIFT_KEYS or "ENV" in k):
        return "swift"
    if k & accepted("hf") or {"fsdp", "fsdp_config"} <= k:
        return "hf"
    return None


def framework(fmt: str, trainer: str = PLAIN) -> str:
    """The framework a file of format `fmt` is: the format's own, or for the script-flags format (TrainingArguments
    names) the framework of the trainer the file names (Framework.trainers: transformers' plain Trainer, TRL's)."""
    return by_trainer(trainer) if fmt == ARGS_FORMAT else fmt


def trainer(data: dict, fmt: str, hint: str) -> str:
    """The script-flags trainer a file of format `fmt` names (trainer_of), the plain Trainer for any other format."""
    return trainer_of(data, hint) if fmt == ARGS_FORMAT else PLAIN


def refuse(fmt: str | None, path: Path) -> None:
    """BadInput for a file that is no training configuration memplan reads."""
    if fmt == "model":
        raise BadInput(
            f"--config {path}: a model's config.json, not a training configuration: pass it as --model {path}", "config"
        )
    if fmt == "lf-v1":
        raise BadInput(
            f"--config {path}: LLaMA-Factory's experimental v1 schema (USE_V1=1) is not read; {ACCEPTED}", "config"
        )
    if fmt is None:
        raise BadInput(f"--config {path}: not a training configuration memplan knows ({ACCEPTED})", "config")


def read(
    c: Collector,
    fmt: str,
    data: dict,
    path: Path,
    *,
    flags: dict[str, Flag] | None = None,
    words: list | None = None,
    script: Path | None = None,
    trainer: str = PLAIN,
    vars=None,
) -> None:
    """A mapping of format `fmt` into the reading, by the reader of the framework whose folder reads that format
    (Framework.reads: planner/frameworks/<name>/reader.py read_file); `flags`, `words`, `script`: the command line's
    flags, its positional words after the file, and the command's own file, where a command names the file."""
    c.add_file(path)
    reader(fmt).read_file(
        c, data, path, flags=flags or {}, words=words or [], script=script or path, trainer=trainer, vars=vars
    )


def reader(fmt: str):
    """The reader module of the framework that reads format `fmt` (its folder's reader.py), imported on first use."""
    return framework_reader(next(f.name for f in FRAMEWORKS.values() if fmt in f.reads))


def trainer_of(data: dict, hint: str) -> str:
    return framework_reader(ARGS).trainer_of(from_mapping(data, Path("x")), hint)
