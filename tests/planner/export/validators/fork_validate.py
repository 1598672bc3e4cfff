"""Check the command a TRL GRPO fork's plan writes (`suggest --framework trl@vlm-r1|r1-v --emit`: launch.sbatch's
`<script> --flags`) with that fork's own entry script's parser, in a venv of the TRL release the fork pins
(tools/fwenv_old.sh: VLM-R1 90052f4 pins trl 0.17.0 and transformers 4.49.0, setup.py:65-66, the venv trl-0.17.0;
R1-V bbbbe3d trl 0.14.0, setup.py:65, the venv trl-0.14.0).

Usage: python fork_validate.py SCRIPT CONFIG:DIR [CONFIG:DIR ...]   (SCRIPT: the fork's GRPO entry script, a verbatim
copy under tests/data/frameworks/scripts; each DIR: what memplan wrote for one plan). A GRPOConfig folder is checked
with SCRIPT's parser as below; any other (the line's SFT and DPO plans, run with TRL's own scripts at the pinned
release) by trl_validate.py's check in the same process.

The script itself is not imported: its module level pulls GPU and service packages (VLM-R1's grpo_jsonl.py imports
flash-attn monkey patches, vlm_modules, openai, Levenshtein, babel). From its syntax tree:
1. the dataclasses of its `TrlParser((...))` call under `__main__`: a class the script defines (GRPOScriptArguments,
   GRPOModelConfig) is exec'd alone with the script's `dataclasses` / `typing` / `trl` imports; a class it imports
   from trl or transformers is the venv's; one it imports from its own package (VLM-R1's `open_r1.trainer.GRPOConfig`)
   is loaded from the file under SCRIPT's folder that defines it (trainer/grpo_config.py imports transformers alone);
2. the flags go through the script's own call, `TrlParser(classes).parse_args_and_config(args)` (no remaining
   strings allowed: argparse exits on a flag none of the classes has, or a required one missing, such as TRL's
   ScriptArguments.dataset_name), and TrainingArguments.__post_init__ runs (bf16 reported available);
   train_args.json through HfArgumentParser over the classes besides the script's own arguments (`parse_dict`
   refuses a key none of them has);
3. VLM-R1's VLMGRPOTrainer refuses a num_generations that does not divide the global batch of completions
   (src/open_r1/trainer/grpo_trainer.py:414-423): checked with the processes launch.sbatch starts.
Exits 1 at the first folder refused. `--values SCRIPT ARGV.json ...` prints, a JSON line each, what the script's parser
reads from a command's arguments (VALUES), for the test that compares memplan's reading of the fork's own scripts.
"""

import ast
import importlib
import importlib.util
import json
import os
import re
import shlex
import sys
from pathlib import Path

import trl_validate
from trl_validate import patch_host
from verdict import verdicts

OWN_IMPORTS = ("dataclasses", "typing", "trl", "transformers")  # modules whose names the dataclasses may need


def flags_of(script: str, entry: str) -> list[str]:
    """The arguments after the entry script `entry`, named alone or by its path from the fork's root (inside srun's
    bash -c '...' where there is one)."""
    toks = shlex.split(script.replace("\\\n", " "), comments=True)
    for tok in toks:
        if entry in tok and tok != entry and " " in tok:  # the srun ... bash -c 'torchrun ... script --flags' string
            return flags_of(tok, entry)
    return toks[next(i for i, t in enumerate(toks) if t == entry or t.endswith("/" + entry)) + 1 :]


def processes(sbatch: str) -> int:
    """The processes launch.sbatch starts: torchrun's --nproc_per_node on each of #SBATCH --nodes."""
    nodes = re.search(r"#SBATCH --nodes=(\d+)", sbatch)
    per_node = re.search(r"--nproc_per_node[ =](\d+)", sbatch)
    return (int(nodes.group(1)) if nodes else 1) * (int(per_node.group(1)) if per_node else 1)


def parser_names(tree: ast.Module) -> list[str]:
    """The class names of the script's `TrlParser((A, B, C))` (or HfArgumentParser) call."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("TrlParser", "HfArgumentParser"):
            return [e.id for e in node.args[0].elts]
    raise ValueError("the script builds no TrlParser or HfArgumentParser")


def defining_file(folder: Path, name: str) -> Path:
    """The file under the fork's package folder that defines class `name` at its top level."""
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text())
        if any(isinstance(n, ast.ClassDef) and n.name == name for n in tree.body):
            return path
    raise ValueError(f"no file under {folder} defines {name}")


