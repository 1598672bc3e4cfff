"""A LoRA base's frozen shards under FSDP where the framework's accelerate casts the whole sharded model to fp32
(accelerate 1.6.0 .. 1.12.0 utils/fsdp_utils.py fsdp2_prepare_model: `model.to(torch.float32)` after fully_shard;
planner.estimate.trained.fsdp_upcasts_frozen), a 4-bit base's bf16 storage included.

Measured 2026-12-06 (probes.fsdp_upcast: accelerate's own fsdp2_prepare_model on two gloo ranks, torch 2.13.0+cpu,
bitsandbytes 0.50.2; a bf16 embedding and two blocks, each a frozen nf4 Linear4bit stored in bf16, a frozen bf16
linear and an fp32 LoRA pair), every rank the same:
- accelerate 1.6.0: frozen shards 917,504 B, fp32; the trained ones 24,576 B fp32; the 4-bit weight gathered in bf16;
- accelerate 1.13.0 and 1.16.0: frozen shards 458,752 B, bf16 (the trained parameters alone are cast); the same
  trained bytes.
The unsharded model held 917,504 B of frozen bf16: the upcast shard is exactly twice the bf16 one. The gathered 4-bit
storage differs from the quantized one in 23 of 32,768 words under 1.6.0, each a word whose bits read as a bf16 NaN
(the CPU cast does not keep a NaN's payload), none under 1.13.0: what the upcast does to the weights, not to memory.

The field row axolotl-pr2515-llama4-scout-qlora-flex-fsdp2-4xh100 (axolotl 682a9cf79: accelerate==1.6.0,
requirements.txt) measured 62.8 GiB a GPU; planned 49.37 before this term, 59.05 with it (axolotl@0.8).
"""

import os

import pytest

from planner.config.spec import GIB, Knobs
from planner.estimate import quant
from planner.estimate.memory import breakdown
from planner.estimate.setup import Setup
from planner.estimate.state_terms import params_bytes
from planner.estimate.trained import fsdp_upcasts_frozen, trainable_params
from planner.model.catalog import load_model

FROZEN_UNSHARDED, WORLD = 917_504, 2
MEASURED = {  # accelerate -> (frozen shard bytes, its dtype, trained shard bytes, gathered words changed) a rank
    "1.6.0": (917_504, "torch.float32", 24_576, 23),
    "1.13.0": (458_752, "torch.bfloat16", 24_576, 0),
    "1.16.0": (458_752, "torch.bfloat16", 24_576, 0),  # main's venv
}


def _knobs(release: str, **kw) -> Knobs:
    base = {"precision": "bf16", "fsdp": "full", "lora_rank": 16, "quant": "nf4"}
    return Knobs(framework="axolotl", release=release, **{**base, **kw})


def _frozen_shard_bytes(k: Knobs, world: int = WORLD) -> int:
    """The plan's frozen shards a rank holds: its parameters less the trained shards and the whole absmax."""
    s = Setup(load_model("debug-llama"), k, 1, 1, 512, world)
    whole = quant.replicated_bytes(s.model, k.quant, k.quant_absmax)
    return params_bytes(s) - whole - trainable_params(s) * 4 // world


def test_the_measured_upcast_doubles_the_frozen_shards():
    """The measurement itself: the 1.6.0 shard is the unsharded bf16 bytes over 2 ranks, in fp32; 1.13.0's half."""
    assert MEASURED["1.6.0"][0] == 2 * MEASURED["1.13.0"][0] == 2 * FROZEN_UNSHARDED // WORLD


@pytest.mark.parametrize("quantized", ["nf4", "none"])
def test_the_plans_frozen_shards_double_as_measured(quantized):
    """Exact: the release whose accelerate casts the whole model (axolotl@0.8, accelerate 1.6.0 .. 1.8.1) holds the
    frozen shards at the measured ratio to the one that casts the trained parameters alone (axolotl@0.14's newest,
    1.13.0), the dense frozen weights and the 4-bit storage alike."""
    upcast, kept = (
        _frozen_shard_bytes(_knobs("0.8", quant=quantized)),
        _frozen_shard_bytes(_knobs("0.14", quant=quantized)),
    )
    assert upcast * MEASURED["1.13.0"][0] == kept * MEASURED["1.6.0"][0]


@pytest.mark.parametrize(
    "kw,release,expected",
    [
        ({}, "0.8", True),
        ({}, "0.12", True),
        ({}, "0.14", False),  # v0.15.0 .. 0.19.0 pin accelerate 1.13.0
        ({"fsdp": "off"}, "0.8", False),
        ({"precision": "fp32"}, "0.8", False),  # no mixed precision, no cast
        ({"lora_rank": 0, "quant": "none"}, "0.8", False),  # full fine-tuning: fp32 shards already (trainable bytes)
    ],
)
def test_which_runs_upcast(kw, release, expected):
    assert fsdp_upcasts_frozen(_knobs(release, **kw)) is expected


def test_the_gather_stays_in_bf16():
    """FSDP2's bf16 policy gathers the upcast shards back in bf16 (measured: the 4-bit weight's dtype in its forward):
    only the sharded parameters move, the rest of the peak does not."""
    plans = {
        r: breakdown(Setup(load_model("debug-llama"), _knobs(r), 1, 1, 512, WORLD), 80 * GIB) for r in ("0.8", "0.14")
    }
    a, b = plans["0.8"], plans["0.14"]
    assert a.detail["fsdp_unsharded_params_bytes"] == b.detail["fsdp_unsharded_params_bytes"]
    assert a.peak_allocated_bytes - b.peak_allocated_bytes == a.params_bytes - b.params_bytes > 0


@pytest.mark.sweep  # make test-all: two gloo ranks, ~20 s; needs accelerate 1.6.0 and bitsandbytes on MEMPLAN_UPCAST_PATH
def test_the_measurement_is_accelerates_own(tmp_path):
    """Reruns probes.fsdp_upcast where MEMPLAN_UPCAST_PATH names folders (os.pathsep-joined) with bitsandbytes and,
    for the upcast, accelerate 1.6.0 (pip install --no-deps --target DIR accelerate==1.6.0 bitsandbytes; without it
    the venv's accelerate): the recorded figures of that accelerate, every rank."""
    import json
    import subprocess
    import sys

    extra = os.environ.get("MEMPLAN_UPCAST_PATH")
    if not extra:
        pytest.skip("MEMPLAN_UPCAST_PATH names no folder with accelerate 1.6.0 and bitsandbytes")
    pytest.importorskip("torch")
    from recipe.dist import free_port

    out = tmp_path / "upcast.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([extra, os.getcwd()]), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(WORLD), "--master_addr"]
    cmd += ["127.0.0.1", "--master_port", str(free_port()), "-m", "probes.fsdp_upcast", str(out)]
    subprocess.run(cmd, check=True, env=env, capture_output=True, timeout=300)
    rows = json.loads(out.read_text())
    frozen, dtype, trained, changed = MEASURED[rows[0]["accelerate"]]
    for r in rows:
        assert r["sharded"]["frozen"] == {dtype: frozen} and r["sharded"]["trained"] == {"torch.float32": trained}
        assert r["unsharded"]["frozen"] == {"torch.bfloat16": FROZEN_UNSHARDED}
        assert (r["weight_dtype_in_forward"], r["gathered_elements_changed"]) == ("torch.bfloat16", changed)
