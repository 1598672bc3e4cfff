"""Human tables (rich's on a terminal, planner.cli.plain's to a pipe). Sizes in GiB (2^30 bytes), as the headers say."""

from __future__ import annotations

import re
from pathlib import Path

from planner.cli.plain import Out, Table
from planner.config.spec import GIB, Plan

console = Out()  # rich on a terminal; to a pipe, whole tables 170 columns wide, drawn without rich where it can


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
    head = "whole logits, ms-swift 3.2-3.6's VLM scoring" if "whole_logits_bytes" in m.detail else head
    head = "student and teacher logits, generalized JSD" if p.workload.kind == "gkd" else head  # planner.estimate.gkd
    head = f"{p.task} head" if p.task in ("seq-cls", "reranker", "embedding") else head  # planner.estimate.heads
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


def rejected_table(rejected: list[Plan]) -> Table:
    """One row per distinct reason (reasons that differ only in their figures are one): how many knob families
    it rejects, the one of them closest to fitting, and its reason."""
    groups: dict[str, list[Plan]] = {}
    for p in rejected:
        groups.setdefault(re.sub(r"\d[\d,.]*", "#", p.reason or ""), []).append(p)
    t = Table(title="rejected (smallest micro-batch of each knob family, one row per reason)", title_justify="left")
    for col in ("families", "closest: ckpt", "precision", "sharding", "offload", "recipe", "total GiB", "reason"):
        t.add_column(col, justify="right" if col in ("families", "total GiB") else "left")
    for plans in groups.values():
        p = min(plans, key=lambda q: q.memory.device_total_bytes)
        t.add_row(
            str(len(plans)),
            p.checkpointing,
            p.precision,
            p.sharding,
            p.offload,
            p.recipe,
            gib(p.memory.device_total_bytes),
            p.reason or "",
        )
    return t


def nearest_table(nearest: list) -> Table:
    """The nearest settings that fit (planner.search.nearest): the change, and the best plan it gives."""
    t = Table(
        title="nearest settings that fit (one change each; 'any knobs': other knobs changed too)", title_justify="left"
    )
    for col in (
        "change",
        "micro",
        "accum",
        "ckpt",
        "precision",
        "sharding",
        "offload",
        "recipe",
        "total GiB",
        "tokens/s",
    ):
        t.add_column(col, justify="right" if col in ("micro", "accum", "total GiB", "tokens/s") else "left")
    for n in nearest:
        p = n.plan
        t.add_row(
            n.change,
            str(p.micro_batch),
            str(p.grad_accum),
            p.checkpointing,
            p.precision,
            p.sharding,
            p.offload,
            p.recipe,
            gib(p.memory.device_total_bytes),
            f"{p.tokens_per_s:,.0f}",
        )
    return t


# an absolute path in a setting's source, shown by its last name (--json keeps it whole)
ABSOLUTE_PATH = re.compile(r"(?<![\w.])/(?:[^\s/()]+/)+([^\s/()]+)")


def config_table(config: dict) -> Table:
    """check --config: what was read, field by field, with its value, the framework's key and where it came from."""
    files = ", ".join(Path(f).name for f in config["files"])
    t = Table(title=f"read from {files} ({config['framework']})", title_justify="left")
    for col in ("field", "value", "key", "from"):
        t.add_column(col, overflow="fold")
    for s in config["settings"]:
        value = s["value"] if not isinstance(s["value"], dict) else ", ".join(f"{k} {v}" for k, v in s["value"].items())
        t.add_row(s["field"], str(value), s["key"], ABSOLUTE_PATH.sub(r"\1", s["source"]))
    return t


def config_lines(config: dict) -> list[str]:
    return [f"not planned: {line}" for line in config["unplanned"]]


def nearest_lines(nearest: list) -> list[str]:
    """What to print after the table: each change in its framework's keys, or a line saying no single change fits."""
    tried = "every knob allowed, adamw-fused, LoRA, more host RAM, twice the GPUs or nodes, half the sequence"
    if not nearest:
        return [f"no single change fits (tried: {tried})"]
    return [f"{n.change}, in {n.plan.framework}'s keys: {'; '.join(n.keys)}" for n in nearest if n.keys]


def gpus_table(data: dict) -> Table:
    t = Table(title="GPU catalog (memory in GiB = 2^30 bytes; sources: `planner gpus --json`)", title_justify="left")
    for col in ("name", "memory GiB", "bf16 TFLOP/s", "cc", "FA2", "HBM GB/s", "link", "link GB/s/dir", "aliases"):
        t.add_column(col)
    for g in data["gpus"]:
        t.add_row(
            g["name"],
            f"{g['capacity_bytes'] / 2**30:.1f}",
            f"{g['bf16_tflops']:g}" if g["bf16_tflops"] else "no bf16",
            g["compute_capability"],
            "yes" if g["flash_attention_2"] else "no",
            f"{g['memory_bandwidth_gbs']:g}",
            g["link"],
            f"{g['link_gbs']:g}",
            ", ".join(g["aliases"]),
        )
    return t


