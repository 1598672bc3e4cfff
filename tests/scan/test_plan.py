"""Planning for the data: `check --data` names the step, rank and sample at which the bundled trainer's seeded
sampler first draws a row longer than the configuration fits, and that is the step at which the real trainer,
run with the same seed and plan, first draws it (its log's `longest_sample_tokens`)."""

import json
import random
from pathlib import Path

import pytest

pytest.importorskip("transformers")
from planner.cli import main
from planner.search.batching import first_too_long
from tests.trainer.helpers import launch, rows
from trainer.data import GlobalBatchSampler

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
DATA, TOK = str(EXAMPLES / "vlm-chat.jsonl"), str(EXAMPLES / "tokenizer")


def _token_data(path, n=64, seed=3):
    rng = random.Random(seed)
    lengths = [rng.randint(4, 60) for _ in range(n)]
    path.write_text(
        "".join(json.dumps({"input_ids": [rng.randrange(1, 200) for _ in range(k)]}) + "\n" for k in lengths)
    )
    return lengths


def test_the_named_step_and_rank_are_where_the_sampler_draws_the_sample():
    lengths = [10] * 97
    lengths[41] = 99
    first = first_too_long(lengths, 50, global_batch=8, world=4, seed=5)
    assert first["sample"] == 41 and first["tokens"] == 99
    sampler = GlobalBatchSampler(len(lengths), 8, 4, first["rank"], seed=5)
    drawn = [sampler.next() for _ in range(first["step"])]
    assert 41 in drawn[-1] and not any(41 in d for d in drawn[:-1])  # that rank, that step, not before
    assert first_too_long(lengths, 99, 8, 4, 5) is None


def test_the_real_trainer_first_draws_a_too_long_row_at_the_named_step(tmp_path):
    data = tmp_path / "d.jsonl"
    lengths = _token_data(data)
    limit = sorted(lengths)[-6]  # five rows are longer
    first = first_too_long(lengths, limit, global_batch=4, world=2, seed=0)
    assert first is not None and first["step"] > 1
    _, log = launch(
        tmp_path, "run", 2, micro_batch=1, grad_accum=2, seq_len=64, data=str(data), max_steps=first["step"]
    )
    longest = [r["longest_sample_tokens"] for r in rows(log)]
    assert longest[-1] == first["tokens"] > limit and all(x <= limit for x in longest[:-1]), (longest, first)


def test_check_and_suggest_plan_for_the_data(tmp_path, capsys):
    base = ["--model", "qwen2.5-vl-3b", "--gpu", "h20", "--gpus-per-node", "6", "--data", DATA, "--tokenizer", TOK]
    assert main(["check", *base, "--micro-batch", "4", "--checkpointing", "off", "--zero", "2", "--json"]) == 3
    out = json.loads(capsys.readouterr().out)
    d = out["data"]
    assert out["goal"]["seq_len"] == d["planned_seq_len"] == d["longest_tokens"] == 2844 and d["rows"] == 200
    assert 0 < d["fits_up_to_tokens"] < 2844
    first = d["first_too_long"]
    assert first["tokens"] > d["fits_up_to_tokens"] and first["step"] >= 1
    # 200 rows in micro-batches of 4 over 6 ranks: 50 batches, ceil(50 / 6) = 9 a rank (accelerate tops them up)
    epoch = {"steps": 9, "micro_batches_per_rank": 9, "last_step_micro_steps": 1, "micro_steps_per_step": 1}
    assert {k: d["epoch"][k] for k in epoch} == epoch
    assert d["epoch"]["hours"] == pytest.approx(9 * out["plan"]["step_time_s"] / 3600, abs=1e-3)
    assert main(["suggest", *base, "--global-batch", "24", "--max-length", "1024", "--json", "--top", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["goal"]["seq_len"] == 1024 and out["data"]["truncated_rows"] > 0


@pytest.mark.parametrize(
    "flags,needle",
    [
        ([], "give --seq-len N, or --data FILE --tokenizer DIR"),
        (["--seq-len", "512", "--data", DATA], "give --seq-len or --data, not both"),
        (["--data", DATA], "holds messages rows: give --tokenizer DIR"),
        (
            ["--data", DATA, "--tokenizer", TOK, "--model", "qwen2.5-0.5b"],
            "has images (up to 2,691 tokens a row) and model 'qwen2.5-0.5b' has no vision tower",
        ),
    ],
)
def test_data_flags_refused_in_one_line(capsys, flags, needle):
    assert main(["check", "--model", "qwen2.5-vl-3b", "--gpu", "h20", "--micro-batch", "1", *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
