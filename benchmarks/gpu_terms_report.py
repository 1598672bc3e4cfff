"""The rows of benchmarks/gpu_terms.py against today's planner: each measured byte count beside the term that predicts
it, or the line saying which behaviour memplan does not plan.

    python benchmarks/gpu_terms_report.py benchmarks/results/gpu/h200 [--md]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.config.spec import Knobs
from planner.config.workload import Workload
from planner.estimate import lifecycle, rl, weight_sync
from planner.estimate.role_heads import logprob_pass_head_bytes, update_head_bytes
from planner.estimate.setup import Setup
from planner.estimate.vision import vision_activations_bytes
from planner.model.catalog import load_model

HALF = 2
NOT_PLANNED = {
    (
        "head",
        "torch",
        True,
    ): "OpenRLHF without flash-attn (gather and a chunked logsumexp): memplan plans flash-attn's path",
    ("save", "fsdp1-full"): "FSDP1 on one rank runs NO_SHARD (torch fsdp/_init_utils.py:427-430), which never offloads "
    "(_unshard_param_utils.py:218): the fp32 state dict stays on the GPU; memplan plans FSDP2",
}


def _save_setup(op: str) -> Setup:
    """The save rows' run: Qwen2.5-0.5B on one rank, HF's loop, the full weights saved."""
    knobs = {
        "fsdp2-full": {"fsdp": "full", "save_weights": "full"},
        "peft": {"lora_rank": 16},
        "save16": {"zero_stage": 3},
    }
    return Setup(load_model("qwen2.5-0.5b"), Knobs(precision="bf16", framework="hf", **knobs[op]), 1, 1, 1024, 1, 1)


def _zero3_predict(op: str) -> tuple[int, str]:
    """The zero3 rows' run: Qwen2.5-0.5B under ZeRO-3 on one rank. `gather`: GatheredParameters over the whole model
    held (a ms-swift sync's group, TRL's PEFT sync); `generate`: HF generate of 32 tokens after a 128-token prompt,
    one sequence (the generation phase's terms: KV cache, logits and sampling, the weights' gather)."""
    w = Workload(kind="grpo", max_prompt_length=128, max_completion_length=32, steps_per_generation=1)
    s = Setup(load_model("qwen2.5-0.5b"), Knobs(precision="bf16", zero_stage=3, workload=w), 1, 1, w.seq_len(), 1, 1)
    if op == "gather":
        whole = weight_sync.whole_model_bytes(s)
        return weight_sync.gathered_copy_bytes(s, whole, single=False), "weight_sync.gathered_copy_bytes (whole model)"
    return sum(rl.generation_terms(s).values()), "rl.generation_terms (cache, logits, weights' gather)"


def predict(row: dict) -> tuple[int | None, str]:
    """(bytes the planner predicts for the row's measured quantity, the term); None with the reason where none does."""
    part = row["part"]
    why = NOT_PLANNED.get((part, row.get("ce"), row.get("grad"))) or NOT_PLANNED.get((part, row.get("op")))
    if why:
        return None, why
    if part == "head":
        t, v, h = row["tokens"], row["vocab"], row["hidden"]
        if row["grad"]:
            return update_head_bytes(t, v, h, HALF, "off", HALF, upcast=True), "role_heads.update_head_bytes"
        return logprob_pass_head_bytes(t, v, HALF, False, upcast=True), "role_heads.logprob_pass_head_bytes"
    if part == "save":
        return lifecycle.save_gpu_transient_bytes(_save_setup(row["op"])), "lifecycle.save_gpu_transient_bytes"
    if part == "zero3" and row.get("op") in ("gather", "generate"):
        return _zero3_predict(row["op"])
    if part == "tower":
        v = load_model(row["model"]).vision
        tokens = row["patches"] // v.patches_per_token
        return vision_activations_bytes(v, 1, tokens, "half", "off", True), "vision.vision_activations_bytes"
    return None, "no term"


def measured(row: dict) -> int | None:
    return row.get("saved_bytes") if row["part"] == "tower" else row.get("peak_above_bytes")


def _label(row: dict) -> str:
    keys = ("tokens", "ce", "grad", "op", "buckets", "patches")
    return " ".join(f"{k}={row[k]}" for k in keys if k in row)


def report(out: Path) -> dict:
    data = json.loads((out / "terms.json").read_text())
    rows = []
    for r in (r for r in data["rows"] if r.get("status") == "ok"):
        pred, term = predict(r)
        got = measured(r)
        err = None if pred is None or got is None else (got - pred) / pred if pred else float(got != 0)
        rows.append(
            {"part": r["part"], "row": _label(r), "measured": got, "predicted": pred, "error": err, "term": term}
        )
    return {"device": data["device"], "versions": data["versions"], "date": data["date"], "rows": rows}


def markdown(rep: dict) -> str:
    v = rep["versions"]
    head = (
        f"# Terms around the step on the GPU ({rep['device']}, torch {v.get('torch')}, transformers "
        f"{v.get('transformers')}, DeepSpeed {v.get('deepspeed')}, measured {rep['date']})\n\n"
        "| part | row | measured GiB | predicted GiB | error | term |\n|---|---|---|---|---|---|\n"
    )

    def gib(b):
        return "-" if b is None else f"{b / 2**30:.3f}"

    def pct(e):
        return "-" if e is None else f"{e:+.2%}"

    lines = [
        f"| {r['part']} | {r['row']} | {gib(r['measured'])} | {gib(r['predicted'])} | {pct(r['error'])} | {r['term']} |"
        for r in rep["rows"]
    ]
    return head + "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--md", action="store_true")
    a = ap.parse_args()
    rep = report(Path(a.dir))
    print(markdown(rep) if a.md else json.dumps(rep, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
