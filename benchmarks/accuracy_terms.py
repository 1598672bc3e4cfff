"""The terms issue 32 added, each against its measurement on this machine's CPU: the evaluation phase's transient
(the live-bytes tracker around a real no-grad forward with labels, and around HF's Trainer.evaluate keeping logits
for compute_metrics), FSDP2's unsharded gradients between micro-steps
and its full state dicts at a save (2 gloo ranks), DeepSpeed's save weights at ZeRO-2 and ZeRO-3 (2 gloo ranks), and
the host RAM of a model's load (RssAnon of a fresh process: probes/load.py), and quantized bases (a 4-bit base's
per-rank parameters on 2 gloo ranks, the int8 and GPTQ layers' bytes, each format's peak against the sim). Paged
optimizer states need CUDA's unified memory: that row says so. What each row's tolerance is lives in the test that pins the term.

    MEMPLAN_GPTQMODEL_PYTHON=.fwenv/gptqmodel/bin/python python benchmarks/accuracy_terms.py \
        --out benchmarks/results/accuracy-terms.json
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from results_io import cpu_meta, meta_line, publish

HF = "hf"  # the save terms as HF's Trainer runs them (accelerate's calls)


def _row(term: str, case: str, analytic: int | None, measured: int | None, how: str) -> dict:
    error = round(analytic / measured - 1, 5) if analytic and measured else None  # 0: nothing to compare
    return {"term": term, "case": case, "analytic": analytic, "measured": measured, "error": error, "how": how}


def eval_rows() -> list[dict]:
    import torch
    import transformers

    from planner.config.spec import Knobs
    from planner.estimate import nograd
    from planner.estimate.setup import Setup
    from planner.model.catalog import load_model, model_config
    from probes.evaluate import evaluate_peak
    from probes.tracker import LiveBytes

    cfg = model_config("debug-llama")
    mt = cfg.pop("model_type")
    model = transformers.AutoModelForCausalLM.from_config(
        transformers.AutoConfig.for_model(mt, **cfg), dtype=torch.bfloat16, attn_implementation="sdpa"
    ).eval()
    out = []
    for rows, seq in ((4, 64), (8, 128), (2, 256)):
        ids = torch.randint(0, cfg["vocab_size"], (rows, seq))
        with torch.no_grad(), LiveBytes() as tracker:
            model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids)
        s = Setup(load_model("debug-llama"), Knobs(precision="bf16-pure", eval_batch=rows), 1, 1, seq)
        out.append(
            _row("nograd.eval_forward_bytes", f"{rows} x {seq}", nograd.eval_forward_bytes(s), tracker.peak, "tracker")
        )
    for k in (1, 2, 3):
        with tempfile.TemporaryDirectory() as tmp:
            measured = evaluate_peak(Path(tmp), "debug-llama", 2, 64, k, metrics=True)
        s = Setup(load_model("debug-llama"), Knobs(precision="fp32", eval_batch=2, eval_logits_steps=k), 1, 1, 64)
        case = f"2 x 64, compute_metrics, eval_accumulation_steps {k}"
        out.append(
            _row("nograd.eval_forward_bytes", case, nograd.eval_forward_bytes(s), measured, "HF evaluate, tracker")
        )
    return out


def fsdp_rows() -> list[dict]:
    from planner.config.spec import Knobs
    from planner.estimate import fsdp, lifecycle
    from planner.estimate.setup import Setup
    from planner.model.catalog import load_model, model_config
    from probes.dist import measure_ranks
    from probes.step import Case

    out = []
    for precision in ("bf16", "bf16-pure"):
        knobs = Knobs(precision=precision, fsdp="full")
        ranks = measure_ranks(Case(model_config("debug-llama"), knobs, 2, 2, 64), 2, 1)
        s = Setup(load_model("debug-llama"), knobs, 2, 2, 64, 2, 1)
        measured = max(r["accumulated"][0] for r in ranks)
        analytic = fsdp.accumulated_grads_bytes(s, s.model.params)
        out.append(_row("fsdp.accumulated_grads_bytes", f"{precision}, accum 2", analytic, measured, "2 gloo ranks"))
    knobs = Knobs(precision="bf16", fsdp="full", framework=HF, save_weights="full")
    ranks = measure_ranks(Case(model_config("debug-llama"), knobs, 2, 1, 64), 2, 1, job={"save": True})
    s = Setup(load_model("debug-llama"), knobs, 2, 1, 64, 2, 1)
    measured = max(max(r["save_model_bytes"], r["save_optimizer_bytes"]) for r in ranks)
    out.append(
        _row(
            "lifecycle.save_host_bytes_per_node",
            "FSDP2 FULL_STATE_DICT",
            lifecycle.save_host_bytes_per_node(s),
            measured,
            "2 gloo ranks",
        )
    )
    return out


def zero_rows() -> list[dict]:
    from planner.config.spec import Knobs
    from planner.estimate import lifecycle
    from planner.estimate.setup import Setup
    from planner.model.catalog import load_model, model_config
    from probes.step import Case
    from probes.zero import measure_zero

    out = []
    for stage in (2, 3):
        knobs = Knobs(precision="bf16", zero_stage=stage, optimizer="sgd", framework=HF, save_weights="full")
        ranks = measure_zero(Case(model_config("debug-llama"), knobs, 2, 1, 64), steps=1, save=True)
        s = Setup(load_model("debug-llama"), knobs, 2, 1, 64, 2, 1)
        measured = sum(r["save_state_dict_bytes"] for r in ranks)
        out.append(
            _row(
                "lifecycle.save_host_bytes_per_node",
                f"ZeRO-{stage}, 2 ranks",
                lifecycle.save_host_bytes_per_node(s),
                measured,
                "2 gloo ranks",
            )
        )
    return out


def load_rows() -> list[dict]:
    from planner.config.spec import Knobs
    from planner.estimate import lifecycle
    from planner.estimate.setup import Setup
    from planner.model.families import from_config
    from probes.load import measure_load, write_checkpoint

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = write_checkpoint(Path(tmp))
        import json

        model = from_config(json.loads((folder / "config.json").read_text()), "llama-132m")
        for dtype, mode, knobs in (
            ("auto", "plain", Knobs(precision="bf16", zero_stage=2, framework=HF)),
            ("float32", "plain", Knobs(precision="bf16", framework=HF)),
            ("auto", "upcast", Knobs(precision="bf16", fsdp="full", framework=HF)),
        ):
            measured = measure_load(folder, dtype, mode)["held"]
            analytic = lifecycle.load_host_bytes_per_node(Setup(model, knobs, 1, 1, 512, 1, 1))
            case = {"plain": f"from_pretrained dtype {dtype}", "upcast": "FSDP2 upcast"}[mode]
            out.append(_row("lifecycle.load_host_bytes_per_node", case, analytic, measured, "RssAnon"))
    return out


def quant_rows() -> list[dict]:
    """Quantized bases: a 4-bit base's per-rank parameters under FSDP2 and ZeRO-3 (2 gloo ranks), the int8 bytes of
    a real Linear8bitLt, gptqmodel's GPTQ layer (its buffers and what it saves, in the gptqmodel venv where
    MEMPLAN_GPTQMODEL_PYTHON names one), and each format's peak against the sim's trace of its stand-in."""
    import json
    import os
    import subprocess

    import torch

    from planner.config.spec import Knobs
    from planner.estimate import quant
    from planner.estimate.memory import breakdown
    from planner.estimate.setup import Setup
    from planner.model.catalog import load_model, model_config
    from probes.dist import compare_states
    from probes.sim import simulate
    from probes.step import Case
    from recipe.quant import _bnb_linear8

    out = []
    cfg = dict(model_config("debug-llama"), num_hidden_layers=4)
    for shard in ({"fsdp": "full"}, {"zero_stage": 3}):
        knobs = Knobs.make(precision="bf16", lora_rank=8, quant="nf4", **shard)
        r = compare_states(Case(cfg, knobs, 2, 1, 128), world=2)[0]
        case = f"nf4 base, {'FSDP2' if 'fsdp' in shard else 'ZeRO-3'}, per rank"
        out.append(_row("memory.params_bytes", case, r["analytic"]["params"], r["measured"]["params"], "2 gloo ranks"))
    q = _bnb_linear8(torch.nn.Linear(4096, 4096, bias=False, dtype=torch.bfloat16))
    real = q.weight.numel() + q.weight.SCB.numel() * 4
    analytic = int(4096 * 4096 * quant.stored_bytes_per_weight("int8", 4096))
    out.append(_row("quant.stored_bytes_per_weight", "int8, 4096 x 4096", analytic, real, "Linear8bitLt"))
    python = os.environ.get("MEMPLAN_GPTQMODEL_PYTHON")
    if python:
        script = Path(__file__).resolve().parents[1] / "tests/probes/gptqmodel_layers.py"
        res = subprocess.run([python, str(script), "4096", "4096", "512", "bfloat16"], capture_output=True, check=True)
        gptq = json.loads(res.stdout.decode().strip().splitlines()[-1])["gptq"]
        analytic = int(4096 * 4096 * quant.stored_bytes_per_weight("gptq")) + 4 * 4096
        buffers = sum(gptq["buffers"].values())
        out.append(_row("quant.base_bytes", "gptq, 4096 x 4096", analytic, buffers, "gptqmodel TorchLinear"))
        saved = sum(t["bytes"] for t in gptq["saved"])
        out.append(_row("quant.saved_weights_layer_bytes", "gptq, one linear", 2 * 4096 * 4096, saved, "autograd"))
    model = load_model("llama-3.2-1b")
    for precision, kw in (
        ("bf16", {"quant": "int8"}),
        ("bf16", {"quant": "int8", "checkpointing": "full"}),
        ("bf16", {"quant": "gptq", "framework": HF}),
        ("bf16", {"quant": "gptq", "framework": HF, "checkpointing": "full"}),
        ("fp16", {"quant": "awq", "framework": HF}),
        ("bf16", {"quant": "nf4"}),
        ("bf16", {"quant": "hqq", "framework": HF, "release": "4.54"}),
        ("bf16", {"quant": "ct-w4a16", "framework": HF, "release": "4.54"}),
    ):
        knobs = Knobs.make(precision=precision, lora_rank=16, **kw)
        sim = simulate(Case(model.config, knobs, 2, 1, 2048)).peak_allocated_bytes
        analytic = breakdown(Setup(model, knobs, 2, 1, 2048), 80 * 2**30).peak_allocated_bytes
        case = f"llama-3.2-1b LoRA {kw['quant']} {precision}, ckpt {kw.get('checkpointing', 'off')}, 2 x 2048"
        out.append(_row("memory peak", case, analytic, sim, "sim (stand-in)"))
    return out


def markdown(data: dict) -> list[str]:
    md = ["| term | case | analytic bytes | measured bytes | error | measured by |", "|---|---|---|---|---|---|"]
    for r in data["rows"]:
        err = f"{r['error']:+.2%}" if r["error"] is not None else "-"
        a, m = (f"{v:,}" if v is not None else "-" for v in (r["analytic"], r["measured"]))
        md.append(f"| `{r['term']}` | {r['case']} | {a} | {m} | {err} | {r['how']} |")
    md.append(
        f"\n{meta_line(data['meta'])}. A load in the checkpoint's dtype holds "
        "views of the mmapped file: its analytic 0 has no error to show (the measured bytes are the process's own)."
    )
    return md


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    rows = []
    for part in (eval_rows, fsdp_rows, zero_rows, load_rows, quant_rows):
        t0 = time.perf_counter()
        rows += part()
        print(f"{part.__name__}: {time.perf_counter() - t0:.1f} s", flush=True)
    rows.append(
        _row("memory.paged_optimizer_bytes", "paged AdamW", None, None, "CUDA's unified memory: skipped on a CPU")
    )
    publish(args.out, rows, cpu_meta(("torch", "transformers", "deepspeed", "accelerate", "bitsandbytes")), markdown)


if __name__ == "__main__":
    main()
