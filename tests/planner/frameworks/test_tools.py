"""Issue 46 item 1: the command lines a framework owns are declared in its folder (Framework.tools: its CLI's names and
subcommands, the entry scripts and modules a launcher runs in its place, the launcher it wraps, the reader its runs go
to), with the script-flags trainers (Framework.trainers) and readers (.script_flags, .calls); planner/intake/ finds
them through the registry and names no framework. The launchers proper (torchrun, deepspeed, accelerate launch,
python) are intake's own: deepspeed's and accelerate's folders read the launchers' config files. A config file's format
is told by the signs each folder declares (Framework.signs)."""

import ast
import inspect
from pathlib import Path

import pytest

from planner.errors import BadInput
from planner.frameworks import (
    ARGS,
    CLIS,
    FRAMEWORKS,
    MODULES,
    NAMES,
    PLAIN,
    SIGNS,
    by_trainer,
    calls_reader,
    cli,
    entry,
    reader,
)
from planner.intake import configs, launch, read_command
from planner.intake.shell import read_script

ROOT = Path(__file__).resolve().parents[3]
INTAKE = ROOT / "planner" / "intake"
FOLDERS = {p.parent.name for p in (ROOT / "planner" / "frameworks").glob("*/__init__.py")}
LAUNCHERS = {"accelerate", "deepspeed"}  # launchers proper whose config files their folders read
TOOLS = [(f.name, t) for f in FRAMEWORKS.values() for t in f.tools]


def _words() -> set[str]:
    """The strings that name a framework: its name (a launcher's aside), its CLIs' names and module prefixes."""
    tools = {w for _, t in TOOLS for w in (*t.names, *t.modules)}
    return (set(NAMES) | tools) - LAUNCHERS


def offenders(tree: ast.AST, where: str, words: set[str]) -> list[tuple[str, str]]:
    """(where:line, what) for each string constant (docstrings aside) in `words` and each import of a framework's
    folder other than a launcher's."""
    docs = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Module | ast.FunctionDef | ast.ClassDef)
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in words and id(n) not in docs:
            out.append((f"{where}:{n.lineno}", n.value))
        modules = [a.name for a in n.names] if isinstance(n, ast.Import) else []
        if isinstance(n, ast.ImportFrom) and n.module:
            modules = [n.module] + [f"{n.module}.{a.name}" for a in n.names]
        for m in modules:
            parts = m.split(".")
            if parts[:2] == ["planner", "frameworks"] and len(parts) > 2 and parts[2] in FOLDERS - LAUNCHERS:
                out.append((f"{where}:{n.lineno}", f"import {m}"))
    return out


def test_intake_names_no_framework_and_imports_no_frameworks_folder():
    found = []
    for path in sorted(INTAKE.glob("*.py")):
        found += offenders(ast.parse(path.read_text()), path.name, _words())
    assert not found, "\n".join(f"{where} {what}" for where, what in found)


def test_the_guard_catches_each_form():
    """The checker itself: the forms intake had (`run.tool == "trl"`, `in ("llamafactory-cli", "lmf")`, a module
    prefix, the trainer's framework by name, a folder's reader imported either way) each fail it; a launcher, a
    docstring and a name inside longer text do not."""
    planted = '''
"""swift and trl in a docstring"""
from planner.frameworks.swift import reader
from planner.frameworks import llamafactory
import planner.frameworks.trl.reader_vlmr1
from planner.frameworks.accelerate import reader as accelerate
a = run.tool == "trl"
b = run.tool in ("llamafactory-cli", "lmf")
c = name.startswith(("axolotl.cli.train",))
d = "trl" if trainer != "hf" else "hf"
e = run.tool == "deepspeed" or run.tool == "accelerate"
f = "swift sft / rlhf, trl"
'''
    found = offenders(ast.parse(planted), "p", _words())
    assert sorted({w for w, _ in found}, key=lambda w: int(w.split(":")[1])) == [
        f"p:{n}" for n in (3, 4, 5, 7, 8, 9, 10)
    ], found
    assert ("p:10", "hf") in found and ("p:8", "lmf") in found


