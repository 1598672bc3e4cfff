"""`--framework NAME@RELEASE`: a request in the terms of the framework release the user runs, turned into memplan's.

A request's `framework` may name a release (`trl@0.14`, `trl@0.14.2`, `trl@r1-v`; planner.frameworks lists them). The
request is then in that release's terms, and becomes memplan's here, once, before its fields are validated:
- `framework` "trl", `release` the line's name ("" for the newest), which the plan carries (its defaults, keys,
  export and what the adapter runs follow it: planner.frameworks.adapter);
- the GRPO workload inputs the request leaves out take the release's defaults (trl 0.14-0.18: beta 0.04, a reference
  model; max_completion_length 256), so a run planned at today's defaults is not called "fits" for a release that
  kept a reference model;
- where the release's GRPO per_device_train_batch_size counts prompts (Release.meaning grpo_batch_counts), the
  request's micro-batch and global batch are in prompts: each is planned as that many x num_generations completions,
  memplan's unit (planner.config.workload).
A request that gives `release` itself (a plan's JSON, the API's `release`) is already in memplan's terms: only the
workload defaults it leaves out are filled. The rest of memplan never sees the release's units.
"""

from __future__ import annotations

from functools import lru_cache

from pydantic import BaseModel

from planner.errors import BadInput
from planner.frameworks import FRAMEWORKS, split_name

GRPO_DEFAULT_GENERATIONS = 8  # planner.config.workload.Workload.num_generations' default


def _workload(w: object) -> dict:
    if isinstance(w, BaseModel):
        return w.model_dump(exclude_unset=True)
    return dict(w) if isinstance(w, dict) else {}


def in_memplan_terms(data: dict) -> dict:
    """`data` (a request's fields) with its framework release split out and its figures in memplan's terms."""
    given = data.get("framework")
    if not isinstance(given, str):
        return data
    data = _framework_head(data, split_name(given)[0])
    name, release = split_name(given)
    user_terms = "@" in given
    if not user_terms:
        release = str(data.get("release") or "")
        if not release:
            return data
    elif data.get("release") not in (None, "", release):
        raise BadInput(f"--framework {given!r} and --release {data['release']!r}: give the release once", "framework")
    if name not in FRAMEWORKS:
        return {**data, "framework": name}  # the framework field's own error names the frameworks
    r = FRAMEWORKS[name].release(release)
    out = {**data, "framework": name, "release": FRAMEWORKS[name].line(release)}
    w = _workload(data.get("workload"))
    if r is not None and w.get("kind") in ("dpo", "kto") and "logprobs" in r.workload and "logprobs" not in w:
        out["workload"] = {**w, "logprobs": r.workload["logprobs"].value}  # DPO's head at that release
    if r is None or w.get("kind", "sft") != "grpo":
        return out
    # (generation: where vLLM runs when a script turns it on naming no mode, planner.intake.releases; a request names
    # its generation itself, hf where it names none)
    w = {**{k: d.value for k, d in r.workload.items() if k != "generation"}, **w}
    out["workload"] = w
    if user_terms and r.means("grpo_batch_counts") == "prompts":
        n = int(w.get("num_generations") or GRPO_DEFAULT_GENERATIONS)
        for key in ("micro_batch", "global_batch"):
            if isinstance(data.get(key), int) and not isinstance(data.get(key), bool):
                out[key] = data[key] * n
    return out


@lru_cache(maxsize=64)
def counts_prompts(framework: str, release: str) -> str:
    """The release's name where its GRPO batch counts prompts, else "" (cached: the search asks per candidate)."""
    r = FRAMEWORKS[framework].release(release) if FRAMEWORKS[framework].releases else None
    return r.name if r is not None and r.means("grpo_batch_counts") == "prompts" else ""


def written_micro_batch(plan) -> int:
    """The per_device_train_batch_size a plan's files write (a planner.config.spec.Plan): its micro-batch of
    completions over num_generations where its release counts GRPO's batch in prompts (trl 0.14: the inverse of
    in_memplan_terms above), else its micro-batch."""
    if plan.workload.kind == "grpo" and plan.release and counts_prompts(plan.framework, plan.release):
        return plan.micro_batch // plan.workload.num_generations
    return plan.micro_batch


def prompts_error(framework: str, release: str, micro_batch: int, num_generations: int) -> str | None:
    """A micro-batch of completions that is not whole prompts, for a release whose batch counts prompts."""
    name = counts_prompts(framework, release)
    if not name or micro_batch % num_generations == 0:
        return None
    r = FRAMEWORKS[framework].release(release)
    return (
        f"{framework}@{r.name} counts GRPO's per_device_train_batch_size in prompts of {num_generations} completions: "
        f"a micro-batch of {micro_batch} completions is not whole prompts"
    )


def release_line(framework: str, release: str, workload, micro_batch: int) -> str | None:
    """The line a plan under a release whose GRPO batch counts prompts prints after its workload's: the micro-batch in
    the release's terms and in memplan's."""
    if workload.kind != "grpo" or not release or not counts_prompts(framework, release):
        return None
    n = workload.num_generations
    return (
        f"{framework}@{release}: per_device_train_batch_size counts prompts: {micro_batch // n} prompt"
        f"{'s' if micro_batch // n != 1 else ''} x {n} generations = {micro_batch} completions a micro-batch"
    )


def choice_text(framework: str, releases: dict | None) -> str:
    """What a check --config verdict says where the release the files leave open decides it
    (planner.checkconfig_lines: `releases` the result config's): " with trl@r1-v (...)", naming the releases it fits with where
    the verdicts differ; the hungriest line where they agree and it is not the line read (its figure is the
    headline's); "" where the line read is the hungriest and the verdicts agree. A line that refused the files is
    named as skipped, with its refusal."""
    if not releases:
        return ""
    text = _chosen(framework, releases)
    skipped = "; ".join(f"{framework}@{r} skipped: {why}" for r, why in releases.get("failed", {}).items())
    if not skipped:
        return text
    return f"{text[:-1]}; {skipped})" if text else f" ({skipped})"


def _chosen(framework: str, releases: dict) -> str:
    planned, allowed = releases["planned"], ", ".join(releases["allowed"])
    if releases["fits"] and releases["does_not_fit"]:
        fits = ", ".join(f"{framework}@{r}" for r in releases["fits"])
        return (
            f" with {framework}@{planned} (the files allow {allowed} and pin none; "
            f"it fits with {fits}: --framework {framework}@RELEASE plans the one you run)"
        )
    if planned == releases.get("read", planned):
        return ""
    verdict = "fits with every one" if releases["fits"] else "none fits"
    return (
        f" with {framework}@{planned}, the hungriest of the lines the files allow ({allowed}, pin none; {verdict}: "
        f"--framework {framework}@RELEASE plans the one you run)"
    )


def _framework_head(data: dict, name: str) -> dict:
    """A DPO or GRPO request that names no log-prob head takes the one its framework's trainers run
    (Framework.logprobs: LLaMA-Factory's DPO scores the whole logits)."""
    w = _workload(data.get("workload"))
    fw = FRAMEWORKS.get(name)
    head = (
        (fw.kto_logprobs or fw.logprobs) if fw is not None and w.get("kind") == "kto" else getattr(fw, "logprobs", "")
    )
    if fw is None or head == "fused" or w.get("kind") not in ("dpo", "kto", "grpo") or "logprobs" in w:
        return data
    return {**data, "workload": {**w, "logprobs": head}}
