"""OpenRLHF 0.11.2's PPO-family rollout and passes read from its flags (planner.frameworks.openrlhf.reader reads the
roles and their placement first): vLLM's share of memory, tensor parallel size, sleep and CUDA graphs, what DeepSpeed
offloads between the phases, the passes' rows (padded or packed) and token budgets, the entropy. Defaults cited from
cli/train_ppo_ray.py (0.11.2)."""

from __future__ import annotations

from planner.frameworks.openrlhf.keys import KEYS, T
from planner.frameworks.openrlhf.reader_flags import ORL, get, on
from planner.intake.collect import Collector, as_float, as_int, default
from planner.intake.flags import Flag


def read_rollout(c: Collector, f: dict[str, Flag]) -> None:
    """vLLM's share of memory, tensor parallel size, sleep and CUDA graphs; what DeepSpeed offloads between the
    phases; then the passes' rows (_passes)."""
    r = "workload.roles."
    util, us = get(f, KEYS.key("rollout_memory"))
    c.set(r + "rollout_memory", as_float(util) or 0.95, us, KEYS.flag("rollout_memory"))
    tp, ts = get(f, KEYS.key("rollout_tp"))
    c.number(r + "rollout_tp", tp, ts, KEYS.flag("rollout_tp"))
    sleep = on(f, KEYS.key("vllm_sleep")) and on(f, KEYS.key("colocate_all"))
    c.set(
        r + "sleep_level",
        1 if sleep else 0,
        f[KEYS.key("vllm_sleep")].source
        + (" (level 1, vllm_engine.py:136-137)" if sleep else f" (off without --train.colocate_all, {T}:707-709)")
        if KEYS.key("vllm_sleep") in f
        else default(ORL, f"{T}:244-249", "no vLLM sleep"),
        KEYS.flag("vllm_sleep"),
    )
    c.set(
        r + "rollout_eager",
        on(f, KEYS.key("rollout_eager")),
        f[KEYS.key("rollout_eager")].source
        if KEYS.key("rollout_eager") in f
        else default(ORL, f"{T}:243", "CUDA graphs"),
        KEYS.flag("rollout_eager"),
    )
    offload = []
    if on(
        f, KEYS.key("ds_sleep")
    ):  # optimizer states, grads and fp32 master weights to the host (deepspeed_utils.py:151-188)
        offload += ["actor-optimizer", "critic-optimizer"]
    offload += [role for role in ("ref", "reward") if on(f, f"{role}.offload")]
    if offload:
        c.set(
            r + "offload",
            tuple(offload),
            "; ".join(
                f[k].source
                for k in (KEYS.key("ds_sleep"), KEYS.key("ref_offload"), KEYS.key("reward_offload"))
                if k in f
            ),
            KEYS.flag("ds_sleep"),
        )
    _passes(c, f)


def _passes(c: Collector, f: dict[str, Flag]) -> None:
    """The experience and training passes' rows: padded or packed, their token budgets a GPU (a dynamic batch's,
    else the rollout micro-batch's rows of --data.max_len), and the entropy where it is computed."""
    r = "workload.roles."
    packed = on(f, KEYS.key("packing")) or on(f, KEYS.key("dynamic_batch"))
    c.set(
        r + "remove_padding",
        packed,
        f[KEYS.key("packing")].source if KEYS.key("packing") in f else default(ORL, f"{T}:375", "padded rows"),
        KEYS.flag("packing"),
    )
    if on(f, KEYS.key("dynamic_batch")):
        budget, bs = get(f, KEYS.key("max_tokens_per_gpu"))
        c.number(r + "max_tokens_per_gpu", budget, bs, KEYS.flag("max_tokens_per_gpu"))
        roll = f.get(KEYS.key("logprob_max_tokens_per_gpu"))
        c.number(
            r + "logprob_max_tokens_per_gpu",
            roll.value if roll else budget,
            roll.source if roll else f"{bs} ({T}:691-697)",
            KEYS.flag("logprob_max_tokens_per_gpu"),
        )
    else:
        rm, rs = get(f, KEYS.key("rollout_micro_batch"))
        length, what = as_int(get(f, KEYS.key("seq_len"))[0]) or 2048, "--data.max_len"
        prompt, completion = c.get("workload.max_prompt_length"), c.get("workload.max_completion_length")
        if KEYS.key("seq_len") not in f and prompt and completion:  # the rows the reading's lengths make: at 0.8.x
            # no --max_len is the prompt's and the completion's limits (v0.8.9 cli/train_ppo_ray.py:44), at 0.10+
            # --max_len's default 2048 (v0.10.1 :371) is what _split divided between the two
            length, what = int(prompt) + int(completion), "the prompt and completion limits"
        c.number(
            r + "logprob_max_tokens_per_gpu",
            (as_int(rm) or 1) * length,
            f"{rs} x {what} (the experience passes' rows)",
            KEYS.flag("rollout_micro_batch"),
        )
    ent = f.get(KEYS.key("entropy"))
    if ent is not None:
        c.set(
            r + "entropy",
            "on",
            f"{ent.source} (the entropy over fp32 logits, ppo_actor.py:299)",
            KEYS.flag("entropy"),
        )