def test_each_cli_name_and_module_is_one_frameworks():
    names = [n for _, t in TOOLS for n in t.names]
    assert len(names) == len(set(names)) == len(CLIS), names
    assert len(MODULES) == len(set(MODULES))
    assert set(CLIS) <= launch.TOOLS
    assert not set(CLIS) & {"torchrun", "deepspeed", "accelerate", "python", "bash", "sh"}
    assert {n: CLIS[n][0] for n in CLIS} == {n: f for f, t in TOOLS for n in t.names}


@pytest.mark.parametrize(("name", "tool"), TOOLS, ids=[t.name for _, t in TOOLS])
def test_a_tools_reader_has_the_function_its_runs_go_to(name, tool):
    """Tool.reads "run": reader.read_run(run); "cli": reader.read_cli(c, run, sub, flags, data, path, launcher); a
    CLI that runs its own processes (no Tool.wraps) and reads "config": reader.read_launcher(c, env, where); a CLI
    that wraps a launcher wraps one planner.intake reads; its trainers are its framework's."""
    params = {
        "run": ("read_run", ["run"]),
        "cli": ("read_cli", ["c", "run", "sub", "flags", "data", "path", "launcher"]),
        "config": ("read_launcher", ["c", "env", "where"]),
    }
    if tool.reads != "config" or not tool.wraps:
        func, expected = params[tool.reads]
        assert list(inspect.signature(getattr(reader(name), func)).parameters) == expected, (name, tool.reads)
    assert tool.wraps in ("", "accelerate") and tool.options in ("", *launch.ALIASES)
    assert set(tool.trainers) <= set(FRAMEWORKS[name].trainers)
    assert tool.trains and (not tool.script or tool.reads == "cli")


def test_every_script_flags_trainer_is_one_frameworks():
    """The names the script-flags reader gives a run (reader.trainer_of, planner.intake.pyscript's RewardConfig) each
    belong to one framework: the plain Trainer to the script-flags reader's, TRL's to trl."""
    owned = [t for f in FRAMEWORKS.values() for t in f.trainers]
    assert len(owned) == len(set(owned))
    told = {reader(ARGS).trainer_of({}, hint) for hint in ("train.py", "sft", "dpo", "grpo", "gkd", "kto")} | {"reward"}
    assert told == set(owned) and by_trainer(PLAIN) == ARGS
    assert {by_trainer(t) for t in told - {PLAIN}} == {"trl"}
    assert calls_reader().__name__ == "planner.frameworks.trl.reader_unsloth"


def _runs(text: str) -> list:
    return launch.runs(read_script(Path("/nonexistent/x.sh"), text))


@pytest.mark.parametrize("cmd", [n for _, t in TOOLS for n in t.names])
def test_each_declared_cli_is_found_by_its_training_subcommands_only(cmd):
    _, tool = cli(cmd)
    for sub in tool.trains:
        found = _runs(f"{cmd} {sub} target --x 1\n")  # after Tool.options' launcher options, its target
        assert [(r.tool, r.target) for r in found] == [(cmd, "target" if tool.options else sub)]
    assert _runs(f"{cmd} version\n") == []


def test_a_declared_module_and_entry_script_are_found_and_read_as_their_frameworks(tmp_path):
    for prefix in MODULES:
        assert [r.target for r in _runs(f"python -m {prefix}.x --y 1\n")] == [f"{prefix}.x"]
    assert entry("/opt/ms-swift/swift/cli/rlhf.py")[::2] == ("swift", "rlhf")
    assert entry("train.py") is None
    argv = ["torchrun", "--nproc_per_node", "2", "/opt/ms-swift/swift/cli/sft.py", "--model", "Qwen/Qwen2.5-7B"]
    reading = read_command(argv, tmp_path)
    assert reading.framework == "swift" and reading.request["gpus_per_node"] == 2
    reading = read_command(
        ["trl", "grpo", "--model_name_or_path", "Qwen/Qwen2.5-0.5B", "--num_processes", "4"], tmp_path
    )
    assert reading.framework == "trl" and reading.request["workload"]["kind"] == "grpo"
    assert reading.request["gpus_per_node"] == 4  # taken from TRL's flags as accelerate launch's (Tool.wraps)


