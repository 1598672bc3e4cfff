"""Human tables (rich's on a terminal, planner.cli.plain's to a pipe). Sizes in GiB (2^30 bytes), as the headers say.

This module owns the console, the GiB unit, and the plans themselves: the ranked plans, one plan's breakdown, and
the lines under that breakdown (its overheads and margin, the allocator's reserve, the lengths that fit). The other
tables: render_search.py (what the search set aside), render_inputs.py (what was read from a config or a dataset),
render_listings.py (the listing subcommands' tables and a probe record's)."""

from __future__ import annotations

from planner.cli.plain import Out, Table
from planner.config.spec import GIB, Plan
from planner.estimate.heads import value_head_rm
from planner.frameworks import adapter

console = Out()  # rich on a terminal; to a pipe, whole tables 170 columns wide, drawn without rich where it can

# the label of each framework's own SFT head (Framework.sft_head) where it is not the plan's --loss: TRL's fused
# log-prob head over every next token, LLaMA-Factory v1's loss beside transformers' (planner.estimate.v1_head)
SFT_HEADS = {"fused-logprob": "TRL's SFT log-prob head", "lf-v1": "LLaMA-Factory v1's loss beside transformers'"}


def gib(x: int) -> str:
    return f"{x / GIB:.2f}"


def plans_table(plans: list[Plan], title: str, approximate: bool = False) -> Table:
    """approximate: the model's family is counted with the generic formula (evidence marked "approx.")."""
    t = Table(title=title, title_justify="left")
    for col in (
        "#",
        "micro",
        "accum",
        "ckpt",
        "precision",
        "sharding",
        "offload",
        "recipe",
        "peak GiB",
        "total GiB",
        "headroom GiB",
        "tokens/s",
        "evidence",
    ):
        left = ("ckpt", "precision", "sharding", "offload", "recipe", "evidence")
        t.add_column(col, justify="left" if col in left else "right")
    for i, p in enumerate(plans, 1):
        m = p.memory
        t.add_row(
            str(i),
            str(p.micro_batch),
            str(p.grad_accum),
            p.checkpointing,
            p.precision,
            p.sharding,
            p.offload,
            p.recipe,
            gib(m.peak_allocated_bytes),
            gib(m.device_total_bytes),
            gib(m.headroom_bytes),
            f"{p.tokens_per_s:,.0f}",
            p.evidence + (" (approx.)" if approximate else ""),
        )
    return t


def breakdown_table(p: Plan) -> Table:
    m = p.memory
    title = f"memory per GPU (GiB), peak during {m.peak_phase}"
    t = Table(title=title, title_justify="left", min_width=len(title))
    t.add_column("term")
    t.add_column("GiB", justify="right")
    for name in (
        "params",
        "grads",
        "optimizer",
        "activations",
        "temp",
        "peak_allocated",
        "overhead",
        "device_total",
        "capacity",
        "headroom",
    ):
        t.add_row(name, gib(getattr(m, f"{name}_bytes")))
    host = {k: v for k, v in (m.host_phases or {"training": m.host_bytes_per_node}).items() if v}
    for name, value in host.items():  # host RAM per node, each phase that holds some
        peak = " (peak)" if len(host) > 1 and value == m.host_bytes_per_node else ""
        t.add_row(f"host RAM per node, {'offload' if name == 'training' else name}{peak}", gib(value))
    if m.paged_bytes:
        t.add_row("paged optimizer states (unified memory, not in the peak)", gib(m.paged_bytes))
    head = {"fused": "TRL log-prob head", "full": "full logits"}[p.workload.logprobs] if p.workload.rl else p.loss
    if not p.workload.rl and p.loss == "standard":  # a framework's own SFT head (planner.estimate.temp_terms)
        head = SFT_HEADS.get(adapter(p.framework, p.release).sft_head, head)
    head = "whole logits, ms-swift 3.2-3.6's VLM scoring" if "whole_logits_bytes" in m.detail else head
    head = "ms-swift's log-probs over the kept logits" if "swift_logps_bytes" in m.detail else head
    if "swift_logps_bytes" in m.detail and p.sequence_parallel > 1:
        head = "ms-swift's log-probs over the rank's slice's logits"
    head = "student and teacher logits, generalized JSD" if p.workload.kind == "gkd" else head  # planner.estimate.gkd
    head = f"{p.task} head" if p.task in ("seq-cls", "reranker", "embedding") else head  # planner.estimate.heads
    if value_head_rm(p):
        head = "trl's value head beside the whole logits"  # planner.estimate.heads.value_head_bytes
    if p.loss != "standard" or m.detail.get("logits_loss_bytes"):
        t.add_row(f"of which logits/loss ({head})", gib(m.detail.get("logits_loss_bytes", 0)))
    for name, value in (m.phases or {}).items():
        peak = name == m.peak_phase or name.endswith(": " + m.peak_phase)  # an RL plan's "training: backward"
        t.add_row(f"phase {name}" + (" (peak)" if peak else ""), gib(value))
    if m.peak_term:
        t.add_row(f"largest term of the peak: {m.peak_term}", gib(m.detail.get(m.peak_term + "_bytes", 0)))
    return t


