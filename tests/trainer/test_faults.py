"""Issue 20, the trainer's faults: resume falls back to the newest intact checkpoint, refuses another run's,
keeps one log row per step, saves at --max-steps, refuses --max-steps behind the checkpoint; training data
is checked line by line before anything is written or launched. `planner train` in this process, one rank."""

import json

import pytest

pytest.importorskip("transformers")
from planner.cli import main
from tests.trainer.helpers import rows

BASE = [
    "train",
    "--model",
    "debug-llama",
    "--micro-batch",
    "2",
    "--grad-accum",
    "1",
    "--seq-len",
    "32",
    "--precision",
    "fp32",
    "--device",
    "cpu",
]


def _train(tmp_path, capsys, *extra) -> tuple[int, str]:
    capsys.readouterr()
    code = main([*BASE, "--save-dir", str(tmp_path / "ck"), "--log", str(tmp_path / "m.jsonl"), *extra])
    return code, capsys.readouterr().err


def test_resume_falls_back_past_a_damaged_checkpoint_on_the_same_trajectory(tmp_path, capsys):
    ref = tmp_path / "ref"
    ref.mkdir()
    assert _train(ref, capsys, "--max-steps", "8")[0] == 0
    assert _train(tmp_path, capsys, "--max-steps", "6", "--save-every", "4")[0] == 0
    ck = tmp_path / "ck"
    assert sorted(p.name for p in ck.glob("step-*")) == ["step-4", "step-6"]  # step 6: saved at --max-steps
    assert (ck / "latest").read_text().strip() == "step-6"
    state = ck / "step-6" / "state.pt"
    state.write_bytes(state.read_bytes()[: state.stat().st_size // 2])  # a truncated latest
    code, err = _train(tmp_path, capsys, "--max-steps", "8", "--resume")
    assert code == 0, err
    assert "skipped step-6: state.pt has" in err and "resuming from step-4" in err
    got = rows(tmp_path / "m.jsonl")
    assert [r["step"] for r in got] == list(range(1, 9))  # steps 5 and 6 trained again, logged once
    assert [r["loss"] for r in got] == pytest.approx([r["loss"] for r in rows(ref / "m.jsonl")], rel=1e-12)


def test_resume_refuses_another_run_and_max_steps_behind_its_checkpoint(tmp_path, capsys):
    assert _train(tmp_path, capsys, "--max-steps", "2")[0] == 0
    before = sorted(p.name for p in tmp_path.rglob("*"))
    for flags, needle in (
        (["--max-steps", "4", "--resume", "--model", "debug-gpt2"], "model 'debug-llama' there, 'debug-gpt2' here"),
        (["--max-steps", "4", "--resume", "--precision", "bf16"], "precision 'fp32' there, 'bf16' here"),
        (["--max-steps", "4", "--resume", "--zero", "2"], "zero 0 there, 2 here"),
        (["--max-steps", "4", "--resume", "--grad-accum", "2"], "global_batch 2 there, 4 here"),
        (["--max-steps", "2", "--resume"], "--max-steps 2: the checkpoint"),
    ):
        args = [*BASE, "--save-dir", str(tmp_path / "ck"), "--log", str(tmp_path / "m.jsonl"), *flags]  # last wins
        capsys.readouterr()
        assert main(args) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0], err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing written, nothing launched


@pytest.mark.parametrize(
    "content,needle",
    [
        ("", "no samples (the file is empty)"),
        ('{"input_ids": [1, 2, 3]}\n{"input_ids": [1, 2\n', "line 2: not JSON"),
        (
            '{"input_ids": [1, 2, 3]}\n\n{"input_ids": [4, 99999]}\n',
            "line 3: token id 99999 is outside the model's vocabulary",
        ),
        ('{"input_ids": [5]}\n', "line 1: 1 token(s); a sample needs at least 2"),
        ('{"input_ids": []}\n', "line 1: 0 token(s)"),
        ('{"text": "hello there"}\n', "holds text (line 1): give --tokenizer"),
        ('{"input_ids": [1, 2]}\n{"text": "x"}\n', "line 2: has 'text' where the lines before have 'input_ids'"),
        ("[1, 2, 3]\n", "line 1: expected a JSON object"),
        ('{"ids": [1, 2]}\n', "line 1: expected an object with 'input_ids'"),
        ('{"input_ids": [1, true]}\n', "line 1: 'input_ids' is not a list of integers"),
    ],
)
def test_bad_training_data_is_one_line_before_anything_runs(tmp_path, capsys, monkeypatch, content, needle):
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "d.jsonl"
    data.write_text(content)
    assert main([*BASE, "--gpus-per-node", "2", "--data", str(data), "--save-dir", str(tmp_path / "ck")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(data) in err[0] and needle in err[0], err
    assert list(tmp_path.iterdir()) == [data]  # no run file, no checkpoint folder, nothing launched


def test_good_token_data_trains(tmp_path, capsys):
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"input_ids": list(range(i, i + 10))}) + "\n" for i in range(8)))
    code, err = _train(tmp_path, capsys, "--max-steps", "2", "--data", str(data))
    assert code == 0, err
    assert [r["step"] for r in rows(tmp_path / "m.jsonl")] == [1, 2]
