"""The cuda probe: real training steps on an NVIDIA GPU.

One warm-up step (the optimizer creates its states), then the allocator's peak statistics are reset
and `steps` measured steps run: torch.cuda.max_memory_allocated / max_memory_reserved, NVML's used
device memory (the process's whole footprint: context, libraries, allocator reserve) and the mean
step time. An out-of-memory error is a result ("oom", with the memory allocated at failure), not a
crash. Runs inside probes.run's subprocess, so the GPU is clean when it exits.
"""

from __future__ import annotations

import time

from probes.step import Case, build_model, inputs, vlm_inputs, vocab_of
from probes.step import amp as uses_amp
from recipe import HALF, make_optimizer


def _nvml_used(index: int) -> int | None:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(index)).used)
        finally:
            pynvml.nvmlShutdown()
    except pynvml.NVMLError:
        return None


def measure(case: Case, steps: int = 3, capacity_bytes: int | None = None) -> dict:
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("the cuda probe needs an NVIDIA GPU (torch.cuda.is_available() is False)")
    dev = torch.cuda.current_device()
    name = torch.cuda.get_device_name(dev)
    if capacity_bytes:  # emulate a smaller card
        torch.cuda.set_per_process_memory_fraction(capacity_bytes / torch.cuda.get_device_properties(dev).total_memory)
    k = case.knobs
    held = case.image_tokens  # image tokens a sample of the batch holds (planned, until the batch is built)
    try:
        torch.manual_seed(0)
        with torch.device("cuda"):
            model = build_model(case, paths="cuda")
        if case.image_tokens:  # the images' inputs the processor gives (probes.images)
            batch, held = vlm_inputs(case, model, device="cuda")
        else:
            batch = inputs(case, vocab_of(model), device="cuda")
        opt = make_optimizer([p for p in model.parameters() if p.requires_grad], k.optimizer)
        half = HALF.get(k.precision)

        def step():
            for _ in range(case.grad_accum):
                with torch.autocast("cuda", dtype=half, enabled=uses_amp(k)):
                    loss = model(**batch).loss / case.grad_accum
                loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        step()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
        seconds = (time.perf_counter() - t0) / steps
        return {
            "status": "ok",
            "device": name,
            "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
            "peak_reserved_bytes": torch.cuda.max_memory_reserved(),
            "device_used_bytes": _nvml_used(dev),
            "step_time_s": round(seconds, 5),
            "image_tokens": held,
        }
    except torch.OutOfMemoryError as e:
        return {
            "status": "oom",
            "device": name,
            "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
            "peak_reserved_bytes": torch.cuda.max_memory_reserved(),
            "device_used_bytes": _nvml_used(dev),
            "detail": {"error": str(e).splitlines()[0][:800]},
            "image_tokens": held,
        }
