"""Live-bytes tracker: every tensor storage created inside the context is counted from creation until
its last tensor dies, rounded as the CUDA caching allocator rounds (512 B), and the peak is kept.

It sees storages created by aten ops under a TorchDispatchMode (after autograd, so backward's
tensors are seen too) and frees them through weakref finalizers, which fire only when the
TensorImpl dies (torch keeps a tensor's Python object alive while C++, e.g. autograd's saved
variables, still holds it). Storages created before the context are not counted.
"""
from __future__ import annotations

import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

CUDA_ALLOCATOR_ROUND = 512  # c10 CUDACachingAllocator kMinBlockSize


def rounded_bytes(nbytes: int) -> int:
    """Bytes the CUDA caching allocator hands out for a request of nbytes."""
    return -(-nbytes // CUDA_ALLOCATOR_ROUND) * CUDA_ALLOCATOR_ROUND if nbytes else 0


class LiveBytes(TorchDispatchMode):
    """`with LiveBytes() as t: ...` then t.peak, t.live (bytes, allocator-rounded)."""

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._refs: dict[int, int] = {}     # storage key -> live tensors referencing it
        self._sizes: dict[int, int] = {}    # storage key -> rounded bytes

    def _release(self, key: int) -> None:
        self._refs[key] -= 1
        if self._refs[key] == 0:
            del self._refs[key]
            self.live -= self._sizes.pop(key)

    @staticmethod
    def _key(t: torch.Tensor) -> int:
        st = t.untyped_storage()
        return st.data_ptr() or id(st)

    def _track(self, t: torch.Tensor, input_keys: set[int]) -> None:
        key = self._key(t)
        if key not in self._refs:
            if t.untyped_storage().nbytes() == 0 or key in input_keys:
                return  # empty, or an in-place result on a storage made before the context
            self._sizes[key] = rounded_bytes(t.untyped_storage().nbytes())
            self._refs[key] = 0
            self.live += self._sizes[key]
            self.peak = max(self.peak, self.live)
        self._refs[key] += 1
        weakref.finalize(t, self._release, key)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        input_keys = {self._key(x) for x in tree_flatten((args, kwargs or {}))[0]
                      if isinstance(x, torch.Tensor) and not x.is_meta}
        out = func(*args, **(kwargs or {}))
        for x in tree_flatten(out)[0]:
            if isinstance(x, torch.Tensor) and not x.is_meta:
                self._track(x, input_keys)
        return out
