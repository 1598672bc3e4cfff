"""The load and checkpoint-save phases (planner.estimate.lifecycle) against what the libraries hold on the host when
they run on CPU: the state dicts DeepSpeed's and torch's own save calls return on 2 gloo ranks, and the host RAM
transformers' from_pretrained and accelerate's FSDP2 preparation keep. debug-llama (tied embedding: one copy)."""

import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
from planner.config.spec import Knobs
from planner.estimate import lifecycle
from planner.estimate.setup import Setup
from planner.model.catalog import load_model, model_config
from probes.step import Case

FRAMEWORK = "hf"  # HF's Trainer save path (what accelerate calls), not the bundled trainer's


def _setup(knobs: Knobs, world: int = 2) -> Setup:
    return Setup(load_model("debug-llama"), knobs, 2, 1, 64, world, 1)


@pytest.mark.parametrize("stage", [2, 3])
def test_a_deepspeed_save_holds_the_full_16bit_weights_where_the_term_says(stage):
    """ZeRO-1/2: every rank clones the whole bf16 module (accelerate's get_state_dict); ZeRO-3 with
    stage3_gather_16bit_weights_on_model_save: rank 0 alone, module by module. The term's per-node figure is the sum
    over the node's ranks. Exact."""
    pytest.importorskip("deepspeed")
    from probes.zero import measure_zero

    knobs = Knobs(precision="bf16", zero_stage=stage, optimizer="sgd", framework=FRAMEWORK, save_weights="full")
    rows = measure_zero(Case(model_config("debug-llama"), knobs, 2, 1, 64), steps=1, save=True)
    measured = sorted((r["rank"], r["save_state_dict_bytes"]) for r in rows)
    s = _setup(knobs)
    full = s.model.params * 2
    assert [b for _, b in measured] == ([full, full] if stage == 2 else [full, 0]), measured
    assert lifecycle.save_host_bytes_per_node(s) == sum(b for _, b in measured)


def test_an_fsdp2_full_state_dict_save_holds_fp32_weights_then_the_optimizer_on_rank_0():
    """FULL_STATE_DICT with cpu_offload (HF's default under FSDP): rank 0 gets the model in its fp32 storage, then the
    AdamW states (two fp32 moments a parameter); the term is the larger of the two. Exact."""
    from probes.dist import measure_ranks

    knobs = Knobs(precision="bf16", fsdp="full", framework=FRAMEWORK, save_weights="full")
    rows = sorted(
        measure_ranks(Case(model_config("debug-llama"), knobs, 2, 1, 64), 2, 1, job={"save": True}),
        key=lambda r: r["rank"],
    )
    s = _setup(knobs)
    assert rows[0]["save_model_bytes"] == lifecycle.fsdp_model_bytes(s) == s.model.params * 4
    assert rows[0]["save_optimizer_bytes"] >= lifecycle.optimizer_state_bytes_full(s)  # + one step count a tensor
    assert rows[0]["save_optimizer_bytes"] - lifecycle.optimizer_state_bytes_full(s) < 1024
    assert rows[1]["save_model_bytes"] == rows[1]["save_optimizer_bytes"] == 0
    assert lifecycle.save_host_bytes_per_node(s) == lifecycle.optimizer_state_bytes_full(s)


@pytest.fixture(scope="module")
def bf16_checkpoint(tmp_path_factory):
    from probes.load import write_checkpoint

    return write_checkpoint(tmp_path_factory.mktemp("ckpt"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads RssAnon from /proc/self/status")
def test_loading_costs_host_ram_only_where_the_weights_are_cast(bf16_checkpoint):
    """from_pretrained in the checkpoint's dtype keeps views of the mmapped file (no anonymous memory); in fp32 a full
    4-byte copy; accelerate's FSDP2 upcast of a bf16 load, the same 4 bytes a trainable parameter. The term counts 0,
    4P and 4P per rank. Measured (132.7M parameters, 2026-11-24): 64 KiB, 4.0013 and 4.0011 bytes a parameter;
    tolerance 1% of the bf16 weights for the first, 2% for the others."""
    from probes.load import measure_load

    views, cast, upcast = (
        measure_load(bf16_checkpoint, d, m) for d, m in (("auto", "plain"), ("float32", "plain"), ("auto", "upcast"))
    )
    p = views["params"]
    assert views["held"] < 0.01 * 2 * p, views
    assert abs(cast["held"] / (4 * p) - 1) < 0.02, cast
    assert abs(upcast["held"] / (4 * p) - 1) < 0.02, upcast
    model = load_model("llama-3.2-1b")  # the rules, on a bf16 checkpoint of the catalog's
    per_rank = {
        "ddp fp32 weights": Setup(model, Knobs(precision="bf16", framework=FRAMEWORK), 1, 1, 512, 1, 1),
        "zero-2 bf16": Setup(model, Knobs(precision="bf16", zero_stage=2, framework=FRAMEWORK), 1, 1, 512, 1, 1),
        "fsdp upcast": Setup(model, Knobs(precision="bf16", fsdp="full", framework=FRAMEWORK), 1, 1, 512, 1, 1),
    }
    got = {k: lifecycle.load_host_bytes_per_node(s) for k, s in per_rank.items()}
    assert got == {"ddp fp32 weights": 4 * model.params, "zero-2 bf16": 0, "fsdp upcast": 4 * model.params}
