"""Fake tensors that keep their real values where those are small: the sim's mode for VLM steps.

A VLM's forward reads data to decide shapes: the image placeholders' count in `input_ids`, the patch grid's
`tolist()`, `repeat_interleave` over it, per-image splits of the tower's attention. Plain fake tensors have no
values, so those ops raise. transformers 5 computes them from small integer tensors (the ids, `image_grid_thw`,
`cu_seqlens`: transformers/vision_utils.py), so this mode keeps, beside each fake tensor made from real data,
that real tensor ("its shadow"), and runs an op for real on the shadows when every tensor it reads has one and
its output is small (at most `limit` elements). A data-dependent op whose inputs all have shadows takes its
output shape and scalars from the real run; anything else stays fake, as in FakeTensorMode, so the big
tensors (activations, weights, pixels) never hold memory.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensor,
    FakeTensorMode,
)
from torch.utils._pytree import tree_flatten, tree_unflatten
from torch.utils.weak import WeakTensorKeyDictionary

SHADOW_LIMIT = 1 << 26  # elements: ids, grids, sequence boundaries and b x s masks, never activations


aten = torch.ops.aten
INDEX_OPS = (aten.index.Tensor, aten.index_put.default, aten.index_put_.default, aten._unsafe_index_put.default)
# uninitialized memory has no values to keep (and a decomposition may fill it from data without values)
EMPTY = (aten.empty.memory_format, aten.empty_strided.default, aten.empty_like.default, aten.new_empty.default)


class ShadowFakeMode(FakeTensorMode):
    """Enter it with `masks_as_run()` as well, so that transformers decides its masks from the values."""

    def __init__(self, limit: int = SHADOW_LIMIT) -> None:
        super().__init__(allow_non_fake_inputs=True)
        self.limit = limit
        self.real = WeakTensorKeyDictionary()  # fake tensor -> its real values

    def share(self, real: torch.Tensor) -> torch.Tensor:
        """A fake tensor of `real`, keeping its values."""
        fake = self.from_tensor(real)
        self.real[fake] = real
        return fake

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        shadowed = self._shadowed(args) and self._shadowed(kwargs.values())
        try:
            out = super().__torch_dispatch__(func, types, args, kwargs)
        except (DataDependentOutputException, DynamicOutputShapeException):
            positions = self._positions(args[1]) if func in INDEX_OPS and not shadowed else None
            if positions is not None and len(positions) > len(args[1]):  # big[mask with values]: at its positions
                return self.__torch_dispatch__(func, types, (args[0], positions, *args[2:]), kwargs)
            if not shadowed:
                raise
            real, spec = tree_flatten(self._run(func, args, kwargs))
            return tree_unflatten([self.share(r) if isinstance(r, torch.Tensor) else r for r in real], spec)
        keep = shadowed and func not in EMPTY
        outs = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)] if keep else ()
        if outs and all(o.numel() <= self.limit for o in outs):
            real = (r for r in tree_flatten(self._run(func, args, kwargs))[0] if isinstance(r, torch.Tensor))
            for fake, r in zip(outs, real):
                self.real[fake] = r
        elif func._schema.is_mutable:  # a tensor written from data without values has lost its values
            for t in _written(func, args, kwargs):
                self.real.pop(t, None)
        return out

    def _shadowed(self, values) -> bool:
        """Every fake tensor among the values (and in their lists) has its real values."""
        for v in values:
            if isinstance(v, FakeTensor):
                if v not in self.real:
                    return False
            elif isinstance(v, (list, tuple)) and not self._shadowed(v):
                return False
        return True

    def _positions(self, indices: list) -> list:
        """Boolean masks with values among an index op's indices as the integer positions they select."""
        out = []
        for i in indices:
            if isinstance(i, torch.Tensor) and i.dtype == torch.bool and i in self.real:
                out.extend(self.share(p) for p in self.real[i].nonzero().unbind(1))
            else:
                out.append(i)
        return out

    def _run(self, func, args, kwargs):
        flat, spec = tree_flatten((args, kwargs))
        args, kwargs = tree_unflatten([self.real[x] if isinstance(x, FakeTensor) else x for x in flat], spec)
        return func(*args, **kwargs)


def _written(func, args, kwargs) -> list:
    """The tensors an op writes to (its schema's mutable arguments)."""
    out = []
    for i, a in enumerate(func._schema.arguments):
        if a.alias_info is not None and a.alias_info.is_write:
            v = args[i] if i < len(args) else kwargs.get(a.name)
            out.extend(t for t in tree_flatten(v)[0] if isinstance(t, FakeTensor))
    return out


@contextmanager
def masks_as_run(mode: ShadowFakeMode):
    """transformers skips an all-ones padding mask under SDPA (masking_utils: `padding_mask.all()`), unless the mask is
    being traced, and it takes every fake tensor for one (import_utils.is_tracing). A mask whose values the mode holds
    is decided as a real run decides it: Idefics3's tower, whose patch mask is all ones, then attends without a mask,
    as on a GPU, instead of saving the probabilities of the math kernel a mask sends SDPA to."""
    from transformers import masking_utils

    traced = masking_utils.is_tracing
    masking_utils.is_tracing = lambda tensor=None: traced(tensor) and not (tensor is not None and tensor in mode.real)
    try:
        yield
    finally:
        masking_utils.is_tracing = traced
