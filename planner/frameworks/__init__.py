"""Training frameworks as memplan plans for them: what each one can run (knob values), its defaults at the pinned
version (each citing the file it was read from), its own key for each setting, and where it spends memory apart
from the recipe (Framework.sft_head). A framework whose defaults or memory moved between versions has one adapter
per version (trl: 1.x, trl-0: 0.x). One small adapter module per
framework; `FRAMEWORKS` is the registry. Data only: the rules that use it live in planner.config.spec.Knobs, the
config readers in planner.intake, the exports in planner.export."""

from __future__ import annotations

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
    trl,
    trl0,
    verl,
)
from planner.frameworks.base import Default, Framework, Where

FRAMEWORKS: dict[str, Framework] = {
    m.FRAMEWORK.name: m.FRAMEWORK
    for m in (memplan, hf, trl, trl0, accelerate, deepspeed, llamafactory, swift, axolotl, verl, torchtitan, openrlhf)
}
NAMES: tuple[str, ...] = tuple(FRAMEWORKS)

TABLE_KNOBS = ("workload", "checkpointing", "loss", "batching", "fsdp", "optimizer_in_backward")


def check_plan(name: str, plan, model=None, hw=None) -> None:
    """ValueError naming the first rule of framework `name` a plan (planner.config.spec.Plan) breaks on `hw`'s GPUs
    and `model`: what its exporter asks before it writes a file (the search pruned with the same rules)."""
    if hw is None:  # the layout unknown: the knobs' rules and the model's
        where = Where(model=model)
    else:
        where = Where(hw.gpus_per_node, hw.nodes, model, False, plan.micro_batch, plan.grad_accum)
    refused = FRAMEWORKS[name].refusal(dict(plan.knobs), where)
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
                "defaults": {k: {"value": d.value, "source": d.source} for k, d in f.defaults.items()},
                "keys": dict(f.keys),
                "notes": list(f.notes),
            }
            for f in FRAMEWORKS.values()
        ]
    }


__all__ = ["FRAMEWORKS", "NAMES", "TABLE_KNOBS", "Default", "Framework", "Where", "check_plan", "frameworks_json"]
