"""Live-bytes tracker: every tensor storage created inside the context is counted from creation until
its last tensor dies, rounded as the CUDA caching allocator rounds (512 B), and the peak is kept.

It sees storages created by aten ops under a TorchDispatchMode (after autograd, so backward's
tensors are seen too) and frees them through weakref finalizers, which fire only when the
TensorImpl dies (torch keeps a tensor's Python object alive while C++, e.g. autograd's saved
variables, still holds it). Storages are keyed by their StorageImpl, so fake tensors (which have
no data pointer) are tracked like real ones. Storages created before the context are not counted
unless registered with `add_existing`.

Attribution: every storage carries a tag (category, module). A storage created while a module's
forward runs is an activation of that module (recomputation under activation checkpointing runs
the forward again and is attributed the same way: no module stack is assumed to be balanced
once); one created elsewhere is a temporary of the current phase; callers retag gradients
(`retag`, e.g. from a post-accumulate-grad hook) and optimizer states. The caller names the
current segment of the step (`segment`); the tracker keeps each segment's peak and the live bytes
per tag at that peak, which is what the sim probe extrapolates over layers.
"""

from __future__ import annotations

import weakref
from collections import defaultdict

import torch
from torch.utils._python_dispatch import TorchDispatchMode

CUDA_ALLOCATOR_ROUND = 512  # c10 CUDACachingAllocator kMinBlockSize
CATEGORIES = ("params", "grads", "optimizer", "activations", "temporaries")


