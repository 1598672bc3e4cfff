"""A training script's own argument defaults, read from its syntax tree (never run or imported): the fields of the
@dataclass classes it defines (`name: T = field(default=LITERAL)`, `name: T = LITERAL`), which HfArgumentParser /
TrlParser turn into its flags, and its argparse `add_argument("--name", default=LITERAL)` calls. A launcher's command
gives the flags it sets; the script's defaults stand for those it leaves out (VLM-R1's GRPOScriptArguments.max_pixels
12845056, grpo_jsonl.py:89-92). Only the memory-relevant names the readers take are kept (`KEYS`)."""

from __future__ import annotations

import ast
from pathlib import Path

from planner.intake import limits
from planner.intake.collect import show
from planner.intake.flags import Flag

# names a script's own default may stand for (the readers read them: hfargs, grpoargs, vlmr1)
KEYS = {
    "max_pixels",
    "min_pixels",
    "max_anyres_num",
    "max_prompt_length",
    "max_completion_length",
    "num_generations",
    "beta",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "gradient_checkpointing",
    "max_length",
    "max_seq_length",
    "model_max_length",
    "freeze_vision_modules",
}


def _literal(node: ast.AST | None) -> tuple[bool, object]:
    if node is None:
        return False, None
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _field_default(value: ast.AST | None) -> tuple[bool, object]:
    """`field(default=X)` or a plain literal; a default_factory or a computed value is no default here."""
    if isinstance(value, ast.Call) and getattr(value.func, "id", getattr(value.func, "attr", "")) == "field":
        kw = next((k for k in value.keywords if k.arg == "default"), None)
        return _literal(kw.value if kw else None)
    return _literal(value)


def _is_dataclass(cls: ast.ClassDef) -> bool:
    names = [d.func if isinstance(d, ast.Call) else d for d in cls.decorator_list]
    return any(getattr(n, "id", getattr(n, "attr", "")) == "dataclass" for n in names)


def _dataclass_defaults(tree: ast.Module, path: Path) -> dict[str, Flag]:
    out: dict[str, Flag] = {}
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and _is_dataclass(n)):
        for stmt in cls.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            name = stmt.target.id
            ok, value = _field_default(stmt.value)
            if name in KEYS and ok and value is not None and name not in out:
                lines = f"{stmt.lineno}-{stmt.end_lineno}" if stmt.end_lineno != stmt.lineno else f"{stmt.lineno}"
                src = f"{path.name}:{lines} default {name} {show(value)} ({cls.name}, the script's own)"
                out[name] = Flag(name, value, src, name)
    return out


def _argparse_defaults(tree: ast.Module, path: Path) -> dict[str, Flag]:
    out: dict[str, Flag] = {}
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        if getattr(call.func, "attr", "") != "add_argument" or not call.args:
            continue
        ok, flag = _literal(call.args[0])
        kw = next((k for k in call.keywords if k.arg == "default"), None)
        okd, value = _literal(kw.value if kw else None)
        name = str(flag).lstrip("-").replace("-", "_") if ok else ""
        if name in KEYS and okd and value is not None and name not in out:
            src = f"{path.name}:{call.lineno} default {name} {show(value)} (its argparse, the script's own)"
            out[name] = Flag(name, value, src, str(flag))
    return out


def defaults(path: Path) -> dict[str, Flag]:
    """The script's own defaults by flag name; {} for a script that cannot be read or parsed."""
    try:
        tree = limits.parse_python(limits.read_config_text(path, errors="replace"), path)
    except (OSError, ValueError, SyntaxError, limits.OverLimit):
        return {}
    return {**_argparse_defaults(tree, path), **_dataclass_defaults(tree, path)}


def with_defaults(c, script: Path | None, flags: dict[str, Flag]) -> dict[str, Flag]:
    """`flags` with the script's own defaults for those it leaves out (the script a file of the reading)."""
    if script is None:
        return flags
    c.add_file(script)
    return {**{k: f for k, f in defaults(script).items() if k not in flags}, **flags}
