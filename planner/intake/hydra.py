"""Command-line overrides as the config-driven trainers take them, and Hydra's own config files: `key=value` words
(OmegaConf.from_cli: LLaMA-Factory's llamafactory-cli, verl's Hydra with `+key=value`), and a user's `--config-path
DIR --config-name NAME` read flat in dotted names. Shared text reading: no framework is named here."""

from __future__ import annotations

import re
from pathlib import Path

from planner.intake import configs, launch, limits
from planner.intake.collect import UNKNOWN, Collector, known, parse_yaml
from planner.intake.flags import Flag
from planner.intake.shellvars import find_file


def overrides(words: list, path: Path, plus: bool = False) -> dict[str, Flag]:
    """llamafactory-cli's `key=value` overrides (OmegaConf.from_cli, src/llamafactory/hparams/parser.py:85-99); with
    `plus`, Hydra's too (`+key=value` adds a key the config lacks)."""
    out = {}
    for w in words:
        key, eq, value = w.text.partition("=")
        if eq and re.fullmatch(r"\+?[A-Za-z_][\w.]*" if plus else r"[A-Za-z_][\w.]*", key):
            try:
                parsed = parse_yaml(value) if known(value) else value
            except limits.OverLimit:
                raise
            except ValueError:
                parsed = value
            out[key] = Flag(key, parsed, f"{path.name}:{w.line} {w.text.replace(UNKNOWN, '?')}", key)
    return out


def config(c: Collector, run: launch.Run, otherwise: str) -> dict[str, Flag]:
    """A user's own Hydra config (`--config-path DIR --config-name NAME`): its keys, flattened to dotted names, under
    the command line's overrides; found next to the script or in the folders above it (`otherwise`: what the reading
    falls back to where it is not found, said in the note)."""
    opts = options(run)
    if "--config-name" not in opts:
        return {}
    name = opts["--config-name"].removesuffix(".yaml") + ".yaml"
    found = find_file(str(Path(opts.get("--config-path", ".")) / name), run.command.vars, run.command.path)
    if found is None:
        c.note(f"{run.where} --config-name {name}: not found next to the script; {otherwise}")
        return {}
    c.add_file(found)
    data = configs.load(found)
    out: dict[str, Flag] = {}
    flatten(data if isinstance(data, dict) else {}, "", found, out)
    if isinstance(data, dict) and isinstance(data.get("defaults"), list):  # the configs it composes, kept as read
        out["defaults"] = Flag("defaults", data["defaults"], f"{found.name}: defaults: {data['defaults']}", "defaults")
    return out


def options(run: launch.Run) -> dict[str, str]:
    """Hydra's own options on the command line: --config-path and --config-name (either spelling), as given."""
    words = [w.text for w in run.args]
    opts = {}
    for i, w in enumerate(words):
        for name in ("--config-path", "--config-name", "--config_path", "--config_name"):
            if w == name and i + 1 < len(words):
                opts[name.replace("_", "-")] = words[i + 1]
            elif w.startswith(name + "="):
                opts[name.replace("_", "-")] = w.split("=", 1)[1]
    return opts


def flatten(data: dict, prefix: str, path: Path, out: dict[str, Flag]) -> None:
    for k, v in data.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            flatten(v, key + ".", path, out)
        elif key != "defaults":
            out[key] = Flag(key, v, f"{path.name}: {key}: {v}", key)