def classes(script: Path) -> tuple[list[type], set[str]]:
    """The script's parser dataclasses (see the module docstring) and the names it imports."""
    tree = ast.parse(script.read_text())
    names, imported, namespace = parser_names(tree), set(), {}
    defined = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name in names]
    # the names the parser's classes need (TRL's lazy module imports a trainer only when asked for it: GRPOTrainer
    # alone costs 3 s of CPU), and the names the parser takes
    used = {n.id for d in defined for n in ast.walk(d) if isinstance(n, ast.Name)} | set(names)
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            imported |= {a.asname or a.name for a in node.names}
        if isinstance(node, ast.ImportFrom) and node.module in OWN_IMPORTS:
            module = importlib.import_module(node.module)
            namespace |= {
                a.asname or a.name: getattr(module, a.name) for a in node.names if (a.asname or a.name) in used
            }
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == script.parent.name:
            for a in node.names:  # the fork's own package: only the classes the parser takes, from their file
                if a.name in names:
                    spec = importlib.util.spec_from_file_location(a.name, defining_file(script.parent, a.name))
                    module = importlib.util.module_from_spec(spec)
                    spec.loader.exec_module(module)
                    namespace[a.asname or a.name] = getattr(module, a.name)
    exec(compile(ast.Module(body=defined, type_ignores=[]), str(script), "exec"), namespace)  # noqa: S102
    return [namespace[n] for n in names], imported


def check(script: Path, folder: Path) -> str:
    import transformers
    import trl

    types, imported = classes(script)
    os.chdir(folder)  # --deepspeed names the JSON beside the script
    sbatch = (folder / "launch.sbatch").read_text()
    argv = flags_of(sbatch, script.name)
    parsed = trl.TrlParser(types).parse_args_and_config(args=argv)
    model = next(p.model_name_or_path for p in parsed if hasattr(p, "model_name_or_path"))
    if not model:  # VLM-R1's get_vlm_module(None) fails: the printed command names it, the Slurm script must too
        raise ValueError("launch.sbatch names no --model_name_or_path")
    configs = [t for t in types if not issubclass(t, trl.ScriptArguments)]  # what train_args.json holds
    transformers.HfArgumentParser(configs).parse_dict(json.loads((folder / "train_args.json").read_text()))
    cfg = next(p for p in parsed if hasattr(p, "num_generations"))
    world = processes(sbatch)
    if "VLMGRPOTrainer" in imported:  # grpo_trainer.py:414-423
        batch = cfg.per_device_train_batch_size * world
        if cfg.num_generations not in range(2, batch + 1) or batch % cfg.num_generations:
            raise ValueError(
                f"VLMGRPOTrainer: global batch {world} x {cfg.per_device_train_batch_size} is not a "
                f"multiple of num_generations {cfg.num_generations}"
            )
    return (
        f"{script.name} trl {trl.__version__} {'/'.join(t.__name__ for t in types)}: "
        f"micro={cfg.per_device_train_batch_size} accum={cfg.gradient_accumulation_steps} world={world} "
        f"num_generations={cfg.num_generations} bf16={cfg.bf16} deepspeed={cfg.deepspeed} model={model}"
        f"{''.join(f' {k}={getattr(p, k)}' for p in parsed for k in ('min_pixels', 'max_pixels') if hasattr(p, k))}"
    )


# what a fork's script reads, as its parser gives it (`--values`: tests/planner/frameworks/trl/test_fork_own_parser.py
# compares memplan's reading of the same command)
VALUES = (
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "gradient_checkpointing",
    "bf16",
    "fp16",
    "optim",
    "num_generations",
    "max_completion_length",
    "beta",
    "max_pixels",
    "min_pixels",
    "use_peft",
    "lora_r",
    "lora_dropout",
    "attn_implementation",
    "deepspeed",
)


def values(script: Path, argv_file: str) -> str:
    """The fields VALUES of the command whose arguments `argv_file` holds (a JSON list), parsed by the script's own
    TrlParser, as one JSON line."""
    import trl

    types, _ = classes(script)
    args = json.loads(Path(argv_file).read_text())
    if "--deepspeed" in args and not Path(args[args.index("--deepspeed") + 1]).is_file():  # a posted script's JSON
        args[args.index("--deepspeed") + 1] = ""  # not posted with it: TrainingArguments would load it; not compared
    parsed = trl.TrlParser(types).parse_args_and_config(args=args)
    got = {k: getattr(p, k) for p in parsed for k in VALUES if hasattr(p, k)}
    got = {k: getattr(v, "value", v) for k, v in got.items()}  # optim: an OptimizerNames
    return json.dumps({k: v if isinstance(v, (int, float, str, bool, type(None))) else str(v) for k, v in got.items()})


def main(args: list[str]) -> int:
    if args[0] == "--values":  # fork_validate.py --values SCRIPT ARGV.json ...: print what the parser reads
        patch_host()
        for argv_file in args[2:]:
            print(values(Path(args[1]).resolve(), argv_file))
        return 0
    script, paths = Path(args[0]).resolve(), []
    for arg in args[1:]:
        config, _, folder = arg.partition(":")
        trl_validate.CONFIGS[Path(folder).resolve()] = config
        paths.append(folder)
    patch_host()
    return verdicts(
        paths,
        lambda f: check(script, f) if trl_validate.CONFIGS[f] == "GRPOConfig" else trl_validate.check(f),
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
