"""Check a trl@unsloth plan's files (train_args.json and launch.sbatch's `train.py --flags`) with the config classes
unsloth puts in TRL's place, in a venv of a TRL release unsloth allows (unsloth 2026.8.19, unslothai/unsloth 015bdef0d9
pyproject.toml:170-171: trl>=0.18.2,!=0.19.0,<=0.24.0, transformers <=5.5.0; its Alpaca notebook pins trl 0.22.2: the
venv trl-0.22.2).

Usage: python unsloth_validate.py CONFIG:DIR [CONFIG:DIR ...]   (CONFIG: SFTConfig, DPOConfig or GRPOConfig).

unsloth cannot be imported on a host without an accelerator, and it builds its classes at import time, from TRL's
installed source (unsloth/models/rl.py _patch_trl_rl_trainers_impl): so they are built here from its own template, the
verbatim lines tests/data/frameworks/scripts/unsloth/rl.py-486-536.txt (`@dataclass class Unsloth{RLConfig_name}
({RLConfig_name})`: vllm_sampling_params, unsloth_num_chunks, unsloth_logit_chunk_multiplier, unsloth_grpo_mini_batch,
and max_seq_length where TRL's config has max_length and no max_seq_length, rl.py-3371-3382.txt), its fields exec'd
over the venv's TRL class and put in TRL's place as unsloth does (rl.py:3841-3852: trl.{RLConfig_name} = ...). Its
generated __init__ is not built: it takes the same names and drops any other with a warning
(unsloth/models/rl_config_compat.py), so parsing with the fields alone is stricter: a key unsloth would drop is
refused. Then:
1. trl_validate.py's check (train_args.json through HfArgumentParser.parse_dict, the flags through
   parse_args_into_dataclasses, the config's __post_init__, the FSDP plugin of an FSDP plan);
2. GRPO: unsloth's own batch check (rl.py:3465-3481, in its __init__ where TRL's config has steps_per_generation and
   generation_batch_size, 0.18 on): a global batch (gradient_accumulation_steps x WORLD_SIZE x
   per_device_train_batch_size) that num_generations does not divide makes unsloth set per_device_train_batch_size to
   num_generations, a batch other than the plan's: refused, with the processes launch.sbatch starts.
Exits 1 at the first folder refused. `--values NOTEBOOK.py ...` prints, a JSON line each, what unsloth's class holds for
an unsloth notebook's SFTConfig / GRPOConfig call (its keyword arguments evaluated from the script's syntax tree, the
GRPO batch rule applied as unsloth applies it), for the test that compares memplan's reading of the notebooks.
"""

import ast
import json
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import trl_validate
from fork_validate import processes
from verdict import verdicts

UNSLOTH = Path(__file__).resolve().parents[3] / "data" / "frameworks" / "scripts" / "unsloth"


def unsloth_fields(name: str) -> str:
    """The class statement of unsloth's template, its fields only, for TRL's config `name` (see the docstring)."""
    template = (UNSLOTH / "rl.py-486-536.txt").read_text()
    body = template[template.index("@dataclass") : template.index("    def __init__(")]
    body = body.replace("{{", "{").replace("}}", "}").replace("{RLConfig_name}", name)
    body = body.replace("{__RLConfig_doc__}", "")
    return body.replace("{max_seq_length_pre}", max_seq_length_field(name))


def max_seq_length_field(name: str) -> str:
    """rl.py:3371-3382: unsloth's max_seq_length field where TRL's config takes max_length and no max_seq_length."""
    import inspect

    import trl

    params = inspect.signature(getattr(trl, name).__init__).parameters
    tree = ast.parse(textwrap.dedent((UNSLOTH / "rl.py-3371-3382.txt").read_text()))
    (branch,) = [n for n in tree.body if isinstance(n, ast.If)]
    taken = "max_seq_length" not in params and "max_length" in params
    for node in branch.body if taken else branch.orelse:
        if isinstance(node, ast.Assign) and node.targets[0].id == "max_seq_length_pre":
            return node.value.value
    raise ValueError("no max_seq_length_pre in rl.py-3371-3382.txt")


def install(name: str) -> None:
    """Unsloth{name} over the venv's TRL class, put in TRL's place."""
    import trl

    namespace = {"dataclass": dataclass, "field": field, "Optional": Optional, "Any": Any, name: getattr(trl, name)}
    exec(unsloth_fields(name), namespace)  # noqa: S102
    setattr(trl, name, namespace[f"Unsloth{name}"])