def test_each_format_is_told_by_one_folders_signs_and_read_by_that_folder():
    """Every format a folder reads has its signs there, every sign not refused is a format its folder reads, and the
    ranks order them (a model's config.json between the launchers' and the trainers')."""
    ranks = [s.rank for s in SIGNS] + [configs.MODEL_RANK]
    assert len(ranks) == len(set(ranks))
    for f in FRAMEWORKS.values():
        told = {s.format for s in f.signs if not s.refused}
        assert told == set(f.reads), f.name
    reads = [fmt for f in FRAMEWORKS.values() for fmt in f.reads]
    assert len(reads) == len(set(reads)) == len({s.format for s in SIGNS if not s.refused})


@pytest.mark.parametrize(
    ("data", "fmt"),
    [
        ({"m": {"_component_": "x"}, "zero_optimization": {}}, "torchtune"),  # the lowest rank's, whatever else
        ({"zero_optimization": {}, "distributed_type": "DEEPSPEED"}, "deepspeed"),
        ({"architectures": ["X"], "base_model": "y"}, configs.MODEL),
        ({"base_model": "y", "stage": "sft"}, "axolotl"),
        ({"dist_config": {}, "stage": "sft"}, "llamafactory_v1"),  # LLaMA-Factory's v1 before its 0.9 keys
        ({"model": "y", "micro_batch_size": 1, "dataset": ["d"]}, "swift-megatron"),  # ms-swift's, before LF v1
        ({"model": "y", "micro_batch_size": 1, "model_class": "llm", "dataset": ["d"]}, "llamafactory_v1"),
        ({"model": "y", "sampler_engine": "vllm", "torch_dtype": "bfloat16"}, "swift-sample"),
        ({"stage": "sft", "learning_rate": 1e-5}, "llamafactory"),
        ({"model": "y", "tuner_type": "lora", "learning_rate": 1e-5}, "swift"),
        ({"learning_rate": 1e-5}, "hf"),
        ({"foo": 1}, None),
    ],
)
def test_a_mappings_format_is_the_lowest_ranked_signs_it_shows(data, fmt):
    assert configs.kind(data) == fmt


# a file of each refused format: verl's multi-turn tool config (a trainer config names it), LLaMA-Factory's Megatron
REFUSED_FILES = {
    "verl-multiturn": {"tools": [{"class_name": "verl.tools.gsm8k_tool.Gsm8kTool", "config": {}}]},
    "lf-mca": {"stage": "sft", "finetuning_type": "full", "tensor_model_parallel_size": 2},
    "swift-megatron": {"model": "Qwen/Qwen3-8B", "micro_batch_size": 1, "tensor_model_parallel_size": 2},
    "swift-sample": {"model": "Qwen/Qwen3-8B", "sampler_engine": "vllm", "num_return_sequences": 4},
}


@pytest.mark.parametrize("fmt", sorted(REFUSED_FILES))
def test_a_refused_format_is_refused_in_one_line_naming_why(fmt, tmp_path):
    assert sorted(s.format for s in SIGNS if s.refused) == sorted(REFUSED_FILES)
    (refused,) = [s for s in SIGNS if s.format == fmt]
    data = REFUSED_FILES[fmt]
    assert configs.kind(data) == refused.format
    with pytest.raises(BadInput) as e:
        configs.refuse(configs.kind(data), tmp_path / "v1.yaml")
    assert refused.refused in str(e.value) and "\n" not in str(e.value)
