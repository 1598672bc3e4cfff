"""The listing subcommands' tables (gpus, frameworks, models, probes: printout.print_listing looks them up by name
here) and one probe record's line and detail."""

from __future__ import annotations

from planner.cli.plain import Table
from planner.cli.render import gib


def gpus_table(data: dict) -> Table:
    t = Table(title="GPU catalog (memory in GiB = 2^30 bytes; sources: `planner gpus --json`)", title_justify="left")
    for col in ("name", "memory GiB", "bf16 TFLOP/s", "cc", "FA2", "HBM GB/s", "link", "link GB/s/dir", "aliases"):
        # a release name is never cut to "…" (openrlhf's mm-eureka-internvl: 19 characters with its comma)
        t.add_column(col, overflow="fold", min_width=19 if col == "releases" else None)
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
        # a release name is never cut to "…" (openrlhf's mm-eureka-internvl: 19 characters with its comma)
        t.add_column(col, overflow="fold", min_width=19 if col == "releases" else None)
    for f in data["frameworks"]:
        refused = f.get("refused", {})
        runs = [
            ", ".join(
                ({True: "on", False: "off"}.get(v, str(v)) if isinstance(v, bool) else str(v))
                + (" (refused)" if v in refused.get(k, ()) else "")
                for v in f["runs"][k]
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
        # a release name is never cut to "…" (openrlhf's mm-eureka-internvl: 19 characters with its comma)
        t.add_column(col, overflow="fold", min_width=19 if col == "releases" else None)
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
