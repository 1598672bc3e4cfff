"""ms-swift 3.x's `--train_type custom` with `--external_plugins FILE`: the plugin's tuner read from its syntax tree
(never run or imported). v3.12.6's examples/train/multimodal/lora_llm_full_vit/custom_plugin.py registers a Tuner
(`extra_tuners['custom'] = CustomTuner`) whose prepare_model puts LoRA on the language model's linears
(`LoraConfig(r=args.lora_rank, ..., target_modules=get_multimodal_target_regex(model))`) and trains the vision tower
and aligner in full (`deep_getattr(model, prefix).requires_grad_(True)` over `model_arch.vision_tower +
model_arch.aligner`): what ms-swift 4 ships as `--tuner_type lora_llm` (swift/tuner_plugin/lora_llm.py:72-81), and is
read as it. A plugin of another shape is refused in one line naming it."""

from __future__ import annotations

import ast
from pathlib import Path

from planner.frameworks.swift.reader_tuners import read_lora_llm
from planner.intake import limits, tuners
from planner.intake.collect import Collector, as_names, one
from planner.intake.flags import Flag


def plugin_path(value: object, near: Path) -> Path | None:
    """The first plugin file the flag names that exists: as given, or under the script's folder or one of its
    parents (ms-swift's examples name it from the repository's root)."""
    for name in as_names(value):
        p = Path(name)
        if p.is_absolute():
            if p.is_file():
                return p
            continue
        for base in (near, *near.parents):
            if (base / p).is_file():
                return base / p
    return None


def _name(node: ast.AST) -> str:
    return getattr(node, "id", getattr(node, "attr", ""))


def _is_regex(call: ast.Call) -> bool:
    return _name(call.func) == "get_multimodal_target_regex"


def is_lora_llm(tree: ast.Module) -> bool:
    """LoRA on get_multimodal_target_regex's linears, requires_grad_(True) over the tower and aligner, and a tuner
    registered in extra_tuners."""
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    regex = {  # names bound to get_multimodal_target_regex(...) (the example's target_regex)
        t.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and _is_regex(n.value)
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    lora = any(
        _name(c.func) == "LoraConfig"
        and any(
            k.arg == "target_modules"
            and ((isinstance(k.value, ast.Call) and _is_regex(k.value)) or _name(k.value) in regex)
            for k in c.keywords
        )
        for c in calls
    )
    trained = any(
        _name(c.func) == "requires_grad_" and c.args and getattr(c.args[0], "value", None) is True for c in calls
    )
    parts = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)} >= {"vision_tower", "aligner"}
    registered = any(
        isinstance(t, ast.Subscript) and _name(t.value) == "extra_tuners"
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign)
        for t in n.targets
    )
    return lora and trained and parts and registered


def read(path: Path) -> bool:
    """Whether the plugin at `path` is lora_llm's shape; False where it cannot be read or parsed."""
    try:
        tree = limits.parse_python(limits.read_config_text(path, errors="replace"), path)
    except (OSError, ValueError, SyntaxError, limits.OverLimit):
        return False
    return is_lora_llm(tree)


def read_custom(c: Collector, f: dict[str, Flag], near: Path, src: str, key: str) -> None:
    """--train_type custom: the --external_plugins file's tuner, read as lora_llm where it is that shape
    (reader_tuners.read_lora_llm), else refused in one line naming the file."""
    given = f["external_plugins"]
    path = plugin_path(given.value, near)
    if path is None or not read(path):
        what = f"{path.name}'s Tuner is not LoRA on the language model beside a trained ViT" if path else "not found"
        tuners.refuse(given.source, f"tuner custom from {one(given.value)} ({what})")
    c.add_file(path)
    why = f"{src}; {given.source} ({path.name}'s Tuner: LoRA on the language model, the ViT and aligner in full)"
    read_lora_llm(c, f, why, key)
