"""The one-change variants of an RL run that does not fit (planner.search.nearest asks the planner of each): the
rollout engine's share lowered, a token budget halved, verl's fused log-prob head, a role's states offloaded between
its phases, the engine put to sleep or run eager, the entropy recomputed. Least disruptive first: a share or a budget changes no result, an
offload costs transfers."""

from __future__ import annotations

from planner.config.requests import Target
from planner.config.spec import Goal
from planner.frameworks import FRAMEWORKS

SHARES = (0.85, 0.7, 0.55, 0.4, 0.25)
BUDGET_PARTS = (
    2,
    4,
    8,
    16,
)  # a token budget is tried at these fractions (at least one whole row)  # the rollout share is tried at these fractions of its value, largest first


def variants(req: Target, goal: Goal) -> list[tuple[str, dict]]:
    w = req.workload
    framework = req.framework if isinstance(req.framework, str) else "verl"
    r = w.roles.resolved(framework)
    micro = getattr(req, "micro_batch", 1)  # a check's; a suggest searches it (one row a GPU then)
    tokens = w.seq_len() * (micro if isinstance(micro, int) else 1)
    out = []
    engine = r.rollout_engine != "hf"  # hf: the actor generates in its own processes (no engine, no role offloads)
    for f in SHARES if engine else ():
        share = round(r.rollout_memory * f / 0.05) * 0.05
        if 0.05 <= share < r.rollout_memory:
            out.append((f"rollout memory {share:.2f}", {"rollout_memory": round(share, 2)}))
    for field, label in (
        ("logprob_max_tokens_per_gpu", "log-prob token budget"),
        ("max_tokens_per_gpu", "actor token budget"),
        ("critic_max_tokens_per_gpu", "critic token budget"),
    ):
        now = getattr(r, field) or tokens
        if field == "critic_max_tokens_per_gpu" and w.kind != "ppo":
            continue
        for part in BUDGET_PARTS:  # the largest that fits is kept (planner.advise.nearest_fits)
            cut = max(w.seq_len(), now // part)
            if cut < now:
                out.append((f"{label} {cut:,}", {field: cut}))
    if FRAMEWORKS[framework].role_engine.fused_chunk_tokens and not r.fused_kernels:  # verl's chunked log-prob head
        out.append(("fused log-prob head", {"fused_kernels": True}))
    if not engine:
        return wrapped(w, out)
    sleep = FRAMEWORKS[framework].role_engine.sleep_on
    if r.sleep_level == 0 and r.placement == "colocate":
        out.append((f"rollout sleep level {sleep}", {"sleep_level": sleep}))
    if not r.rollout_eager:
        out.append(("rollout without CUDA graphs", {"rollout_eager": True}))
    if r.entropy == "on":
        out.append(("entropy checkpointed", {"entropy": "checkpointed"}))
    for role, parts in (
        ("actor", ("actor-params", "actor-optimizer")),
        ("critic", ("critic-params", "critic-optimizer")),
    ):
        if (role == "actor" or w.kind == "ppo") and not set(parts) <= set(r.offload):
            out.append((f"{role} states offloaded between phases", {"offload": tuple(sorted({*r.offload, *parts}))}))
    return wrapped(w, out)


def wrapped(w, out: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """Each roles change as the request's workload."""
    return [
        (label, {"workload": w.model_copy(update={"roles": w.roles.model_copy(update=change)}).model_dump()})
        for label, change in out
    ]
