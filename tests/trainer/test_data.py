"""The global-batch sampler and the loss-token count."""

import pytest

from trainer.data import GlobalBatchSampler, micro_batches


@pytest.mark.parametrize("n,global_batch", [(103, 8), (64, 8), (5, 4)])
def test_every_index_once_per_epoch_across_ranks(n, global_batch):
    ranks = [GlobalBatchSampler(n, global_batch, world=2, rank=r, seed=3) for r in range(2)]
    seen = []
    for _ in range(ranks[0].batches_per_epoch()):
        for s in ranks:
            seen += s.next()
    assert sorted(seen) == list(range(n))  # each exactly once, the tail included
    assert all(s.pos.epoch == 1 and s.pos.batch == 0 for s in ranks)
    again = [i for _ in range(ranks[0].batches_per_epoch()) for s in ranks for i in s.next()]
    assert sorted(again) == list(range(n)) and again != seen  # a new permutation each epoch


def test_micro_batches_keep_order_and_count():
    assert micro_batches([5, 6, 7], 2, 3) == [[5, 6], [7], []]  # a tail: the last micro-step is empty


def test_collate_pads_and_counts_targets():
    pytest.importorskip("torch")
    from trainer.data import collate, target_tokens

    b = collate([[1, 2, 3], [4, 5]], seq_len=8)
    assert b["input_ids"].tolist() == [[1, 2, 3], [4, 5, 0]]
    assert b["labels"].tolist() == [[1, 2, 3], [4, 5, -100]]
    assert target_tokens(b) == 3  # 2 + 1 predicted tokens
