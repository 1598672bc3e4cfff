"""The step's allocation trace at the model's real depth (the sim's fake-tensor step, every storage's birth and death
in order) and what PyTorch's caching allocator reserves for it (probes.allocator)."""

from __future__ import annotations

from contextlib import nullcontext

from probes.allocator import Allocator, replay
from probes.shadow import ShadowFakeMode, masks_as_run
from probes.sim import fake_grouped_mm, fake_model
from probes.step import Case, inputs, train_steps, vlm_inputs, vocab_of
from probes.tracker import LiveBytes
from recipe import text_layers


class RecordingLiveBytes(LiveBytes):
    """The live-bytes tracker that also keeps the order of births ("a", key, bytes) and deaths ("f", key)."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple] = []

    def _track(self, t, tag, skip=frozenset()) -> None:
        from probes.tracker import _key

        key = _key(t)
        new = key not in self._refs
        super()._track(t, tag, skip)
        if new and key in self._refs:
            self.events.append(("a", key, self._sizes[key]))

    def _release(self, key: int) -> None:
        super()._release(key)
        if key not in self._refs:
            self.events.append(("f", key))


def step_events(case: Case, steps: int = 4, paths: str = "cuda") -> list[tuple]:
    """The trace of `steps` optimizer steps at full depth: the parameters first (in the order the model holds them,
    as its build allocates them), the batch, then the steps (the cuda probe runs one warm-up and three measured)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    layers = text_layers(case.config)
    mode = ShadowFakeMode() if case.image_tokens else FakeTensorMode(allow_non_fake_inputs=True)
    model = fake_model(case, layers, mode, paths)
    real, _ = vlm_inputs(case, model) if case.image_tokens else (None, 0)
    masks = masks_as_run(mode) if real else nullcontext()
    tracker = RecordingLiveBytes()
    tracker.add_existing(list(model.parameters()) + list(model.buffers()), "params")
    with mode, masks, fake_grouped_mm():
        vocab = vocab_of(model)
        batch = {k: mode.share(v) for k, v in real.items()} if real else inputs(case, vocab)
        with tracker:
            train_steps(case, model, tracker, batch, steps=steps, paths=paths, n_layers=layers)
    return tracker.events


def reserved(case: Case, limit_bytes: int | None = None, steps: int = 4) -> Allocator:
    """The caching allocator after the step's trace: peak_reserved, peak_allocated, oom_at (None: it ran)."""
    return replay(step_events(case, steps), limit_bytes)


def replay_detail(config: dict, knobs, shapes, limit_bytes: int | None) -> dict:
    """A probe record's `replay` detail: the step at the plan's shapes through the caching allocator, capped at what
    the card leaves it (planner.estimate.overheads.allocator_limit_bytes)."""
    case = Case(config, knobs, shapes.micro_batch, shapes.grad_accum, shapes.seq_len, shapes.image_tokens)
    a = reserved(case, limit_bytes)
    return {"limit_bytes": limit_bytes, "allocated": a.peak_allocated, "reserved": a.peak_reserved, "oom_at": a.oom_at}
