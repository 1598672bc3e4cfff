"""Training frameworks as memplan plans for them: what each one can run (knob values), its defaults at the pinned
version (each citing the file it was read from), its own key for each setting, and where it spends memory apart
from the recipe (Framework.sft_head). A framework whose defaults, keys or meanings moved between releases lists them
(Framework.releases, one Release each, in its own module); `--framework NAME@RELEASE` plans with that release
(`adapter`). One folder per framework (`<name>/__init__.py` the adapter; `keys.py` its key table, read both ways;
`reader*.py` its config reader, staged with planner.intake; `writer*.py` its files, staged with planner.export);
`FRAMEWORKS` is the registry (`trl-0`: trl@0.22 by its old name), and the faces reach a folder's reader and writer
through what its adapter declares (Framework.reads, .launched, .tools, .trainers, .script_flags, .calls, .writes),
never by its name. The adapters are data: the rules that use them live in planner.config.spec.Knobs."""

from __future__ import annotations

from functools import lru_cache
from importlib import import_module

from planner.frameworks import (
    accelerate,
    axolotl,
    deepspeed,
    hf,
    llamafactory,
    llamafactory_v1,
    memplan,
    openrlhf,
    swift,
    torchtitan,
    torchtune,
    trl,
    verl,
)
from planner.frameworks.base import KNOB_DEFAULTS, Framework, Release, Where
from planner.frameworks.tool import Signs, Tool

FRAMEWORKS: dict[str, Framework] = {
    f.name: f
    for f in (
        *(m.FRAMEWORK for m in (memplan, hf, trl)),
        trl.TRL0,
        *(
            m.FRAMEWORK
            for m in (
                accelerate,
                deepspeed,
                llamafactory,
                llamafactory_v1,
                swift,
                axolotl,
                verl,
                torchtitan,
                torchtune,
                openrlhf,
            )
        ),
    )
}
NAMES: tuple[str, ...] = tuple(FRAMEWORKS)
# the command lines the frameworks own (Framework.tools), by each name a launch line gives the CLI: (framework, tool)
CLIS: dict[str, tuple[str, Tool]] = {n: (f.name, t) for f in FRAMEWORKS.values() for t in f.tools for n in t.names}
# the `python -m` module prefixes that train with a framework's CLI (Tool.modules)
MODULES: tuple[str, ...] = tuple(m for f in FRAMEWORKS.values() for t in f.tools for m in t.modules)
# the framework whose reader reads a training script's own flags (Framework.script_flags), the format its reader
# reads them as, and the name its reader's trainer_of gives transformers' plain Trainer (that framework's first trainer)
(ARGS,) = (f.name for f in FRAMEWORKS.values() if f.script_flags)
ARGS_FORMAT = FRAMEWORKS[ARGS].reads[0]
PLAIN = FRAMEWORKS[ARGS].trainers[0]
# how each configuration format is told from its content (Framework.signs), in the order they are tried
SIGNS: tuple[Signs, ...] = tuple(sorted((s for f in FRAMEWORKS.values() for s in f.signs), key=lambda s: s.rank))
# the bundled trainer (its own loop, Framework.loop "bundled"): what a reading falls back to where a framework's
# adapter does not run a value its files set
(BUNDLED,) = (f.name for f in FRAMEWORKS.values() if f.loop == "bundled")


def cli(name: str) -> tuple[str, Tool] | None:
    """(framework, tool) for the CLI a launch line names (`swift`, `lmf`), else None (a launcher, or no framework's)."""
    return CLIS.get(name)


def entry(target: str) -> tuple[str, Tool, str] | None:
    """(framework, tool, subcommand) for a script another launcher runs in a framework CLI's place (Tool.script)."""
    for f in FRAMEWORKS.values():
        for t in f.tools:
            sub = t.entry(target)
            if sub is not None:
                return f.name, t, sub
    return None


def by_trainer(trainer: str) -> str:
    """The framework a run of script-flags trainer `trainer` is (Framework.trainers: hf's plain Trainer, TRL's)."""
    return next(f.name for f in FRAMEWORKS.values() if trainer in f.trainers)


def reader(name: str, part: str = "reader"):
    """Framework `name`'s reader module (its folder's reader.py, or `part`), imported on first use."""
    return import_module(f"planner.frameworks.{name}.{part}")


