"""Peak bytes the CPU allocator hands out during a call, from torch.profiler's allocation events: unlike the
live-bytes tracker (probes.tracker), which sees the storages aten ops return, this sees the buffers a kernel allocates
inside itself too (torch.linalg.svd's working copy of its input, LAPACK's workspace). The profiler sees no free of a
block allocated before it started, so whatever the measured call frees must be allocated under it: `before` runs
first, under the profiler, outside the window measured."""

from __future__ import annotations

from collections.abc import Callable

WINDOW = "memplan.allocations.window"


def cpu_peak_bytes(fn: Callable[[], object], before: Callable[[], object] | None = None) -> tuple[int, int]:
    """(peak, end) of fn(): the most bytes allocated above those live when it started, and those still allocated at its
    end (what it returns or keeps); `before()` runs first, under the same profiler."""
    import torch
    from torch._C._profiler import _EventType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as p:
        if before is not None:
            before()
        with torch.profiler.record_function(WINDOW):
            fn()
    events, window, stack = [], None, list(p.profiler.kineto_results.experimental_event_tree())
    while stack:
        e = stack.pop()
        if e.tag == _EventType.Allocation:
            events.append((e.start_time_ns, e.extra_fields.alloc_size))
        elif e.name == WINDOW:
            window = (e.start_time_ns, e.end_time_ns)
        stack.extend(e.children)
    live, base, peak = 0, None, 0
    for time, size in sorted(events):
        if base is None and time >= window[0]:
            base = peak = live
        live += size
        if base is not None and time <= window[1]:
            peak = max(peak, live)
    base = live if base is None else base
    return peak - base, live - base