def check(folder: Path) -> str:
    said = trl_validate.check(folder)

    config, raw = trl_validate.CONFIGS[folder], json.loads((folder / "train_args.json").read_text())
    cfg, _ = trl_validate.parser(config).parse_dict(raw)
    if type(cfg).__name__ != f"Unsloth{config}":
        raise ValueError(f"parsed as {type(cfg).__name__}, not unsloth's class")
    if config == "GRPOConfig":  # unsloth's rule on what the files give, with the processes launch.sbatch starts
        world = processes((folder / "launch.sbatch").read_text())
        if batch_rule(raw, world) != raw:
            raise ValueError(
                f"unsloth sets per_device_train_batch_size {cfg.per_device_train_batch_size} to num_generations "
                f"{cfg.num_generations}: {cfg.gradient_accumulation_steps} x {world} x "
                f"{cfg.per_device_train_batch_size} is not a multiple of it (rl.py:3465-3481)"
            )
    return f"Unsloth{config} {said}"


def batch_rule(kwargs: dict, world: int) -> dict:
    """unsloth's GRPO batch rule in Unsloth{GRPOConfig}.__init__ before TRL's (rl.py:3465-3481): no
    steps_per_generation or generation_batch_size given and a global batch num_generations does not divide, the
    micro-batch becomes num_generations."""
    import trl

    split = {"steps_per_generation", "generation_batch_size"}
    if not split <= set(trl.GRPOConfig.__dataclass_fields__) or split & {k for k, v in kwargs.items() if v is not None}:
        return kwargs
    ga, micro = kwargs.get("gradient_accumulation_steps", 1), kwargs.get("per_device_train_batch_size", 8)
    n = kwargs.get("num_generations", trl.GRPOConfig.__dataclass_fields__["num_generations"].default)
    return kwargs | ({"per_device_train_batch_size": n} if (ga * world * micro) % n else {})


def notebook_config(path: Path) -> tuple[str, dict]:
    """The SFTConfig / GRPOConfig call of an unsloth notebook script and its keyword arguments, each evaluated with
    the names the script binds at its top level to literals (max_seq_length = 2048) or arithmetic on them."""
    tree, names = ast.parse(path.read_text()), {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                names[node.targets[0].id] = eval(compile(ast.Expression(node.value), str(path), "eval"), {}, names)
            except Exception:  # noqa: BLE001, S112 - a value the script computes at run time: not a literal
                continue
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("SFTConfig", "GRPOConfig", "DPOConfig"):
            kwargs = {
                k.arg: eval(compile(ast.Expression(k.value), str(path), "eval"), {}, names) for k in node.keywords
            }
            return node.func.id, kwargs
    raise ValueError(f"{path}: no SFTConfig, GRPOConfig or DPOConfig call")


def notebook_values(path: Path) -> str:
    """What unsloth's config class holds for a notebook's config call (one process, WORLD_SIZE 1), as a JSON line."""
    import trl

    name, kwargs = notebook_config(path)
    install(name)
    given = batch_rule(kwargs, 1) if name == "GRPOConfig" else kwargs
    cfg = getattr(trl, name)(**given)
    keys = ("per_device_train_batch_size", "gradient_accumulation_steps", "optim", "num_generations")
    keys += ("max_prompt_length", "max_completion_length", "max_length")
    got = {k: getattr(getattr(cfg, k), "value", getattr(cfg, k)) for k in keys if hasattr(cfg, k)}
    return json.dumps({"config": type(cfg).__name__, "given": sorted(kwargs), **got})


def main(args: list[str]) -> int:
    if args[0] == "--values":  # unsloth_validate.py --values NOTEBOOK.py ...: what unsloth's classes hold
        trl_validate.patch_host()
        for path in args[1:]:
            print(notebook_values(Path(path)))
        return 0
    paths = []
    for arg in args:
        config, _, folder = arg.partition(":")
        trl_validate.CONFIGS[Path(folder).resolve()] = config
        paths.append(folder)
    trl_validate.patch_host()
    for name in set(trl_validate.CONFIGS.values()):
        install(name)
    return verdicts(paths, check)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
