"""The zero_optimization sizes a DeepSpeed JSON sets itself (planner.config.zerobuckets, the zero_buckets knob), read
by the deepspeed reader into the plan: an explicit value is planned, "auto" is HF's resolution from the hidden size,
an absent key is DeepSpeed's default. Pinned to DeepSpeed 0.19.8's own code where the buffers are allocated."""

import importlib.util
import json
from pathlib import Path

import pytest

from planner import checkconfig
from planner.config.spec import Knobs
from planner.errors import BadInput
from planner.export import configs
from planner.model.catalog import load_model

H = 896  # qwen2.5-0.5b's hidden size: HF's "auto" reduce_bucket_size h*h, stage3_prefetch_bucket_size 0.9*h*h
BF16 = 2


def _plan(tmp_path: Path, zero: dict, name: str = "ds.json"):
    cfg = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}, "zero_optimization": zero}
    (tmp_path / name).write_text(json.dumps(cfg))
    given = {"model": "qwen2.5-0.5b", "gpu": "h100", "gpus_per_node": 2, "seq_len": 256}
    out = checkconfig.check_config([str(tmp_path / name)], given)
    return out.plan, {s["field"]: s for s in out.config["settings"]}


def test_an_explicit_reduce_bucket_plans_its_buffers_and_auto_plans_hf_s(tmp_path):
    """ZeRO-2 allocates reduce_bucket_size elements, twice with overlap_comm (stage_1_and_2.py:3263-3275)."""
    explicit, s = _plan(tmp_path, {"stage": 2, "overlap_comm": True, "reduce_bucket_size": 5e8})
    auto, a = _plan(tmp_path, {"stage": 2, "overlap_comm": True, "reduce_bucket_size": "auto"})
    assert s["zero_buckets"]["value"] == "stage=2,reduce_bucket_size=500000000"
    assert "zero_optimization reduce_bucket_size: 500000000" in s["zero_buckets"]["source"] and "zero_buckets" not in a
    moved = explicit.memory.detail["gradient_buffers_bytes"] - auto.memory.detail["gradient_buffers_bytes"]
    assert moved == 2 * BF16 * (500_000_000 - H * H)
    assert explicit.memory.device_total_bytes - auto.memory.device_total_bytes >= moved


def test_an_absent_key_is_deepspeed_s_default_not_hf_s_auto(tmp_path):
    """HF fills only "auto": without reduce_bucket_size the bucket is DeepSpeed's 5e8 (config.py:113), and without
    overlap_comm ZeRO-2 keeps one buffer (config.py:383-387: true at stage 3 only)."""
    plan, s = _plan(tmp_path, {"stage": 2})
    assert s["zero_buckets"]["value"] == "stage=2,reduce_bucket_size=500000000,overlap_comm=false"
    assert "deepspeed/runtime/zero/config.py:113" in s["zero_buckets"]["source"]
    assert plan.memory.detail["gradient_buffers_bytes"] == BF16 * 500_000_000
    off, _ = _plan(tmp_path, {"stage": 2, "contiguous_gradients": False, "reduce_bucket_size": "auto"})
    assert off.memory.detail["gradient_buffers_bytes"] == 0  # no IPG buffer without contiguous_gradients


def test_zero3_s_prefetch_bucket_moves_its_staging_buffer_by_the_difference(tmp_path):
    """A ZeRO-3 prefetch batch's flat buffer holds stage3_prefetch_bucket_size elements (planner.estimate.zero
    .zero3_staging_elements; partitioned_param_coordinator.py:452-476)."""
    auto = {"stage": 3, "reduce_bucket_size": "auto", "stage3_param_persistence_threshold": "auto"}
    base, _ = _plan(tmp_path, {**auto, "stage3_prefetch_bucket_size": "auto"})
    given, s = _plan(tmp_path, {**auto, "stage3_prefetch_bucket_size": 1e8})
    assert s["zero_buckets"]["value"] == "stage=3,stage3_prefetch_bucket_size=100000000"
    moved = given.memory.detail["zero3_live_params_bytes"] - base.memory.detail["zero3_live_params_bytes"]
    assert moved == BF16 * (100_000_000 - int(0.9 * H * H))


def test_the_export_writes_the_user_s_values_and_auto_s_otherwise():
    model = load_model("qwen2.5-0.5b")
    mine = Knobs.make(zero_stage=2, zero_buckets="reduce_bucket_size=5e8, overlap_comm=false")
    assert mine.zero_buckets == "reduce_bucket_size=500000000,overlap_comm=false"
    zero = configs.deepspeed_config_for(mine, 1, 1, 2, model)["zero_optimization"]
    assert zero["reduce_bucket_size"] == 500_000_000 and zero["overlap_comm"] is False
    zero = configs.deepspeed_config_for(Knobs.make(zero_stage=2), 1, 1, 2, model)["zero_optimization"]
    assert zero["reduce_bucket_size"] == H * H and zero["overlap_comm"] is True
    # a JSON's values stay with its stage: a suggestion at ZeRO-3 is written memplan's own
    read = Knobs.make(zero_stage=3, zero_buckets="stage=2,reduce_bucket_size=5e8")
    assert configs.deepspeed_config_for(read, 1, 1, 2, model)["zero_optimization"]["reduce_bucket_size"] == H * H


@pytest.mark.parametrize(
    "text", ["reduce_bucket=5", "reduce_bucket_size=-1", "overlap_comm=yes", "sub_group_size=1.5", "stage=4"]
)
def test_a_bad_value_is_one_line_naming_it(text):
    with pytest.raises(BadInput, match="--zero-buckets") as e:
        Knobs.make(zero_stage=3, zero_buckets=text)
    assert "\n" not in str(e.value)


@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="deepspeed not installed")
def test_the_cited_deepspeed_lines_allocate_and_default_as_planned():
    """deepspeed 0.19.8 (the probes' venv), read as text: the IPG buffers and the defaults ABSENT cites."""
    root = Path(importlib.util.find_spec("deepspeed").origin).parent / "runtime/zero"
    s12 = (root / "stage_1_and_2.py").read_text().splitlines()
    assert s12[3259].strip() == "if self.contiguous_gradients:"
    assert s12[3265].strip() == "buf_0 = torch.empty(int(self.reduce_bucket_size),"
    assert s12[3272].strip() == "if self.overlap_comm:"
    s3 = (root / "stage3.py").read_text().splitlines()
    assert s3[779].strip() == "if self.contiguous_gradients:"
    assert s3[781].strip() == "bucket.buffer = torch.empty(self.reduce_bucket_size,"
    cfg = (root / "config.py").read_text().splitlines()
    assert cfg[112].strip() == "reduce_bucket_size: int = Field(pp_int(5e8), gt=0)"
    assert cfg[221].strip().startswith("prefetch_bucket_size: int = Field(pp_int(5e7)")
    assert cfg[227].strip().startswith("param_persistence_threshold: int = Field(pp_int(1e5)")
