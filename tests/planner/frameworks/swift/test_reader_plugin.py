"""ms-swift 3.x's `--train_type custom --external_plugins FILE` (planner/frameworks/swift/reader_plugin.py): v3.12.6's
lora_llm_full_vit example, copied verbatim with its plugin (tests/data/frameworks/swift/examples_v3/SOURCES.md), is
read as 4.x's lora_llm (LoRA on the language model, the tower and aligner trained in full); a plugin of another shape
or one not found is refused in one line naming it; the 3.x lines plan it and write no file for it."""

import shutil
from pathlib import Path

import pytest

from planner import advise, intake
from planner.errors import BadInput
from planner.frameworks.swift import reader_plugin

V3 = Path(__file__).parents[3] / "data/frameworks/swift/examples_v3/v3.12.6"
VIT = V3 / "examples/train/multimodal/lora_llm_full_vit"


@pytest.mark.parametrize("script", ["sft.sh", "seq_cls.sh"])
def test_the_examples_plugin_is_lora_llm(script):
    r = intake.read([str(VIT / script)])
    req = r.request
    assert (req["lora_rank"], req["lora_tower_full"], req["lora_targets"], req["lora_dropout"]) == (
        16,
        True,
        "all-linear",
        0.0,
    )
    assert req["framework"].startswith("swift@3")  # --train_type: a 3.x line
    assert any(Path(f).name == "custom_plugin.py" for f in r.files)
    plan = advise.check(advise.parse(advise.CheckRequest, {**req, "gpu": "a100-80gb"})).plan
    assert plan.lora_tower_full and plan.knobs.release.startswith("3")


def test_a_plugin_of_another_shape_or_none_is_refused_naming_it(tmp_path):
    root = tmp_path / "repo"
    shutil.copytree(VIT.parents[2], root / "examples")
    plugin = root / "examples/train/multimodal/lora_llm_full_vit/custom_plugin.py"
    plugin.write_text(plugin.read_text().replace("deep_getattr(model, module_prefix).requires_grad_(True)", "pass"))
    with pytest.raises(
        BadInput,
        match=r"tuner custom from examples/train/multimodal/lora_llm_full_vit/custom_plugin\.py \(custom_plugin\.py's Tuner is not",
    ):
        intake.read([str(plugin.parent / "sft.sh")])
    plugin.unlink()
    with pytest.raises(BadInput, match=r"custom_plugin\.py \(not found\)"):
        intake.read([str(plugin.parent / "sft.sh")])


def test_the_shape_is_read_from_the_syntax_tree_never_run():
    tree = __import__("ast").parse((VIT / "custom_plugin.py").read_text())
    assert reader_plugin.is_lora_llm(tree)
    assert reader_plugin.plugin_path("nowhere/plugin.py", VIT) is None
