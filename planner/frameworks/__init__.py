"""Training frameworks as memplan plans for them: what each one can run (knob values), its defaults at the pinned
version (each citing the file it was read from), its own key for each setting, and where it spends memory apart
from the recipe (Framework.sft_head). A framework whose defaults, keys or meanings moved between releases lists them
(Framework.releases, one Release each, in its own module); `--framework NAME@RELEASE` plans with that release
(`adapter`). One folder per framework (`<name>/__init__.py` the adapter; `keys.py` its key table, read both ways;
`reader*.py` its config reader, staged with planner.intake; `writer*.py` its files, staged with planner.export);
`FRAMEWORKS` is the registry (`trl-0`: trl@0.22 by its old name), and the faces reach a folder's reader and writer
through what its adapter declares (Framework.reads, .launched, .writes), never by its name. The adapters are data: the rules that use them live in planner.config.spec.Knobs."""

from __future__ import annotations

from functools import lru_cache

from planner.frameworks import (
    accelerate,
    axolotl,
    deepspeed,
    hf,
    llamafactory,
    memplan,
    openrlhf,
    swift,
    torchtitan,
    torchtune,
    trl,
    verl,
)
from planner.frameworks.base import Default, Framework, Release, Where

FRAMEWORKS: dict[str, Framework] = {
    f.name: f
    for f in (
        *(m.FRAMEWORK for m in (memplan, hf, trl)),
        trl.TRL0,
        *(
            m.FRAMEWORK
            for m in (accelerate, deepspeed, llamafactory, swift, axolotl, verl, torchtitan, torchtune, openrlhf)
        ),
    )
}
NAMES: tuple[str, ...] = tuple(FRAMEWORKS)


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
                "defaults": {k: {"value": d.value, "source": d.source} for k, d in f.defaults.items()},
                "keys": dict(f.keys),
                "notes": list(f.notes),
                "releases": [release_json(r) for r in f.releases],
            }
            for f in FRAMEWORKS.values()
        ]
    }


__all__ = [
    "FRAMEWORKS",
    "NAMES",
    "TABLE_KNOBS",
    "Default",
    "Framework",
    "Release",
    "Where",
    "adapter",
    "check_plan",
    "frameworks_json",
    "split_name",
]
