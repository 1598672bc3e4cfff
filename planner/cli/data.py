"""How check and suggest print what `--data` and a token budget add to their answers (planner.search.datafit and
planner.search.batching do the work)."""

from __future__ import annotations

from planner.config.spec import TokenBatches


def data_lines(d: dict) -> list[str]:
    lines = [
        f"data: {d['rows']:,} rows of {d['data']}, the longest {d['longest_tokens']:,} tokens (row "
        f"{d['longest_row']:,}); planned for {d['planned_seq_len']:,}"
        + (f" (--max-length cuts {d['truncated_rows']:,} rows)" if d["truncated_rows"] else "")
    ]
    if e := d.get("epoch"):
        last, h = e["last_step_micro_steps"], e["hours"]
        short = (
            f", the last step only {last} of {e['micro_steps_per_step']}" if last < e["micro_steps_per_step"] else ""
        )
        lines.append(
            f"an epoch: {e['steps']:,} optimizer steps as HF's Trainer cuts the rows ({e['micro_batches_per_rank']:,} "
            f"micro-batches a rank{short}), {f'{h:,.2f} h' if h >= 1 else f'{h * 60:.1f} min'} at the predicted step"
        )
    if d.get("fits_up_to_tokens") == 0:
        lines.append(
            "this configuration does not fit at any length (its fixed terms alone are over the limit): "
            "the first step would run out of memory"
        )
    elif "fits_up_to_tokens" in d:
        first = d["first_too_long"]
        where = (
            f"step {first['step']:,}, rank {first['rank']}: sample {first['sample']:,} (row {first['row']:,}), "
            f"{first['tokens']:,} tokens"
            if first
            else "no row is longer"
        )
        lines.append(
            f"this configuration fits rows up to {d['fits_up_to_tokens']:,} tokens; the bundled trainer "
            f"(seed {first['seed'] if first else 0}) would first draw a longer one at {where}"
        )
    return lines


def budget_line(b: TokenBatches) -> str:
    return (
        f"token budget {b.max_tokens_per_micro_batch:,} per micro-batch ({b.source}): {b.micro_steps_mean:g} "
        f"micro-steps a step on average, {b.micro_steps_max} at most; planned for the costliest of "
        + ", ".join(f"{k} x {w:,}" for k, w in b.shapes)
        + f"; real tokens fill {b.fill_ratio:.0%} of the budget"
    )