def calls_reader():
    """The module that reads a Python script's calls of a library built on a framework (Framework.calls), or None."""
    return next((reader(f.name, f.calls) for f in FRAMEWORKS.values() if f.calls), None)


@lru_cache(maxsize=64)
def adapter(name: str, release: str = "") -> Framework:
    """The framework `name` as its release `release` runs it ("": the newest; BadInput for one it does not list)."""
    return FRAMEWORKS[name].at(release)


def split_name(text: str) -> tuple[str, str]:
    """("trl", "0.14") from "trl@0.14"; ("trl", "") from "trl"."""
    name, _, release = str(text).partition("@")
    return name.strip(), release.strip()


def release_json(r: Release) -> dict:
    return {
        "name": r.name,
        "aliases": list(r.aliases),
        "first": ".".join(map(str, r.first)) if r.first else None,
        "source": r.source,
        "defaults": {k: {"value": d.value, "source": d.source} for k, d in r.defaults.items()},
        "workload": {k: {"value": d.value, "source": d.source} for k, d in r.workload.items()},
        "grpo": {k: {"value": d.value, "source": d.source} for k, d in r.grpo.items()},
        "keys": dict(r.keys),
        "meaning": dict(r.meaning),
        "notes": list(r.notes),
    }


TABLE_KNOBS = ("workload", "checkpointing", "loss", "batching", "fsdp", "optimizer_in_backward")


def check_plan(name: str, plan, model=None, hw=None) -> None:
    """ValueError naming the first rule of framework `name` a plan (planner.config.spec.Plan) breaks on `hw`'s GPUs
    and `model`: what its exporter asks before it writes a file (the search pruned with the same rules)."""
    if hw is None:  # the layout unknown: the knobs' rules and the model's
        where = Where(model=model)
    else:
        where = Where(hw.gpus_per_node, hw.nodes, model, False, plan.micro_batch, plan.grad_accum)
    refused = adapter(name, getattr(plan, "release", "")).refusal(dict(plan.knobs), where)
    if refused:
        raise ValueError(refused[1])


def _refused_workloads(f: Framework) -> list[str]:
    """The workloads a framework reads but one of its rules refuses at the default knobs (axolotl's `rl: kto`,
    unmeasured): `planner frameworks` marks them, so its table never lists them as run. Other knobs' values are refused
    only beside others (hf's optimizer in backward needs GaLore or APOLLO) and stay as they are."""
    if not KNOB_DEFAULTS:  # every knob's default, which planner.config.knobfields fills when imported (its callers do)
        raise RuntimeError("frameworks_json reads the knobs' defaults: import planner.config.knobfields first")
    base = dict(KNOB_DEFAULTS)
    return [
        v for v in f.runs.get("workload", ()) if (f.cannot({**base, "workload": {"kind": v}}) or ("",))[0] == "workload"
    ]


def frameworks_json() -> dict:
    """Every framework: what it runs (a knob it does not list: every value), its defaults with their sources, its
    keys and notes (`planner frameworks --json`, GET /v1/frameworks)."""
    return {
        "frameworks": [
            {
                "name": f.name,
                "label": f.label,
                "version": f.version,
                "runs": {k: list(v) for k, v in f.runs.items()},
                "every": list(f.every),
                "refused": {"workload": _refused_workloads(f)},
                "defaults": {k: {"value": d.value, "source": d.source} for k, d in f.defaults.items()},
                "keys": dict(f.keys),
                "notes": list(f.notes),
                "releases": [release_json(r) for r in f.releases],
            }
            for f in FRAMEWORKS.values()
        ]
    }


__all__ = [
    "ARGS",
    "ARGS_FORMAT",
    "BUNDLED",
    "CLIS",
    "FRAMEWORKS",
    "MODULES",
    "NAMES",
    "PLAIN",
    "SIGNS",
    "TABLE_KNOBS",
    "Framework",
    "Release",
    "Signs",
    "Tool",
    "Where",
    "adapter",
    "by_trainer",
    "calls_reader",
    "check_plan",
    "cli",
    "entry",
    "frameworks_json",
    "reader",
    "split_name",
]
