"""Issue 49's task heads and RLHF workloads against the real CPU steps that pin them, one row a case: the planned
bytes, the measured bytes, the error. Each row's measurement is the one its test makes (imported from it, so the
benchmark and the test cannot drift apart), here printed with its figure instead of asserted:

- seq-cls (ms-swift's seq_cls and reranker, TRL's RewardTrainer: transformers' AutoModelForSequenceClassification),
  fp32, two steps, the second's peak; and the change from the causal LM (tests/probes/test_task_heads.py);
- embedding: ms-swift 4.6.0's InfonceLoss over its normalized last-token pooling, in ms-swift's venv; the change from
  the causal LM over the same rows (tests/probes/test_embedding_head.py);
- LLaMA-Factory's reward model (stage rm): trl's value-head forward and 0.9.5's pairwise loss, in LLaMA-Factory's
  venv, the forward's end (tests/probes/test_lf_valuehead.py);
- LLaMA-Factory's v1 trainer's SFT loss: its own compute_loss in LLaMA-Factory's venv, the forward's and the
  backward's peaks (tests/probes/test_lf_v1_head.py);
- GKD's loss moment: TRL's generalized_jsd_loss in this venv, ms-swift's gkd_loss in its venv
  (tests/planner/estimate/test_gkd_loss.py);
- ms-swift's PPO: TRL 0.29.1's PPOTrainer in ms-swift's venv, the update's and the rollout's peaks
  (tests/probes/test_trl_ppo.py).

A row whose framework venv is missing is left out and named on stderr.

    MEMPLAN_SWIFT_PYTHON=.fwenv/ms-swift/bin/python MEMPLAN_LLAMAFACTORY_PYTHON=.fwenv/llamafactory/bin/python \\
        python benchmarks/accuracy_heads.py --out benchmarks/results/accuracy-heads.json
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from results_io import cpu_meta, meta_line, out_or_report, publish

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _row(workload: str, framework: str, case: str, planned: int, measured: int, how: str) -> dict:
    return {
        "workload": workload,
        "framework": framework,
        "case": case,
        "planned": planned,
        "measured": measured,
        "error": round(planned / measured - 1, 5),
        "how": how,
    }


def _venv(variable: str) -> str | None:
    python = os.environ.get(variable)
    if python and Path(python).exists():
        return python
    print(f"skipped: {variable} names no venv", file=sys.stderr)
    return None


def seq_cls_rows() -> list[dict]:
    import transformers

    from tests.probes.test_task_heads import LABELS, measured_peak, planned_peak

    out = []
    for rows, seq in ((2, 128), (4, 512)):
        causal = measured_peak(rows, seq, transformers.AutoModelForCausalLM)
        seq_cls = measured_peak(rows, seq, transformers.AutoModelForSequenceClassification, num_labels=LABELS)
        planned_causal = planned_peak(rows, seq, "causal-lm")
        planned = planned_peak(rows, seq, "seq-cls", num_labels=LABELS)
        case = f"debug-llama fp32, {rows} x {seq}, {LABELS} labels"
        out.append(_row("seq-cls", "hf", case + ", peak", planned, seq_cls, "tracker"))
        change = planned_causal - planned, causal - seq_cls
        out.append(_row("seq-cls", "hf", case + ", less than causal-lm", *change, "tracker"))
    return out


def embedding_rows() -> list[dict]:
    import json

    from planner.model.catalog import model_config
    from tests.probes.test_embedding_head import MEASURE, NEGATIVES, planned_peak

    python = _venv("MEMPLAN_SWIFT_PYTHON")
    if not python:
        return []
    out = []
    for examples, seq in ((1, 128), (2, 512)):
        args = [json.dumps(model_config("debug-llama")), str(examples), str(seq), str(NEGATIVES)]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "INFONCE_USE_BATCH": "True"}
        run = subprocess.run([python, "-c", MEASURE, *args], check=True, capture_output=True, text=True, env=env)
        measured = json.loads(run.stdout.strip().splitlines()[-1])
        rows = examples * (2 + NEGATIVES)
        planned = planned_peak(examples, seq, "embedding", negatives=NEGATIVES)
        change = planned_peak(rows, seq, "causal-lm") - planned, measured["causal-lm"] - measured["embedding"]
        case = f"debug-llama fp32, {examples} x (1 + 1 + {NEGATIVES}) x {seq}, InfonceLoss"
        out.append(_row("embedding", "swift", case + ", peak", planned, measured["embedding"], "tracker"))
        out.append(_row("embedding", "swift", case + ", less than causal-lm", *change, "tracker"))
    return out


def value_head_rows() -> list[dict]:
    from planner.estimate.heads import value_head_bytes
    from tests.probes.test_lf_valuehead import HIDDEN, ROWS, VOCAB, WIDTH, planned_step, run_llamafactorys_own

    python = _venv("MEMPLAN_LLAMAFACTORY_PYTHON")
    if not python:
        return []
    theirs = run_llamafactorys_own(python)
    how = "LLaMA-Factory 0.9.5 compute_loss + trl ValueHead, tracker"
    case = f"{ROWS} x {WIDTH}, vocabulary {VOCAB}, hidden {HIDDEN}, forward's end (CPU dropout: +1 B an element)"
    out = [
        _row("value head (stage rm)", "llamafactory", f"{case}, {label}", planned, theirs[label]["forward"], how)
        for label, amp in (("bf16-pure", False), ("amp", True))
        for planned in [value_head_bytes(ROWS * WIDTH, VOCAB, HIDDEN, 2, amp)]
    ]
    case = "debug-llama (untied) full fine-tuning, fp32, 1 pair x 128, AdamW, the step's peak"
    out.append(_row("value head (stage rm)", "llamafactory", case, planned_step(1, 128), theirs["full_step"], how))
    return out


def v1_head_rows() -> list[dict]:
    """LLaMA-Factory 0.9.5's v1 trainer's SFT loss (its own compute_loss, in its venv), each moment."""
    from planner.estimate.v1_head import v1_backward_loss_bytes, v1_forward_loss_bytes
    from tests.probes.test_lf_v1_head import SHAPES, VOCAB, measured

    if not _venv("MEMPLAN_LLAMAFACTORY_PYTHON"):
        return []
    got, how, out = measured(), "LLaMA-Factory 0.9.5 v1 SFTTrainer.compute_loss, tracker", []
    for dtype, c in (("fp32", 4), ("bf16", 2)):
        for rows, width in SHAPES:
            seen, case = got[dtype][f"{rows}:{width}"], f"{rows} x {width}, vocabulary {VOCAB}, {dtype}"
            planned = {"forward": v1_forward_loss_bytes(rows, width, VOCAB, c)}
            planned["backward"] = v1_backward_loss_bytes(rows, width, VOCAB)
            out += [
                _row("SFT (v1 trainer)", "llamafactory_v1", f"{case}, {m}", planned[m], seen[m], how) for m in planned
            ]
    return out


def gkd_rows() -> list[dict]:
    from planner.model.catalog import load_model
    from tests.planner.estimate.test_gkd_loss import _measure, _planned

    vocab = load_model("debug-llama").text.vocab
    out = []
    for framework, python, completions in (
        ("trl", sys.executable, (192, 64)),
        ("swift", _venv("MEMPLAN_SWIFT_PYTHON"), (600, 300, 96)),
    ):
        if not python:
            continue
        for key, peak in _measure(python, framework, vocab, completions).items():
            completion, upcast, beta = key.split()
            planned = _planned(framework, int(completion), upcast == "True", float(beta))
            logits = "fp32 logits" if upcast == "True" else "bf16 logits"
            case = f"completion {completion}, {logits}, beta {beta}"
            out.append(_row("gkd loss", framework, case, planned, peak, "the framework's loss, tracker"))
    return out


def ppo_rows() -> list[dict]:
    from tests.probes.test_trl_ppo import DTYPES, measured, planned, tiny

    if not _venv("MEMPLAN_SWIFT_PYTHON"):
        return []
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        got = measured(tiny(Path(tmp)))
        for dtype, precision in DTYPES.items():
            want, _ = planned(Path(tmp), precision)
            for phase, key in (("actor-update", "train"), ("rollout", "rollout")):
                case = f"debug-llama 2 layers, {dtype}, micro 2 x accum 2, 32 + 32 tokens, {phase}"
                out.append(_row("ppo", "swift", case, want[phase], got[dtype][key], "TRL 0.29.1 PPOTrainer, tracker"))
    return out


def markdown(data: dict) -> list[str]:
    md = ["| workload | framework | case | planned bytes | measured bytes | error | measured by |", "|" + "---|" * 7]
    md += [
        f"| {r['workload']} | {r['framework']} | {r['case']} | {r['planned']:,} | {r['measured']:,} | "
        f"{r['error']:+.2%} | {r['how']} |"
        for r in data["rows"]
    ]
    note = (
        "A peak row at 512 tokens counts CUDA's attention kernels, which hold more than the CPU's (25.3 MB at seq-cls's "
        "4 x 512: tests/probes/test_task_heads.py); the change from the causal LM over the same rows is the head's own "
        "check there."
    )
    return md + ["", note, "", meta_line(data["meta"])]


def main() -> None:
    args = out_or_report(__doc__, markdown)
    if args is None:
        return
    rows = []
    for part in (seq_cls_rows, embedding_rows, value_head_rows, v1_head_rows, gkd_rows, ppo_rows):
        rows += part()
        print(f"{part.__name__}: {len(rows)} rows so far", file=sys.stderr, flush=True)
    publish(args.out, rows, cpu_meta(("torch", "transformers", "trl")), markdown)


if __name__ == "__main__":
    main()
