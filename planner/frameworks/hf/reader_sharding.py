"""What HF Trainer's flags shard with (planner.frameworks.hf.reader reads the rest): --fsdp with its --fsdp_config (a
dict, a JSON string or a JSON file's path), read as accelerate's FSDP (its "version" where the release's
TrainingArguments reads it: _version), and --deepspeed's config, read as DeepSpeed's."""

from __future__ import annotations

from pathlib import Path

from planner.frameworks import FRAMEWORKS
from planner.frameworks.accelerate import reader as accelerate
from planner.frameworks.deepspeed import reader as deepspeed
from planner.intake.collect import Collector, as_names, default, is_file, known, one
from planner.intake.flags import Flag
from planner.intake.limits import OverLimit, load_json, read_config_text


def sharding(c: Collector, flags: dict[str, Flag], near: Path, vars) -> None:
    fsdp = flags.get("fsdp")
    if fsdp and known(fsdp.value) and str(one(fsdp.value)).strip() not in ("", "False", "false"):
        cfg = fsdp_config(flags["fsdp_config"].value, near) if "fsdp_config" in flags else {}
        cfg, version = _version(c, cfg, flags["fsdp_config"].source if "fsdp_config" in flags else "")
        accelerate.fsdp(c, cfg, fsdp.source, fsdp.raw, tokens=tuple(as_names(fsdp.value)), version=version)
    ds = flags.get("deepspeed")
    if ds:
        deepspeed.read(c, one(ds.value), ds.source, ds.raw, near, vars=vars)


def _version(c: Collector, cfg: dict, source: str) -> tuple[dict, tuple[int, str]]:
    """(fsdp_config, the FSDP version where it names none) at the release the reading targets: its "version" read
    where that release's TrainingArguments reads it (Release.means fsdp_config_version, reading.MEANINGS); where it
    does not (transformers 4.x), the version key is left out and the run is the command's FSDP_VERSION (hf.launchenv),
    else FSDP1, the key said in one unplanned line; 5.0-5.9 ("default 1") read it, FSDP1 where it names none."""
    fw = FRAMEWORKS.get(c.framework)
    release = str(c.facts.get("release", ("",))[0] or "")
    r = fw.release(release) if fw is not None and fw.releases else None
    if r is None or r.means("fsdp_config_version") == "read":
        return cfg, (2, "")
    who = f"{fw.name}@{r.name}"
    # "default 1": handed to the plugin, which reads FSDP_VERSION only where none is given (accelerate 1.16.0
    # utils/dataclasses.py:1709-1710)
    if r.means("fsdp_config_version") == "default 1":
        return cfg, (
            1,
            default(who, "transformers 5.9.0 training_args.py:2812-2813", 'FSDP1: fsdp_config names no "version"'),
        )
    env = c.facts.get("fsdp_env_version")
    if env is not None:  # the launch's own FSDP_VERSION, which accelerate's plugin reads (hf.launchenv)
        return {k: v for k, v in cfg.items() if k.removeprefix("fsdp_") != "version"}, (env[0], env[1])
    for key in [k for k in cfg if k.removeprefix("fsdp_") == "version"]:
        c.note(
            f"{source}: {key} {cfg[key]} (not planned: {who}'s transformers 4.x TrainingArguments never hands it to "
            "accelerate, 4.57.1 training_args.py:2003-2043 sets no FSDP_VERSION: FSDP1 unless the launch sets "
            "FSDP_VERSION=2 or `accelerate launch`'s own config names fsdp_version 2)"
        )
    why = default(who, "transformers 4.57.1 training_args.py:2003-2043", "FSDP1: accelerate's fsdp_version 1")
    return {k: v for k, v in cfg.items() if k.removeprefix("fsdp_") != "version"}, (1, why)


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
