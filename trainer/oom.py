"""The bundled trainer's out-of-memory handling: the injected OOM tests use, the shrink after an OOM (the next smaller
micro-batch with the accumulation that keeps the global batch, or half the token budget), and the event's record
in the probe store."""

from __future__ import annotations

import gc
import os

import torch


class OOMInjector:
    """MEMPLAN_TRAIN_INJECT_OOM=step:micro:rank raises torch's real OutOfMemoryError there, once."""

    def __init__(self) -> None:
        spec = os.environ.get("MEMPLAN_TRAIN_INJECT_OOM", "")
        self.at = tuple(int(x) for x in spec.split(":")) if spec else None

    def check(self, step: int, micro: int, rank: int) -> None:
        if self.at == (step, micro, rank):
            self.at = None
            raise torch.OutOfMemoryError("injected: CUDA out of memory (MEMPLAN_TRAIN_INJECT_OOM)")


def shrink(t) -> None:
    """After an OOM: free what the failed try held; the next smaller micro-batch (half when even)
    and the accumulation that keeps the global batch."""
    from planner.search.search import divisors

    t.opt.zero_grad(set_to_none=True)
    gc.collect()
    if t.device.type == "cuda":
        torch.cuda.empty_cache()
    if t.budget:  # half the token budget, while it still holds a sample of seq_len
        if t.budget // 2 < t.cfg.seq_len:
            raise RuntimeError(
                f"out of memory at a token budget of {t.budget}: half of it cannot hold a "
                f"sample of {t.cfg.seq_len} tokens"
            )
        t.budget //= 2
        t.events.append({"step": t.step + 1, "event": "oom", "max_tokens_per_micro_batch": t.budget})
        return
    per_rank = t.micro * t.accum
    smaller = [d for d in divisors(per_rank) if d <= t.micro // 2]
    if not smaller:
        raise RuntimeError(f"out of memory at micro-batch {t.micro}: nothing smaller to try")
    t.micro = smaller[-1]
    t.accum = per_rank // t.micro
    t.events.append({"step": t.step + 1, "event": "oom", "micro_batch": t.micro, "grad_accum": t.accum})


def record_oom(t, message: str) -> None:
    """The event goes to the probe store, so the next plan for this model starts lower."""
    try:
        from planner.evidence.store import Shapes, Store, make_record
        from planner.model.catalog import load_model

        cfg = t.cfg
        spec = load_model(cfg.model)
        knobs = cfg.knobs
        shapes = Shapes(micro_batch=t.micro, grad_accum=t.accum, seq_len=cfg.seq_len, world_size=t.world)
        device = torch.cuda.get_device_name(t.device) if t.device.type == "cuda" else "cpu"
        rec = make_record(
            spec.name,
            spec.config,
            knobs,
            shapes,
            t.device.type,
            "oom",
            device,
            peak_allocated_bytes=t._peak(),
            detail={"error": message[:500], "source": "trainer"},
        )
        store = Store(cfg.store)  # written by the rank that ran out of memory
        store.add(rec)
        store.close()
    except Exception as e:  # noqa: BLE001 (recording must never hide the OOM being handled)
        t.events.append({"event": "oom-record-failed", "error": str(e)[:200]})
