"""Where a DPO or GRPO configuration stops fitting as its rows grow: TRL's completions start short and lengthen
as training goes on (and prompts and images vary), so a configuration can run for steps and then run out of
memory. `limits` finds, by bisection on the plan's own memory model, the longest completion (GRPO; DPO: row)
that still fits with everything else at its maximum, and the same for the prompt and its image tokens.
"""

from __future__ import annotations

from planner.config.spec import Goal, Hardware, Plan
from planner.model.modelspec import ModelSpec
from planner.search.estimates import make_plan


def _fits(plan: Plan, model: ModelSpec, hw: Hardware, goal: Goal, **workload) -> bool:
    w = plan.workload.model_copy(update=workload)
    g = goal.shorter(w.seq_len())
    knobs = plan.knobs.model_copy(update={"workload": w})
    return make_plan(model, hw, g, knobs, plan.micro_batch).fits


def with_image_tokens(plan: Plan, model: ModelSpec, hw: Hardware, goal: Goal, n: int, **update) -> Plan:
    """The plan with a sample's image tokens at n (and `update`'s other goal fields): a GRPO prompt holds its image
    tokens (planner.config.workload: not cut), so it shrinks with them, the text part kept."""
    g = goal.model_copy(update={"image_tokens": n, **update})
    knobs, w = plan.knobs, plan.workload
    if w.generates and w.prompt_tokens() >= goal.image_tokens:
        w = w.model_copy(update={"max_prompt_length": max(1, w.prompt_tokens() - goal.image_tokens + n)})
        g, knobs = g.shorter(w.seq_len()), knobs.model_copy(update={"workload": w})
    return make_plan(model, hw, g, knobs, plan.micro_batch)


def longest_fitting(fits, top: int) -> int:
    """The largest n in 0..top with fits(n) (fits is monotone: longer never fits where shorter does not)."""
    lo, hi = 0, top
    if fits(top):
        return top
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def limits(plan: Plan, model: ModelSpec, hw: Hardware, goal: Goal) -> dict:
    """The longest completion, prompt and image tokens that fit, each with the others at the plan's maximum."""
    w = plan.workload
    out: dict = {"fits_at_max": plan.fits}
    if w.generates:
        out["max_completion_length"] = w.max_completion_length
        out["completion_fits_up_to"] = longest_fitting(
            lambda n: n > 0 and _fits(plan, model, hw, goal, max_completion_length=n), w.max_completion_length
        )
        out["max_prompt_length"] = w.prompt_tokens()
        # a row holds its image, but a prompt planned under a cap on the whole row (OpenRLHF's forks: vLLM's
        # max_model_len, planner.frameworks.openrlhf.reader_mmeureka) can be shorter than the image's worst case
        floor = max(1, min(goal.image_tokens, w.prompt_tokens()))
        out["prompt_fits_up_to"] = longest_fitting(
            lambda n: n >= floor and _fits(plan, model, hw, goal, max_prompt_length=n), w.prompt_tokens()
        )
    else:
        out["max_length"] = w.max_length
        out["length_fits_up_to"] = longest_fitting(
            lambda n: n > w.prompt_tokens() and _fits(plan, model, hw, goal, max_length=n), w.max_length
        )
    if goal.image_tokens:
        out["image_tokens"] = goal.image_tokens
        out["image_tokens_fit_up_to"] = longest_fitting(
            lambda n: with_image_tokens(plan, model, hw, goal, n, tower_tokens=0).fits, goal.image_tokens
        )
    return out
