"""How fast `planner scan` streams a large dataset: 1,000,000 JSONL rows of chat messages (two turns,
8-60 words each) with a word-level tokenizer trained here, on this machine's cores. Target (issue 19): under a
minute on 2 cores, in bounded memory (peak RSS reported; the lengths take 8 bytes a row).

    python benchmarks/scan_speed.py --out benchmarks/results/scan_speed.json [--rows N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from results_io import save

WORDS = [f"w{i}" for i in range(5000)]


def make_data(path: Path, rows: int) -> None:
    rng = random.Random(0)
    with open(path, "w") as f:
        for _ in range(rows):
            turns = [
                {"role": r, "content": " ".join(rng.choices(WORDS, k=rng.randint(8, 60)))}
                for r in ("user", "assistant")
            ]
            f.write(json.dumps({"messages": turns}) + "\n")


def make_tokenizer(folder: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator([" ".join(WORDS)], trainers.WordLevelTrainer(special_tokens=["[UNK]", "<s>", "</s>"]))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", bos_token="<s>", eos_token="</s>")
    fast.chat_template = "{% for m in messages %}<s> {{ m['role'] }} {{ m['content'] }} </s> {% endfor %}"
    fast.save_pretrained(folder)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--rows", type=int, default=1_000_000)
    args = ap.parse_args()
    from scan.scanner import scan, summary

    with tempfile.TemporaryDirectory(prefix="memplan-bench-") as tmp:
        data, tok = Path(tmp) / "chat.jsonl", Path(tmp) / "tok"
        t0 = time.perf_counter()
        make_data(data, args.rows)
        make_tokenizer(tok)
        made = time.perf_counter() - t0
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.perf_counter()
        result = summary(scan(str(data), str(tok)))
        seconds = time.perf_counter() - t0
        size = data.stat().st_size
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    out = {
        "benchmark": "scan_speed",
        "date": time.strftime("%Y-%m-%d"),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "versions": {p: metadata.version(p) for p in ("transformers", "tokenizers")},
        "rows": args.rows,
        "file_mib": round(size / 2**20, 1),
        "scan_seconds": round(seconds, 1),
        "rows_per_s": round(args.rows / seconds),
        "peak_rss_mib": round(peak / 1024, 1),
        "rss_before_scan_mib": round(rss0 / 1024, 1),
        "data_seconds": round(made, 1),
        "tokens": result["tokens"],
        "target_seconds": 60,
        "met": seconds < 60,
    }
    title = (
        f"# scan speed ({out['date']}, {out['cpus']} CPUs, transformers {out['versions']['transformers']}, "
        f"tokenizers {out['versions']['tokenizers']})"
    )
    row = (
        f"| {args.rows:,} | {out['file_mib']} | {out['scan_seconds']} | {out['rows_per_s']:,} | "
        f"{out['peak_rss_mib']} | under 60 s: {'met' if out['met'] else 'NOT met'} |"
    )
    md = [title, "", "| rows | file MiB | seconds | rows/s | peak RSS MiB | target |", "|---|---|---|---|---|---|", row]
    print(json.dumps(out, indent=1))
    print("\n".join(md))
    if args.out:
        save(args.out, out, md)


if __name__ == "__main__":
    main()