def rounded_bytes(nbytes: int) -> int:
    """Bytes the CUDA caching allocator hands out for a request of nbytes."""
    return -(-nbytes // CUDA_ALLOCATOR_ROUND) * CUDA_ALLOCATOR_ROUND if nbytes else 0


_ACTIVE: list[LiveBytes] = []  # trackers entered, innermost last


def _key(t: torch.Tensor) -> int:
    return t.untyped_storage()._cdata


class LiveBytes(TorchDispatchMode):
    """`with LiveBytes() as t: ...` then t.peak, t.live (bytes, allocator-rounded), t.segments."""

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self.segment: object = None
        self.segments: dict[object, tuple[int, dict]] = {}  # segment -> (peak, live bytes per tag)
        self.modules: list[str] = []  # names of the module forwards running
        self._refs: dict[int, int] = {}  # storage key -> live tensors referencing it
        self._sizes: dict[int, int] = {}  # storage key -> rounded bytes
        self._tags: dict[int, tuple[str, str]] = {}
        self._by_tag: dict[tuple[str, str], int] = defaultdict(int)
        self.phase = "forward"

    def __enter__(self):
        _ACTIVE.append(self)
        return super().__enter__()

    def __exit__(self, *exc):
        _ACTIVE.remove(self)
        return super().__exit__(*exc)

    # -- accounting -------------------------------------------------------------------------
    def _release(self, key: int) -> None:
        self._refs[key] -= 1
        if self._refs[key] == 0:
            del self._refs[key]
            size = self._sizes.pop(key)
            self.live -= size
            self._by_tag[self._tags.pop(key)] -= size

    def _note_peak(self) -> None:
        self.peak = max(self.peak, self.live)
        best = self.segments.get(self.segment)
        if best is None or self.live > best[0]:
            self.segments[self.segment] = (self.live, {k: v for k, v in self._by_tag.items() if v})

    def _current_tag(self) -> tuple[str, str]:
        if self.modules:
            return ("activations", self.modules[-1])
        return ("temporaries", self.phase)

    def _track(self, t: torch.Tensor, tag: tuple[str, str] | None, skip: set[int] = frozenset()) -> None:
        storage = t.untyped_storage()
        key = storage._cdata
        if key not in self._refs:
            if storage.nbytes() == 0 or key in skip:
                return  # empty, or an in-place result on a storage made before the context
            self._sizes[key] = rounded_bytes(storage.nbytes())
            self._refs[key] = 0
            self._tags[key] = tag or self._current_tag()
            self._by_tag[self._tags[key]] += self._sizes[key]
            self.live += self._sizes[key]
            self._note_peak()
        self._refs[key] += 1
        weakref.finalize(t, self._release, key)

    # -- caller API -------------------------------------------------------------------------
    def add_existing(self, tensors, category: str) -> None:
        """Count storages made before the context (parameters, buffers) under `category`."""
        for t in tensors:
            self._track(t, (category, ""))

    def retag(self, t: torch.Tensor, category: str, module: str = "") -> None:
        """Move a live storage to another category (a gradient, an optimizer state)."""
        key = _key(t)
        if key in self._tags:
            size = self._sizes[key]
            self._by_tag[self._tags[key]] -= size
            self._tags[key] = (category, module)
            self._by_tag[self._tags[key]] += size

    def set_segment(self, segment: object) -> None:
        self.segment = segment
        self._note_peak()

    def reset_peaks(self) -> None:
        """Forget peaks so far (after warm-up steps): the next peaks are steady-state ones."""
        self.peak = self.live
        self.segments = {}
        self._note_peak()

    def live_by_module(self, category: str = "activations") -> dict[str, int]:
        """Live bytes of one category, by the module that created them."""
        return {mod: v for (cat, mod), v in self._by_tag.items() if cat == category and v}

    def by_category(self, tags: dict | None = None) -> dict[str, int]:
        out = dict.fromkeys(CATEGORIES, 0)
        for (cat, _), v in (self._by_tag if tags is None else tags).items():
            out[cat] += v
        return out

    # -- dispatch ---------------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        # every op's inputs, not only those whose schema says a result aliases one: _unsafe_view and unsafe_split
        # return views of their input unannotated (DeepSpeed's offloaded ZeRO-2 step counted 4.5 MB of them as new)
        kwargs = kwargs or {}
        inputs = {_key(x) for x in _tensors((args, kwargs)) if not x.is_meta}
        out = func(*args, **kwargs)
        for x in _tensors(out):
            if not x.is_meta:
                self._track(x, None, inputs)
        return out


def _tensors(tree) -> list[torch.Tensor]:
    """The tensors in an aten op's arguments or results: what tree_flatten finds there (aten schemas hold
    tensors, lists and tuples of them, and scalars), without the pytree machinery, which took about a tenth
    of a sim's time when it ran on every op."""
    if isinstance(tree, torch.Tensor):
        return [tree]
    out, todo = [], [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, torch.Tensor):
            out.append(node)
        elif isinstance(node, (list, tuple)):
            todo.extend(reversed(node))
        elif isinstance(node, dict):
            todo.extend(reversed(node.values()))
    return out


def second_step_peak(model: torch.nn.Module, loss_of, opt) -> int:
    """Peak live bytes of the second of two optimizer steps (the first makes the optimizer's states), the model's
    parameters and buffers counted from the start; `loss_of()`: a step's loss. The task heads' and the value head's
    CPU steps (tests/probes/test_task_heads.py, test_embedding_head.py, probes/lf_valuehead.py)."""
    t = LiveBytes()
    t.add_existing(list(model.parameters()) + list(model.buffers()), "params")
    with t:
        for step in range(2):
            if step == 1:
                t.reset_peaks()
            loss = loss_of()
            loss.backward()
            del loss
            opt.step()
            opt.zero_grad(set_to_none=True)
    return t.peak


def module_stack_hooks(tracker: LiveBytes, model: torch.nn.Module) -> list:
    """Keep tracker.modules = the named modules whose forward is running (innermost last)."""
    names = {id(m): n or "(model)" for n, m in model.named_modules()}

    def pre(mod, _args):
        if id(mod) in names:
            tracker.modules.append(names[id(mod)])

    def post(mod, _args, _out):
        if id(mod) in names and tracker.modules and tracker.modules[-1] == names[id(mod)]:
            tracker.modules.pop()

    from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

    return [register_module_forward_pre_hook(pre), register_module_forward_hook(post)]


class RecomputeGuard:
    """Context for activation checkpointing's recomputation (checkpoint's context_fn): torch stops
    a recomputation early once it has what backward needs, so the module forwards it entered never
    return; this puts the tracker's module stack back as it was."""

    def __enter__(self):
        self.tracker = _ACTIVE[-1] if _ACTIVE else None
        self.depth = len(self.tracker.modules) if self.tracker else 0
        return self

    def __exit__(self, *exc):
        if self.tracker is not None:
            del self.tracker.modules[self.depth :]
