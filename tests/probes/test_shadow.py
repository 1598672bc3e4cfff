"""probes.shadow: fake tensors that keep small real values, so that a VLM's data-dependent shapes trace."""

import pytest

torch = pytest.importorskip("torch")
from torch._subclasses.fake_tensor import DynamicOutputShapeException, FakeTensor

from probes.shadow import ShadowFakeMode


def test_values_flow_through_small_integer_ops_and_data_dependent_shapes_come_from_them():
    mode = ShadowFakeMode()
    with mode:
        grid = mode.share(torch.tensor([[1, 4, 6], [1, 2, 2]]))
        sizes = grid[:, 1] * grid[:, 2]
        assert sizes.tolist() == [24, 4]  # .tolist() reads the values
        seq = torch.repeat_interleave(sizes, grid[:, 0])  # output shape decided by data
        assert isinstance(seq, FakeTensor) and seq.tolist() == [24, 4]
        kept = torch.arange(10)[torch.arange(10) % 3 == 0]  # a boolean index on values: its shape is known
        assert kept.shape == (4,) and kept.tolist() == [0, 3, 6, 9]


def test_big_tensors_stay_fake_and_are_indexed_by_a_mask_with_values():
    mode = ShadowFakeMode(limit=1000)
    with mode:
        hidden = torch.randn(2, 50, 64)  # 6,400 elements: above the limit, no values kept
        assert hidden not in mode.real
        mask = mode.share(torch.zeros(2, 50, dtype=torch.bool))
        mask[:, 5:12] = True  # written from values: it keeps them
        picked = hidden[mask, :]
        assert isinstance(picked, FakeTensor) and picked.shape == (14, 64)
        hidden[mask, :] = picked * 2  # the in-place write takes the mask's positions too
        with pytest.raises(DynamicOutputShapeException):  # a mask made from values it does not have
            hidden[hidden.sum(-1) > 0]


def test_a_tensor_written_from_data_without_values_loses_its_values():
    mode = ShadowFakeMode(limit=1000)
    with mode:
        ids = mode.share(torch.arange(8))
        assert ids.tolist() == list(range(8))
        ids.copy_(torch.randn(4, 1000).sum(0)[:8].long())  # the source has no values
        assert ids not in mode.real
