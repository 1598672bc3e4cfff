"""ms-swift's LLaMA-Pro (--tuner_type llamapro, 3.x --train_type; --llamapro_num_new_blocks) read from its own example
(tests/data/frameworks/swift/examples/train/tuners/llamapro/train.sh, verbatim at v4.5.2) as --trained-layers N
--trained-layout inserted, written back at each line's tuner flag, and planned on the model with its N new blocks
(planner.estimate.freeze.expanded_model; the counts pinned to ms-swift's own tuner in tests/probes/test_freeze.py)."""

import pytest

from planner import advise, intake
from planner.config.spec import Knobs
from planner.errors import BadInput
from planner.estimate.setup import Setup
from planner.estimate.trained import frozen_params, trainable_params
from planner.frameworks.swift import writer as swift
from planner.model.catalog import load_model
from tests.planner.export.test_frameworks_export import swift_flags, written

EXAMPLE = "tests/data/frameworks/swift/examples/train/tuners/llamapro/train.sh"


def test_the_example_reads_as_four_inserted_blocks():
    reading = intake.read([EXAMPLE])
    r = reading.request
    assert (r["trained_layers"], r["trained_layout"], r["lora_rank"]) == (4, "inserted", 0)
    assert r["model"] == "qwen2.5-7b" and r["precision"] == "bf16-pure"


def test_the_3x_flag_and_the_default_block_count(tmp_path):
    """3.x's --train_type llamapro, no --llamapro_num_new_blocks: its default 4 (tuner_args.py:185)."""
    path = tmp_path / "train.sh"
    path.write_text("swift sft --model Qwen/Qwen2.5-7B --train_type llamapro --max_length 1024\n")
    r = intake.read([str(path)]).request
    assert (r["trained_layers"], r["trained_layout"]) == (4, "inserted")


def test_the_blocks_are_planned_as_new_layers_trained_over_a_frozen_base():
    """Qwen2.5-7B's 28 layers + 4 blocks: 32 layers held, 4 trained (their weights, gradients, AdamW's states), the
    model's own 28 and its embedding and head frozen; the same 4 trained as the last 4 of its own layers."""
    spec = load_model("qwen2.5-7b")
    kw = {"trained_layers": 4, "framework": "swift", "precision": "bf16-pure"}
    pro = Setup(spec, Knobs(**kw, trained_layout="inserted"), 1, 1, 512)
    last = Setup(spec, Knobs(**kw), 1, 1, 512)
    layer = spec.params_by_role()["layer"] // 28
    assert pro.model.text.layers == 32 and trainable_params(pro) == trainable_params(last) == 4 * layer
    assert frozen_params(pro) == frozen_params(last) + 4 * layer


@pytest.mark.parametrize("line,flag", [("swift", "tuner_type"), ("swift@3.9", "train_type")])
def test_suggest_writes_llamapro_and_reads_it_back(tmp_path, line, flag):
    knobs = {"trained_layers": 4, "trained_layout": "inserted", "precision": "bf16-pure", "checkpointing": "full"}
    w = written(line, "llama_pro", tmp_path, knobs)
    _env, _cmd, f = swift_flags((w.dir / swift.SCRIPT_NAME).read_text())
    assert (f[flag], f["llamapro_num_new_blocks"]) == ("llamapro", "4") and "trainable_parameters" not in f
    r = intake.read([str(w.dir / swift.SCRIPT_NAME)]).request
    assert (r["trained_layers"], r["trained_layout"]) == (4, "inserted")


def test_the_first_layers_by_trainable_parameters(tmp_path):
    """--trainable_parameters model.layers.0. model.layers.1. (--freeze_parameters_ratio 1): the first 2, written and
    read back as --trained-layout first."""
    w = written("swift", "first", tmp_path, {"trained_layers": 2, "trained_layout": "first", "precision": "bf16-pure"})
    _env, _cmd, f = swift_flags((w.dir / swift.SCRIPT_NAME).read_text())
    assert f["trainable_parameters"] == ["model.layers.0.", "model.layers.1."]
    r = intake.read([str(w.dir / swift.SCRIPT_NAME)]).request
    assert (r["trained_layers"], r["trained_layout"]) == (2, "first")


@pytest.mark.parametrize("framework", ["llamafactory", "axolotl"])
def test_a_framework_that_inserts_no_blocks_refuses_them_in_one_line(framework):
    body = {"model": "qwen2.5-0.5b", "gpu": "h100", "micro_batch": 1, "seq_len": 256, "framework": framework}
    body["trained_layers"] = 4
    with pytest.raises(BadInput) as e:
        advise.check(advise.parse(advise.CheckRequest, {**body, "trained_layout": "inserted"}))
    assert "trained" in str(e.value) and "\n" not in str(e.value)


def test_the_bundled_trainer_inserts_them():
    """memplan's own trainer inserts ms-swift's blocks after loading (recipe.model._insert_blocks, measured in
    tests/probes/test_freeze.py): planned for --framework memplan; HF's command says the script must insert and
    freeze them, and the bundled trainer's command carries the layout (tests/planner/export/test_bundled_command.py)."""
    body = {"model": "qwen2.5-0.5b", "gpu": "h100", "micro_batch": 1, "seq_len": 256, "framework": "memplan"}
    r = advise.check(advise.parse(advise.CheckRequest, {**body, "trained_layers": 4, "trained_layout": "inserted"}))
    assert "insert LLaMA-Pro's blocks" in r.plan.launch.note and "4 trained layers (inserted)" in r.plan.launch.note
    chunked = {**body, "trained_layers": 4, "trained_layout": "inserted", "loss": "chunked"}  # HF cannot: bundled
    r = advise.check(advise.parse(advise.CheckRequest, chunked))
    assert "planner train" in r.plan.launch.command and "--trained-layout inserted" in r.plan.launch.command
