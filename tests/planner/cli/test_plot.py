"""`suggest --plot` and `check --plot` write a PNG of the two memory charts."""

import json

import pytest

pytest.importorskip("matplotlib")
from PIL import Image

from planner.cli import main


def _assert_chart_png(path):
    img = Image.open(path).convert("RGB")
    assert img.size == (1400, 550)  # figsize 14 x 5.5 in at 100 dpi
    colors = img.getcolors(maxcolors=1 << 20)
    assert len(colors) > 100  # bars, lines, text: not a blank canvas
    white = max(n for n, c in colors if c == (255, 255, 255))
    assert white < 0.9 * img.size[0] * img.size[1]
    red = sum(n for n, c in colors if c[0] > 150 and c[1] < 110 and c[2] < 110)
    assert red > 500  # the capacity line (and the optimizer term)


def test_suggest_plot(tmp_path, capsys):
    out = tmp_path / "plans.png"
    rc = main(
        [
            "suggest",
            "--model",
            "qwen2.5-7b",
            "--gpu",
            "a100-80gb",
            "--gpus-per-node",
            "4",
            "--global-batch",
            "64",
            "--seq-len",
            "2048",
            "--top",
            "5",
            "--plot",
            str(out),
            "--json",
        ]
    )
    assert rc == 0 and json.loads(capsys.readouterr().out)["plot"] == str(out)
    _assert_chart_png(out)


def test_check_plot_when_it_does_not_fit(tmp_path, capsys):
    out = tmp_path / "check.png"
    rc = main(
        [
            "check",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "rtx4090",
            "--micro-batch",
            "2",
            "--grad-accum",
            "4",
            "--seq-len",
            "2048",
            "--precision",
            "bf16",
            "--checkpointing",
            "full",
            "--plot",
            str(out),
            "--json",
        ]
    )
    assert rc == 3 and json.loads(capsys.readouterr().out)["plot"] == str(out)
    _assert_chart_png(out)
