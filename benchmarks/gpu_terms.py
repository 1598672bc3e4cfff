"""GPU rows for the terms around the step (issue 48 item 10): what the frameworks' own code holds on a real card.

    python benchmarks/gpu_terms.py --out DIR [--part head ...] [--budget-s 120]   on the CUDA device
    python benchmarks/gpu_terms.py --out DIR --rehearse                            tiny shapes on CPU ranks (gloo)

Each row runs its code in this process and reads torch.cuda's counters: the peak allocated above what the row's
inputs held before it started (`peak_above_bytes`) and what stays allocated after it (`kept_bytes`). Parts:
- head: OpenRLHF's log-prob head, its actor's fp32 cast of the logits (models/actor.py:267) and log_probs_from_logits
  (models/utils.py:172-196), loaded from OpenRLHF's own file (--openrlhf-utils); with flash-attn's Triton
  cross-entropy (--flash-ce: flash_attn/ops/triton/cross_entropy.py, the path OpenRLHF takes where flash-attn is
  installed) and with OpenRLHF's fallback (gather and a chunked logsumexp); the update (forward and backward) and the
  no-grad pass.
- zero3: DeepSpeed ZeRO-3 on one rank (bf16, a client AdamW): GatheredParameters over the whole model (what a weight
  sync to a colocated rollout engine does), HF generate under ZeRO-3 (DeepSpeed's and HF's "auto" buckets), the
  16-bit consolidated state dict of a save.
- save: FSDP2's full state dict (get_model_state_dict, cpu_offload, as accelerate saves it), FSDP1's
  FULL_STATE_DICT (offload_to_cpu, rank0_only), a PEFT adapter's state dict.
- tower: Qwen2.5-VL-3B's vision tower (transformers' own class from the catalog's config), trainable in bf16, on N
  patches: what its forward saves and its forward + backward peak.
benchmarks/gpu_terms_report.py predicts each row with today's planner.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CATALOG = ROOT / "planner/model/catalog/models"
PARTS = ("head", "zero3", "save", "tower")


def peak(fn, dev: str) -> dict:
    """Run fn; the peak allocated above the start and what stays allocated (None on the CPU rehearsal)."""
    if dev == "cpu":
        fn()
        return {"peak_above_bytes": None, "kept_bytes": None}
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    kept = fn()
    torch.cuda.synchronize()
    out = {
        "peak_above_bytes": torch.cuda.max_memory_allocated() - base,
        "kept_bytes": torch.cuda.memory_allocated() - base,
    }
    del kept
    return out


def load_file(name: str, path: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def head_rows(a) -> list[dict]:
    tokens = (256,) if a.rehearse else (4096, 16384)
    vocab, hidden = (1024, 64) if a.rehearse else (151936, 896)  # Qwen2.5-0.5B's head
    return [
        {"part": "head", "tokens": t, "vocab": vocab, "hidden": hidden, "ce": ce, "grad": g}
        for t in tokens
        for ce in ("flash", "torch")
        for g in (True, False)
        if not (ce == "flash" and (a.rehearse or not a.flash_ce))
    ]


def head_measure(row: dict, a, dev: str) -> dict:
    if row["ce"] == "flash":  # flash_attn/__init__ imports its CUDA extension: load the Triton file alone
        ce = load_file("flash_ce", a.flash_ce)
        sys.modules["flash_attn.ops.triton.cross_entropy"] = ce
    else:
        sys.modules["flash_attn.ops.triton.cross_entropy"] = None  # OpenRLHF's ImportError fallback
    utils = load_file("openrlhf_utils", a.openrlhf_utils)
    t, v, h = row["tokens"], row["vocab"], row["hidden"]
    x = torch.randn(1, t, h, device=dev, dtype=torch.bfloat16).requires_grad_(row["grad"])
    w = (0.02 * torch.randn(v, h, device=dev, dtype=torch.bfloat16)).requires_grad_(row["grad"])
    labels = torch.randint(0, v, (1, t), device=dev)

    def run():
        with nullcontext() if row["grad"] else torch.no_grad():
            logits = torch.nn.functional.linear(x, w).to(torch.float32)  # actor.py:267
            lp = utils.log_probs_from_logits(logits, labels)
            del logits
            if row["grad"]:
                (-lp.mean()).backward()
        return lp

    return peak(run, dev)


def qwen_config(name: str = "qwen2.5-0.5b"):
    from transformers import AutoConfig

    cfg = json.loads((CATALOG / f"{name}.json").read_text())
    return AutoConfig.for_model(cfg.pop("model_type"), **cfg)


def small_model(a, dtype):
    from transformers import AutoModelForCausalLM

    cfg = qwen_config()
    if a.rehearse:
        cfg.num_hidden_layers, cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size = 2, 64, 128, 512
        cfg.num_attention_heads, cfg.num_key_value_heads = 4, 2
    return AutoModelForCausalLM.from_config(cfg, dtype=dtype)


def init_dist(dev: str) -> None:
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", RANK="0", LOCAL_RANK="0", WORLD_SIZE="1")
    os.environ.setdefault("MASTER_PORT", "29517")
    if not dist.is_initialized():
        if dev == "cpu":
            from recipe.dist import init_deepspeed

            init_deepspeed("gloo", cpu=True)
        else:
            import deepspeed

            deepspeed.init_distributed(dist_backend="nccl")


def zero3_rows(a) -> list[dict]:
    return [
        {"part": "zero3", "op": op, "buckets": b}
        for op, b in (("gather", "ds"), ("generate", "ds"), ("generate", "hf-auto"), ("save16", "ds"))
    ]


def zero3_measure(row: dict, a, dev: str) -> dict:
    import deepspeed

    from recipe.dist import client_optimizer_config

    init_dist(dev)
    model = small_model(a, torch.bfloat16)
    h = model.config.hidden_size
    zero = {"stage": 3, "stage3_gather_16bit_weights_on_model_save": True}
    if row["buckets"] == "hf-auto":  # transformers integrations/deepspeed.py: hidden^2, 0.9 hidden^2, 10 hidden
        zero.update(
            reduce_bucket_size=h * h,
            stage3_prefetch_bucket_size=int(0.9 * h * h),
            stage3_param_persistence_threshold=10 * h,
        )
    cfg = client_optimizer_config(
        {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}, "zero_optimization": zero}
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    engine, *_ = deepspeed.initialize(model=model, optimizer=opt, config=cfg)
    ids = torch.randint(0, model.config.vocab_size, (1, 128), device=engine.device)
    if row["op"] == "gather":
        params = list(engine.module.parameters())
        result = peak(lambda: deepspeed.zero.GatheredParameters(params).__enter__(), dev)  # held, as a sync holds it
        deepspeed.zero.GatheredParameters(params).__exit__(None, None, None)
    elif row["op"] == "generate":
        with torch.no_grad():
            engine.module.generate(ids, max_new_tokens=4, do_sample=False)  # DeepSpeed's trace, then the measured run
            result = peak(lambda: engine.module.generate(ids, max_new_tokens=32, do_sample=False), dev)
    else:
        result = peak(lambda: engine._zero3_consolidated_16bit_state_dict(), dev)
    numel = sum(p.ds_numel for p in engine.module.parameters())
    engine.destroy()
    return {**result, "model_params": numel, "hidden": h}


def save_rows(a) -> list[dict]:
    return [{"part": "save", "op": op} for op in ("fsdp2-full", "fsdp1-full", "peft")]


def save_measure(row: dict, a, dev: str) -> dict:
    init_dist(dev)
    if row["op"] == "peft":
        from peft import LoraConfig, get_peft_model, get_peft_model_state_dict

        model = get_peft_model(small_model(a, torch.bfloat16).to(dev), LoraConfig(r=16, target_modules="all-linear"))
        return peak(lambda: {k: v.cpu() for k, v in get_peft_model_state_dict(model).items()}, dev)
    model = small_model(a, torch.float32).to(dev)
    mp_dtype = torch.bfloat16
    if row["op"] == "fsdp2-full":
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        mp = MixedPrecisionPolicy(param_dtype=mp_dtype, reduce_dtype=torch.float32)
        for layer in model.model.layers:
            fully_shard(layer, mp_policy=mp)
        fully_shard(model, mp_policy=mp)
        opts = StateDictOptions(full_state_dict=True, cpu_offload=True)
        return peak(lambda: get_model_state_dict(model, options=opts), dev)
    from torch.distributed.fsdp import FullStateDictConfig, MixedPrecision, StateDictType
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy

    layer_cls = type(model.model.layers[0])
    mp = MixedPrecision(param_dtype=mp_dtype, reduce_dtype=torch.float32, buffer_dtype=mp_dtype)
    wrapped = FSDP(
        model, auto_wrap_policy=ModuleWrapPolicy({layer_cls}), mixed_precision=mp, device_id=None if dev == "cpu" else 0
    )

    def full():
        cfg = FullStateDictConfig(offload_to_cpu=True, rank0_only=True)
        with FSDP.state_dict_type(wrapped, StateDictType.FULL_STATE_DICT, cfg):
            return wrapped.state_dict()

    return peak(full, dev)


def tower_rows(a) -> list[dict]:
    patches = (64,) if a.rehearse else (4096, 16384, 65536)
    return [{"part": "tower", "model": "qwen2.5-vl-3b", "patches": n} for n in patches]


def tower_measure(row: dict, a, dev: str) -> dict:
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as m
    from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import Qwen2_5_VLVisionConfig

    vc = json.loads((CATALOG / f"{row['model']}.json").read_text())["vision_config"]
    if a.rehearse:
        vc.update(
            depth=2, hidden_size=64, intermediate_size=128, num_heads=4, out_hidden_size=64, fullatt_block_indexes=[1]
        )
    tower = m.Qwen2_5_VisionTransformerPretrainedModel._from_config(
        Qwen2_5_VLVisionConfig(**vc), dtype=torch.bfloat16
    ).to(dev)
    n = row["patches"]
    side = int(n**0.5)
    grid = torch.tensor([[1, side, n // side]], device=dev)
    px = torch.randn(n, 3 * 2 * 14 * 14, device=dev, dtype=torch.bfloat16)
    saved = peak(lambda: _tower_out(tower, px, grid), dev)

    def step():
        _tower_out(tower, px, grid).float().pow(2).mean().backward()

    both = peak(step, dev)
    return {
        "saved_bytes": saved["kept_bytes"],
        "forward_peak_above_bytes": saved["peak_above_bytes"],
        "step_peak_above_bytes": both["peak_above_bytes"],
        "tower_params": sum(p.numel() for p in tower.parameters()),
    }


def _tower_out(tower, px, grid):
    out = tower(px, grid_thw=grid)
    return (
        out
        if torch.is_tensor(out)
        else (out.pooler_output if getattr(out, "pooler_output", None) is not None else out[0])
    )


MEASURE = {
    "head": (head_rows, head_measure),
    "zero3": (zero3_rows, zero3_measure),
    "save": (save_rows, save_measure),
    "tower": (tower_rows, tower_measure),
}


def versions() -> dict:
    from importlib import metadata

    out = {}
    for p in ("torch", "transformers", "deepspeed", "peft"):
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            out[p] = ""
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--part", action="append", choices=PARTS)
    ap.add_argument("--rehearse", action="store_true")
    ap.add_argument("--openrlhf-utils", help="OpenRLHF's openrlhf/models/utils.py")
    ap.add_argument("--flash-ce", help="flash-attn's flash_attn/ops/triton/cross_entropy.py")
    ap.add_argument("--budget-s", type=float, default=150)
    ap.add_argument("--resume", action="store_true", help="keep DIR/terms.json's rows and measure the others")
    a = ap.parse_args()
    dev = "cpu" if a.rehearse else "cuda"
    if dev == "cuda" and not torch.cuda.is_available():
        raise SystemExit("gpu_terms: no CUDA device; --rehearse runs on the CPU")
    out = Path(a.out) / "terms.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "part": "terms",
        "device": "cpu (rehearsal)" if dev == "cpu" else torch.cuda.get_device_name(0),
        "versions": versions(),
        "date": time.strftime("%Y-%m-%d"),
        "rows": json.loads(out.read_text())["rows"] if a.resume and out.is_file() else [],
    }
    have = list(data["rows"])
    t0 = time.monotonic()
    for part in a.part or PARTS:
        rows_fn, measure = MEASURE[part]
        if part == "head" and not a.openrlhf_utils:
            continue
        for row in rows_fn(a):
            if any(all(r.get(k) == v for k, v in row.items()) for r in have):
                continue
            if time.monotonic() - t0 > a.budget_s:
                break
            started = time.monotonic()
            try:
                result = {"status": "ok", **measure(row, a, dev)}
            except torch.OutOfMemoryError:
                result = {"status": "oom"}
            except Exception as e:  # noqa: BLE001 (a row that breaks is a result)
                result = {"status": "error", "reason": f"{e.__class__.__name__}: {e}"[:300]}
            data["rows"].append({**row, **result, "seconds": round(time.monotonic() - started, 1)})
            print(json.dumps(data["rows"][-1]), flush=True)
            out.write_text(json.dumps(data, indent=1) + "\n")
            gc.collect()
            if dev == "cuda":
                torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
