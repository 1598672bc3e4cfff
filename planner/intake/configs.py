"""A configuration file's format, told from its content by the signs each framework's folder declares (Framework.signs:
the keys only it writes), and the reader each format goes to (Framework.reads): LLaMA-Factory, axolotl and ms-swift
YAML / JSON, DeepSpeed JSON, accelerate configs, transformers / TRL argument files, torchtune recipe configs. A model's
own config.json, and a format a folder knows and does not read (Signs.refused), are refused in one line.
"""

from __future__ import annotations

from pathlib import Path

from planner.errors import BadInput
from planner.frameworks import ARGS, ARGS_FORMAT, FRAMEWORKS, PLAIN, SIGNS, by_trainer
from planner.frameworks import reader as framework_reader
from planner.intake.collect import Collector, accepted, parse_yaml
from planner.intake.flags import Flag, from_mapping
from planner.intake.limits import OverLimit, load_json, read_config_text

ACCEPTED = (
    "accepted: a launch script (.sh), a Python training script (.py), a LLaMA-Factory, axolotl, ms-swift, "
    "accelerate, torchtune or TRL / transformers YAML or JSON, or a DeepSpeed JSON"
)
# a model's own config.json: told after the signs of rank below this (torchtune's, DeepSpeed's, accelerate's), before
# the trainers' (whose argument names a model's config may share)
MODEL, MODEL_RANK = "model", 35


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
    """Which format a mapping is (the first of the frameworks' signs, by rank, it shows; MODEL for a model's own
    config.json), or None."""
    if not isinstance(data, dict):
        return None
    k = set(map(str, data))
    for _, fmt, test, listed in ORDER:
        if (listed and k & accepted(fmt)) or test(k, data):
            return fmt
    return None


def _model(k: set[str], data: dict) -> bool:
    return "architectures" in k or ("model_type" in k and bool(k & {"hidden_size", "text_config", "vision_config"}))


ORDER = sorted(
    [*((s.rank, s.format, s.test, s.listed) for s in SIGNS), (MODEL_RANK, MODEL, _model, False)], key=lambda t: t[0]
)
REFUSED = {s.format: s.refused for s in SIGNS if s.refused}


def framework(fmt: str, trainer: str = PLAIN) -> str:
    """The framework a file of format `fmt` is: the format's own, or for the script-flags format (TrainingArguments
    names) the framework of the trainer the file names (Framework.trainers: transformers' plain Trainer, TRL's)."""
    return by_trainer(trainer) if fmt == ARGS_FORMAT else fmt


def trainer_in(data: dict, fmt: str, hint: str) -> str:
    """The script-flags trainer a file of format `fmt` names (trainer_of), the plain Trainer for any other format."""
    return trainer_of(data, hint) if fmt == ARGS_FORMAT else PLAIN


def refuse(fmt: str | None, path: Path) -> None:
    """BadInput for a file that is no training configuration memplan reads."""
    if fmt == MODEL:
        raise BadInput(
            f"--config {path}: a model's config.json, not a training configuration: pass it as --model {path}", "config"
        )
    if fmt in REFUSED:
        raise BadInput(f"--config {path}: {REFUSED[fmt]}; {ACCEPTED}", "config")
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
