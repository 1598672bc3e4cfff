"""HF's optim default under a TRL line follows a transformers pin beside the user's files (planner.frameworks.hf
.reader_optim: adamw_torch through 4.53, fused from 4.54), over the line's own transformers (Release.transformers)."""

from pathlib import Path

import pytest

from planner import intake


def _optimizer(tmp_path: Path, pins: str):
    (tmp_path / "requirements.txt").write_text(pins)
    (tmp_path / "run.sh").write_text("trl sft --model_name_or_path Qwen/Qwen2.5-0.5B-Instruct --output_dir out\n")
    r = intake.read([str(tmp_path / "run.sh"), str(tmp_path / "requirements.txt")])
    return next(s for s in r.settings if s.field == "optimizer")


@pytest.mark.parametrize(
    ("pins", "value", "said"),
    [
        ("trl==0.22.2\ntransformers==4.51.3\n", "adamw", "transformers==4.51.3"),  # the line runs 4.56.2: fused
        ("trl==0.19.1\ntransformers==4.56.2\n", "adamw-fused", "transformers==4.56.2"),  # the line runs 4.53.1
        ("trl==0.19.1\n", "adamw", "transformers 4.53.1"),  # no pin: the line's own
    ],
)
def test_a_transformers_pin_decides_the_optim_default(tmp_path, pins, value, said):
    s = _optimizer(tmp_path, pins)
    assert s.value == value and said in s.source, s.source