def overheads_line(p: Plan, margin: float) -> str:
    """The overhead term by term, each measured or a prior (planner.estimate.overheads; sources in --json's
    memory.overheads), and what the margin did to the verdict."""
    m = p.memory
    names = {"nccl": "NCCL", "probe": "measured overhead"}
    parts = [
        f"{names.get(t.name, t.name)}"
        + (f" {t.per_allocated * 100:.3g}%" if t.per_allocated else "")
        + f" {t.bytes / GIB:.2f} ({t.basis})"
        for t in m.overheads
        if t.bytes
    ]
    head = f"overheads {m.overhead_bytes / GIB:.2f} GiB" + (": " + ", ".join(parts) if parts else "")
    return f"{head}; {margin_text(m.device_total_bytes, m.capacity_bytes, margin)}"


def reserve_line() -> str:
    """check's word where the verdict turns on the allocator's reserve (overheads.rests_on_the_prior)."""
    return (
        "the caching allocator's reserve decides: the steps the GPU windows ran reserved 0% to 45% over their peak "
        "(benchmarks/results/fragmentation.json), and at 45% this does not fit; --verify replays this step's "
        "allocations through the allocator (docs/probes.md)"
    )


def margin_text(total: int, capacity: int, margin: float) -> str:
    """The margin in GiB and whether it decided the verdict (the search's usable: capacity x (1 - margin))."""
    usable = int(capacity * (1 - margin))
    text = f"margin {margin * 100:g}% {(capacity - usable) / GIB:.2f} GiB"
    if total <= usable:
        return f"{text}: fits with {(usable - total) / GIB:.2f} GiB to spare"
    if total <= capacity:
        return (
            f"{text} decides: fits the card by {(capacity - total) / GIB:.2f} GiB, not the margin "
            f"(over it by {(total - usable) / GIB:.2f})"
        )
    return f"{text}: over the card itself by {(total - capacity) / GIB:.2f} GiB"


def limits_line(limits: dict) -> str:
    """check's answer to "OOM after N steps": the longest rows at which the configuration still fits."""
    parts = []
    for what, top, got in (
        ("completion", "max_completion_length", "completion_fits_up_to"),
        ("prompt", "max_prompt_length", "prompt_fits_up_to"),
        ("row", "max_length", "length_fits_up_to"),
        ("image tokens", "image_tokens", "image_tokens_fit_up_to"),
    ):
        if got not in limits:
            continue
        if limits[got] >= limits[top]:
            parts.append(f"{what} fits up to its maximum {limits[top]:,}")
        elif limits[got] == 0:
            held = " (with its image tokens)" if what == "prompt" and "image_tokens" in limits else ""
            parts.append(f"{what} does not fit at any length{held}")
        else:
            parts.append(f"{what} stops fitting past {limits[got]:,} tokens (of {limits[top]:,})")
    return "lengths (each with the others at their maximum): " + "; ".join(parts)
