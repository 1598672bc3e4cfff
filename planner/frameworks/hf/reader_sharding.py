"""What HF Trainer's flags shard with (planner.frameworks.hf.reader reads the rest): --fsdp with its --fsdp_config (a
dict, a JSON string or a JSON file's path), read as accelerate's FSDP, and --deepspeed's config, read as DeepSpeed's."""

from __future__ import annotations

from pathlib import Path

from planner.frameworks.accelerate import reader as accelerate
from planner.frameworks.deepspeed import reader as deepspeed
from planner.intake.collect import Collector, as_names, is_file, known, one
from planner.intake.flags import Flag
from planner.intake.limits import OverLimit, load_json, read_config_text


def sharding(c: Collector, flags: dict[str, Flag], near: Path, vars) -> None:
    fsdp = flags.get("fsdp")
    if fsdp and known(fsdp.value) and str(one(fsdp.value)).strip() not in ("", "False", "false"):
        cfg = fsdp_config(flags["fsdp_config"].value, near) if "fsdp_config" in flags else {}
        accelerate.fsdp(
            c,
            cfg,
            fsdp.source,
            fsdp.raw,
            tokens=tuple(as_names(fsdp.value)),
            version=(2, ""),
        )
    ds = flags.get("deepspeed")
    if ds:
        deepspeed.read(c, one(ds.value), ds.source, ds.raw, near, vars=vars)


def fsdp_config(value: object, near: Path) -> dict:
    """HF's --fsdp_config: a dict (a Python script's), a JSON string, or a JSON file's path (training_args.py reads
    either); {} where it is none of them."""
    if isinstance(value, dict):
        return value
    text = str(one(value)) if known(value) else ""
    path = near.parent / text if text and not Path(text).is_absolute() else Path(text)
    try:
        data = load_json(read_config_text(path), path) if text and is_file(path) else load_json(text)
    except OverLimit:
        raise
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
