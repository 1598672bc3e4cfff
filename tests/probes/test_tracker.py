"""The live-bytes tracker on known allocations."""

import pytest

torch = pytest.importorskip("torch")
from probes.tracker import LiveBytes, rounded_bytes


def test_rounding_like_the_cuda_caching_allocator():
    assert [rounded_bytes(n) for n in (0, 1, 512, 513, 4096)] == [0, 512, 512, 1024, 4096]


def test_new_tensor_counted_until_freed_and_views_once():
    with LiveBytes() as t:
        a = torch.empty(1000, dtype=torch.float32)  # 4000 B -> 4096
        v = a.view(10, 100)  # same storage
        b = torch.ones(10)  # 40 B -> 512
        assert t.live == 4096 + 512
        del a
        assert t.live == 4096 + 512  # the view keeps the storage alive
        del v, b
        assert t.live == 0
    assert t.peak == 4096 + 512


def test_in_place_results_on_earlier_storages_are_not_counted():
    x = torch.zeros(1024)
    with LiveBytes() as t:
        x.add_(1)
        y = x * 2
    assert t.peak == rounded_bytes(4096) and y.numel() == 1024


def test_autograd_saved_tensors_stay_counted_until_backward():
    w = torch.randn(256, 256, requires_grad=True)
    with LiveBytes() as t:
        h = torch.tanh(torch.randn(64, 256) @ w)  # input, matmul output (freed), tanh output (saved)
        del h  # the graph is gone with h: saved tensors freed
    assert t.live == 0 and t.peak >= 3 * 64 * 256 * 4