def frameworks_table(data: dict) -> Table:
    from planner.frameworks import TABLE_KNOBS

    t = Table(
        title=(
            "what --framework X runs (every value where blank; releases: --framework X@RELEASE; defaults, sources and "
            "what each release changed: `planner frameworks --json`)"
        ),
        title_justify="left",
    )
    for col in ("framework", "version", "releases", *(k.replace("_", " ") for k in TABLE_KNOBS)):
        t.add_column(col)
    for f in data["frameworks"]:
        runs = [
            ", ".join(
                {True: "on", False: "off"}.get(v, str(v)) if isinstance(v, bool) else str(v) for v in f["runs"][k]
            )
            if k in f["runs"]
            else ("" if k in f.get("every", ()) else "default only")
            for k in TABLE_KNOBS
        ]
        t.add_row(f["name"], f["version"], ", ".join(r["name"] for r in f.get("releases", [])), *runs)
    return t


def models_table(data: dict) -> Table:
    t = Table(title="bundled models (HF config.json values; parameter counts exact)", title_justify="left")
    for col in ("name", "model_type", "params", "layers", "hidden", "vocab", "vision params"):
        t.add_column(col, justify="left" if col in ("name", "model_type") else "right")
    for m in data["models"]:
        t.add_row(
            m["name"],
            m["model_type"],
            f"{m['params']:,}",
            str(m["layers"]),
            str(m["hidden_size"]),
            f"{m['vocab_size']:,}",
            f"{m['vision_params']:,}" if m["vision_params"] else "-",
        )
    return t


def record_line(r) -> str:
    k, s = r.knobs, r.shapes
    peak = f"peak {gib(r.peak_allocated_bytes)} GiB" if r.peak_allocated_bytes else "no peak"
    work = f" {k.workload.kind.upper()}" if k.workload.rl else ""
    return (
        f"#{r.id or '-'} {r.backend} {r.status}:{work} {r.model} micro {s.micro_batch} accum {s.grad_accum} "
        f"seq {s.seq_len} {k.precision} ckpt {k.checkpointing} zero {k.zero_stage} on {r.device}: {peak}"
        + (f" ({r.phase})" if r.phase else "")
    )


def record_detail(r) -> Table:
    """A record's bytes by category at its peak, and its shapes, knobs and versions."""
    t = Table(title=f"probe #{r.id}: {r.model} ({r.backend}, {r.status}, {r.device})", title_justify="left")
    t.add_column("what")
    t.add_column("value", justify="right")
    for cat, v in r.by_category.items():
        t.add_row(f"{cat} GiB", gib(v))
    for name, v in (
        ("peak allocated GiB", r.peak_allocated_bytes),
        ("peak reserved GiB", r.peak_reserved_bytes),
        ("device used GiB", r.device_used_bytes),
    ):
        if v:
            t.add_row(name, gib(v))
    k, s = r.knobs, r.shapes
    t.add_row(
        "shapes",
        f"micro {s.micro_batch} accum {s.grad_accum} seq {s.seq_len} images {s.image_tokens} world {s.world_size}",
    )
    t.add_row(
        "knobs",
        f"{k.precision} ckpt {k.checkpointing} zero {k.zero_stage} offload {k.offload} "
        f"{k.optimizer} lora {k.lora_rank}",
    )
    t.add_row("versions", ", ".join(f"{n} {v}" for n, v in r.versions.items() if v) or "-")
    t.add_row("tensor key", r.tensor_key)
    return t


def records_table(data: dict) -> Table:
    t = Table(title=f"probe records in {data['store']}", title_justify="left")
    for col in (
        "id",
        "when",
        "backend",
        "status",
        "model",
        "micro",
        "accum",
        "seq",
        "precision",
        "ckpt",
        "ZeRO",
        "device",
        "peak GiB",
    ):
        t.add_column(col)
    import time

    for r in data["records"]:
        k, s = r["knobs"], r["shapes"]
        t.add_row(
            str(r["id"]),
            time.strftime("%Y-%m-%d %H:%M", time.localtime(r["created"])),
            r["backend"],
            r["status"],
            r["model"],
            str(s["micro_batch"]),
            str(s["grad_accum"]),
            str(s["seq_len"]),
            k["precision"],
            k["checkpointing"],
            str(k["zero_stage"]),
            r["device"],
            gib(r["peak_allocated_bytes"]) if r["peak_allocated_bytes"] else "-",
        )
    return t


def scan_headline(data: dict) -> str:
    return (
        f"{data['data']}: {data['rows']:,} rows ({data['kind']}), {data['images']:,} images; the longest is "
        f"row {data['longest_row']:,} ({data['tokens']['max']:,} tokens)"
    )


def scan_table(data: dict) -> Table:
    t = Table()
    t.add_column("tokens per row")
    for col in ("mean", "p50", "p90", "p99", "max"):
        t.add_column(col, justify="right")
    for label, key in (("text", "text_tokens"), ("image", "image_tokens"), ("total", "tokens")):
        d = data[key]
        t.add_row(label, *(f"{d[c]:,}" for c in ("mean", "p50", "p90", "p99", "max")))
    return t
