"""Peak bytes the CPU allocator hands out during a call, from torch.profiler's allocation events: unlike the
live-bytes tracker (probes.tracker), which sees the storages aten ops return, this sees the buffers a kernel allocates
inside itself too (torch.linalg.svd's working copy of its input, LAPACK's workspace)."""

from __future__ import annotations

from collections.abc import Callable


def cpu_peak_bytes(fn: Callable[[], object]) -> tuple[int, int]:
    """(peak, end): the most bytes allocated above the start while fn() ran, and those still allocated at its end
    (what it returns or keeps)."""
    from torch._C._profiler import _EventType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as p:
        fn()
    events, stack = [], list(p.profiler.kineto_results.experimental_event_tree())
    while stack:
        e = stack.pop()
        if e.tag == _EventType.Allocation:
            events.append((e.start_time_ns, e.extra_fields.alloc_size))
        stack.extend(e.children)
    live = peak = 0
    for _, size in sorted(events):
        live += size
        peak = max(peak, live)
    return peak, live
