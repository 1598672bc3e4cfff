"""TRL's GRPOConfig inputs (num_generations, max_completion_length, beta, steps_per_generation, num_iterations, vLLM
generation) as memplan's GRPO workload, from a script's flags, a config file, a Python script or axolotl's `trl:`
section. Defaults are the workload's own (TRL 1.16's, planner/config/workload.py).
"""

from __future__ import annotations

from planner.frameworks.hf.keys import KEYS as K
from planner.intake.collect import TRL, Collector, as_float, default, one
from planner.intake.flags import Flag


def read_grpo(c: Collector, flags: dict[str, Flag]) -> None:
    """The GRPO inputs `flags` set (the others keep the workload's defaults)."""
    for field in ("num_generations", "max_completion_length", "steps_per_generation", "num_iterations"):
        key = K.key(f"workload.{field}")
        if key in flags:
            least = 2 if field == "num_generations" else 1
            c.number(f"workload.{field}", flags[key].value, flags[key].source, flags[key].raw, minimum=least)
    beta = flags.get(K.key("workload.beta"))
    if beta and as_float(beta.value) is not None:
        c.set("workload.beta", as_float(beta.value), beta.source, beta.raw)
    _reward_funcs(c, flags.get("reward_funcs"))
    vllm, m = flags.get(K.key("use_vllm")), K["workload.generation"]
    if vllm and c.flag(vllm.value, vllm.source):
        c.fact("use_vllm", True, vllm.source, vllm.raw)  # where it was turned on (a release's mode: intake.releases)
        mode = str(one(flags[m.key].value)) if m.key in flags else m.default
        src = (
            flags[m.key].source if m.key in flags else vllm.source + "; " + default(TRL, m.cite, f"{m.key} {m.default}")
        )
        c.set(
            "workload.generation",
            f"vllm-{mode}" if mode in ("colocate", "server") else "vllm-colocate",
            src,
            m.key,
        )
        util = flags.get(K.key("workload.vllm_gpu_memory_utilization"))
        if mode == "colocate" and util and as_float(util.value):
            c.set("workload.vllm_gpu_memory_utilization", as_float(util.value), util.source, util.raw)
        tp = flags.get(K.key("workload.roles.rollout_tp"))
        if tp and (as_float(tp.value) or 1) > 1:  # the engine's weights split over its group (the sync wakes them)
            c.set("workload.roles.rollout_tp", int(as_float(tp.value)), tp.source, tp.raw)


def _reward_funcs(c: Collector, flag: Flag | None) -> None:
    """--reward_funcs: a name with a `/` is a reward model TRL loads beside the policy
    (AutoModelForSequenceClassification, trl/trainer/grpo_trainer.py), not planned yet; other names are the script's
    functions, with no memory of their own, which the workload's source says."""
    if flag is None:
        return
    names = [n for n in (flag.value if isinstance(flag.value, list) else str(flag.value).split()) if n]
    models = [n for n in map(str, names) if "/" in n]
    if models:
        c.note(f"{flag.source} (a reward model, {', '.join(models)}, scoring completions is not planned yet)")
    elif (s := c.setting("workload.kind")) is not None:
        c.set("workload.kind", s.value, f"{s.source}; {flag.source} (reward functions: no model of their own)", s.key)
