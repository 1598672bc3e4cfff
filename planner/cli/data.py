"""What `--data` adds to check's and suggest's answers: the scan's figures and, for a configuration that does
not fit, where the run would run out of memory (scan.plan does the work)."""
from __future__ import annotations

import argparse

from planner.spec import Plan


def data_verdict(args: argparse.Namespace, plan: Plan, model, hw, goal) -> dict | None:
    """With --data: the scan, and for a configuration that does not fit, the longest row it fits and the
    first step, rank and sample at which the trainer's sampler (seed 0) would draw a longer one."""
    fit = args.data_fit
    if fit is None:
        return None
    out = fit.json()
    if not plan.fits:
        from scan.plan import first_too_long, largest_fitting_seq_len

        limit = largest_fitting_seq_len(model, hw, goal, plan.knobs, plan.micro_batch)
        out["fits_up_to_tokens"] = limit
        out["first_too_long"] = first_too_long([min(n, goal.seq_len) for n in fit.lengths], limit,
                                               plan.global_batch, plan.world_size) if limit else None
    return out


def data_lines(d: dict) -> list[str]:
    lines = [f"data: {d['rows']:,} rows of {d['data']}, the longest {d['longest_tokens']:,} tokens (row "
             f"{d['longest_row']:,}); planned for {d['planned_seq_len']:,}"
             + (f" (--max-length cuts {d['truncated_rows']:,} rows)" if d["truncated_rows"] else "")]
    if d.get("fits_up_to_tokens") == 0:
        lines.append("this configuration does not fit at any length (its fixed terms alone are over the limit): "
                     "the first step would run out of memory")
    elif "fits_up_to_tokens" in d:
        first = d["first_too_long"]
        where = (f"step {first['step']:,}, rank {first['rank']}: sample {first['sample']:,} (row {first['row']:,}), "
                 f"{first['tokens']:,} tokens" if first else "no row is longer")
        lines.append(f"this configuration fits rows up to {d['fits_up_to_tokens']:,} tokens; the bundled trainer "
                     f"(seed 0) would first draw a longer one at {where}")
    return lines
