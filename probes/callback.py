"""MemplanCallback: a `transformers.TrainerCallback` that records each optimizer step's measured memory with the plan
the run ran (planner.evidence.runs), for HF's Trainer, TRL's trainers and the frameworks built on them (LLaMA-Factory,
ms-swift and axolotl take a callback list).

    trainer = SFTTrainer(..., callbacks=[MemplanCallback(plan={"model": "qwen2.5-7b", "gpu": "h100", ...})])

What a step records (each rank its own row):
- on CUDA: torch.cuda.max_memory_allocated and max_memory_reserved since the previous step (the peak statistics are
  reset at each step's start), and NVML's used memory of the rank's device (nvidia-ml-py, where it loads);
- on a CPU: the step's live tensor bytes at their peak, rounded as the CUDA allocator rounds, with the parameters and
  optimizer states that live through the step counted (probes.tracker, the cpu probe's measure), and the process's
  peak RSS.
`plan` is a `planner check` request body; fields it leaves out are read from the TrainingArguments (the batch split,
the GPUs per node) where they are there. Nothing is recorded where `plan` names no model and the run's model has no
name either.
"""

from __future__ import annotations

import os
import uuid

import torch
from transformers import TrainerCallback

from planner.evidence.runs import RunStep, add, peak_rss_bytes
from planner.evidence.store import Store


class MemplanCallback(TrainerCallback):
    def __init__(self, plan: dict | None = None, store: str | None = None, run: str | None = None) -> None:
        self.plan = dict(plan or {})
        self.store_path = store
        self.run = run or os.environ.get("MEMPLAN_RUN") or uuid.uuid4().hex[:12]
        self.store: Store | None = None
        self.tracker = None
        self.model = None
        self.optimizer = None

    # -- the run ------------------------------------------------------------------------------------------------
    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
        self.model, self.optimizer = model, optimizer
        name = getattr(getattr(model, "config", None), "_name_or_path", "") if model is not None else ""
        self.plan.setdefault("model", name)
        self.plan.setdefault("micro_batch", args.per_device_train_batch_size)
        self.plan.setdefault("grad_accum", args.gradient_accumulation_steps)
        self.plan.setdefault("gpus_per_node", max(1, args.world_size // max(1, int(os.environ.get("NNODES", "1")))))
        if getattr(args, "max_length", None) and "seq_len" not in self.plan:
            self.plan["seq_len"] = args.max_length  # TRL's SFTConfig
        self.store = Store(self.store_path)
        self.store.check_writable()

    def on_step_begin(self, args, state, control, optimizer=None, **kwargs):
        self.optimizer = optimizer or self.optimizer
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
            return
        from probes.tracker import LiveBytes

        self.tracker = LiveBytes()
        self.tracker.__enter__()
        self.tracker.add_existing(self._resident(), "resident")

    def on_step_end(self, args, state, control, **kwargs):
        row = RunStep(
            run=self.run,
            step=state.global_step,
            rank=args.process_index,
            model=str(self.plan.get("model", "")),
            plan=self.plan,
            host_rss_bytes=peak_rss_bytes(),
            source="hf-callback",
            **self._device(),
        )
        if self.store is not None and row.model:
            add(self.store, [row])

    def on_train_end(self, args, state, control, **kwargs):
        self._stop_tracker()
        if self.store is not None:
            self.store.close()

    # -- measurements -------------------------------------------------------------------------------------------
    def _device(self) -> dict:
        if torch.cuda.is_available():
            return {
                "allocated_bytes": torch.cuda.max_memory_allocated(),
                "reserved_bytes": torch.cuda.max_memory_reserved(),
                "nvml_bytes": _nvml_used(torch.cuda.current_device()),
                "device": torch.cuda.get_device_name(),
            }
        peak = self.tracker.peak if self.tracker is not None else None
        self._stop_tracker()
        return {"allocated_bytes": peak, "device": "cpu"}

    def _resident(self) -> list[torch.Tensor]:
        """The tensors that live through a step: the model's parameters (and gradients), the optimizer's states."""
        out = list(self.model.parameters()) if self.model is not None else []
        out += [p.grad for p in out if p.grad is not None]
        if self.optimizer is not None:
            for state in self.optimizer.state.values():
                out += [v for v in state.values() if isinstance(v, torch.Tensor) and v.dim() > 0]
        return out

    def _stop_tracker(self) -> None:
        if self.tracker is not None:
            self.tracker.__exit__(None, None, None)
            self.tracker = None


def _nvml_used(index: int) -> int | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        return int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(index)).used)
    except Exception:  # noqa: BLE001 - no NVML (a driver without it, a container): the allocator's figures stand
        return None
