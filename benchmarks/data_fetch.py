"""What a micro-step's batch fetch costs on the training process, as HF's Trainer fetches it (one next() of its train
dataloader per micro-step, transformers 5.25.0 trainer.py:2326-2341): rows of pre-tokenized ids (as a datasets
Arrow table hands them out), batched by the micro-batch with default_data_collator, dataloader_num_workers 0 (HF's
default), sharded by accelerate (prepare_data_loader) over 8 ranks. Per micro-batch size: the median seconds of a
fetch, per fetch and per row. At one global batch a split's fetches carry the same rows, so only a fetch's fixed part
grows with the accumulation (planner.estimate.epoch).

    python benchmarks/data_fetch.py --out benchmarks/results/data_fetch.json
    python benchmarks/data_fetch.py --report benchmarks/results/data_fetch.json
"""

from __future__ import annotations

import argparse
import statistics
import time

from results_io import cpu_meta, meta_line, publish, report_or_out

MICRO = [1, 2, 4, 8, 16, 32]
SEQ = 4096
ROWS = 512
RANKS = 8


def fetch_seconds(micro: int, rounds: int = 3) -> float:
    """Median seconds of one next() of rank 0's prepared dataloader."""
    from accelerate.data_loader import prepare_data_loader
    from torch.utils.data import DataLoader
    from transformers import default_data_collator

    rows = [{"input_ids": list(range(SEQ)), "attention_mask": [1] * SEQ, "labels": list(range(SEQ))}] * ROWS
    times = []
    for _ in range(rounds):
        dl = DataLoader(rows, batch_size=micro, shuffle=True, collate_fn=default_data_collator, num_workers=0)
        it = iter(prepare_data_loader(dl, num_processes=RANKS, process_index=0, put_on_device=False))
        while True:
            t0 = time.perf_counter()
            try:
                next(it)
            except StopIteration:
                break
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def markdown(data: dict) -> list[str]:
    md = ["| micro-batch | ms a fetch | ms a row |", "|---|---|---|"]
    md += [f"| {r['micro']} | {r['fetch_s'] * 1e3:.2f} | {r['fetch_s'] / r['micro'] * 1e3:.2f} |" for r in data["rows"]]
    md.append(f"\n{meta_line(data['meta'])}; rows of {SEQ} tokens, default_data_collator, num_workers 0, {RANKS} ranks")
    return md


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--report")
    args = ap.parse_args()
    if report_or_out(ap, args, markdown):
        return
    rows = [{"micro": m, "fetch_s": fetch_seconds(m)} for m in MICRO]
    publish(args.out, rows, cpu_meta(("torch", "transformers", "accelerate")), markdown)


if __name__ == "__main__":
    main()
