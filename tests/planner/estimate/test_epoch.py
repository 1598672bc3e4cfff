"""An epoch as HF's Trainer cuts it (planner.estimate.epoch), against the real parts: accelerate's sharded
dataloader on every rank (prepare_data_loader, as the Trainer prepares its train dataloader) and the Trainer's own
set_initial_training_values for the steps per epoch."""

from types import SimpleNamespace

import pytest

from planner.estimate.epoch import Epoch

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")
pytest.importorskip("transformers")

SHAPES = [(1000, 8, 4, 8), (1000, 8, 4, 1), (1001, 3, 5, 4), (37, 4, 2, 8), (4, 8, 1, 2), (1024, 32, 4, 8)]


def _rank_batches(rows: int, ranks: int, micro: int, drop_last: bool) -> list[int]:
    from accelerate.data_loader import prepare_data_loader
    from torch.utils.data import DataLoader

    out = []
    for r in range(ranks):
        dl = DataLoader(list(range(rows)), batch_size=micro, shuffle=True, drop_last=drop_last)
        shard = prepare_data_loader(dl, num_processes=ranks, process_index=r, put_on_device=False)
        assert len(shard) == sum(1 for _ in shard)
        out.append(len(shard))
    return out


def _trainer_steps(micro_batches: int, accum: int) -> tuple[int, int]:
    """(num_update_steps_per_epoch, steps_in_epoch) from transformers' own set_initial_training_values."""
    from transformers import Trainer, TrainingArguments

    args = TrainingArguments(output_dir="/tmp/memplan-epoch", gradient_accumulation_steps=accum, report_to=[])
    me = SimpleNamespace(get_total_train_batch_size=lambda a: 1, get_sp_size=lambda: 1, num_examples=lambda d: 1)
    values = Trainer.set_initial_training_values(me, args, list(range(micro_batches)))
    return values[1], values[5]


@pytest.mark.parametrize("rows,ranks,micro,accum", SHAPES)
@pytest.mark.parametrize("drop_last", [False, True])
def test_the_epoch_is_what_accelerate_and_the_trainer_make_of_it(rows, ranks, micro, accum, drop_last):
    e = Epoch(rows, ranks, micro, accum, drop_last)
    batches = _rank_batches(rows, ranks, micro, drop_last)
    assert batches == [e.micro_batches_per_rank] * ranks
    if not e.micro_batches_per_rank:
        return
    steps, in_epoch = _trainer_steps(e.micro_batches_per_rank, accum)
    assert (steps, in_epoch) == (e.steps, e.micro_batches_per_rank)
    assert 1 <= e.last_step_micro_steps <= accum
    assert (e.steps - 1) * accum + e.last_step_micro_steps == e.micro_batches_per_rank


def test_one_global_batch_split_finer_keeps_the_steps_but_not_the_last_step():
    """1,000 rows on 8 ranks at a global batch of 32: 4 x 1 and 1 x 4 both make 32 steps; at 4 x 1 the 250 batches
    are topped up to 32 a rank (even_batches), at 1 x 4 each rank's 125 micro-batches end one micro-step into the
    last step."""
    a, b = Epoch(1000, 8, 4, 1), Epoch(1000, 8, 1, 4)
    assert (a.steps, b.steps) == (32, 32)
    assert (a.last_step_micro_steps, b.last_step_micro_steps) == (1, 1)
    assert b.seconds(2.0) == pytest.approx(31 * 2.0 + 0.5)


def test_an_empty_epoch_is_refused_in_one_line():
    with pytest.raises(ValueError, match="rows 0: an epoch needs at least 1"):
        Epoch(0, 8, 1, 1)
