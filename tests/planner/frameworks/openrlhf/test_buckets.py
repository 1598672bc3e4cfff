"""OpenRLHF's DeepSpeed buckets (planner/frameworks/openrlhf/reader_flags.zero_buckets): its own DeepSpeed config
leaves the bucket sizes "auto" and no HF Trainer fills them, so DeepSpeed's own defaults are the run's (reduce bucket
5e8 elements, not HF's hidden^2); and ZeRO-2's GPU staging buffer beside an offloaded optimizer in every trained role
(planner.estimate.zero.offload_staging_bytes, pinned to DeepSpeed in tests/probes/test_zero.py)."""

from pathlib import Path

import pytest

from planner import intake
from planner.config import zerobuckets
from planner.frameworks.openrlhf.keys import BUCKETS
from tests.planner.estimate.test_weight_sync import framework_file

FIELD = Path(__file__).parents[3] / "field"


def _values(path: Path) -> dict:
    return {s.field: s.value for s in intake.read([str(path)]).settings}


def test_openrlhf_384s_zero3_dpo_takes_deepspeeds_own_bucket_sizes():
    value = _values(FIELD / "openrlhf-384-glm4-9b-dpo-z3-8xa100" / "train_dpo.sh")
    assert zerobuckets.parse(value["zero_buckets"]) == {
        "stage": 3,
        "reduce_bucket_size": 5 * 10**8,
        "stage3_prefetch_bucket_size": 5 * 10**7,
        "stage3_param_persistence_threshold": 10**5,
    }


@pytest.mark.parametrize("overlap", [False, True])
def test_a_zero2_run_keeps_one_reduce_bucket_unless_overlap_comm(tmp_path, overlap):
    script = tmp_path / "sft.sh"
    script.write_text(
        "deepspeed --num_gpus 4 --module openrlhf.cli.train_sft --model.model_name_or_path Qwen/Qwen2.5-7B-Instruct "
        f"--ds.zero_stage 2 {'--ds.overlap_comm' if overlap else ''}\n"
    )
    text = _values(script)["zero_buckets"]
    assert text in BUCKETS and zerobuckets.parse(text)["overlap_comm"] is overlap


def test_openrlhf_leaves_the_sizes_auto_and_deepspeed_fills_its_own_defaults():
    """The installed 0.11.2's get_train_ds_config writes "auto" for the three sizes; the installed DeepSpeed drops an
    "auto" value and keeps its field's default (what the reading plans)."""
    source = framework_file("MEMPLAN_OPENRLHF_PYTHON", "openrlhf/utils/deepspeed/deepspeed_utils.py").read_text()
    for key in ("reduce_bucket_size", "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold"):
        assert f'"{key}": "auto"' in source
    config = pytest.importorskip("deepspeed.runtime.zero.config")
    auto = {"stage": 3, "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto"}
    z = config.DeepSpeedZeroConfig(**auto, stage3_param_persistence_threshold="auto")
    assert (z.reduce_bucket_size, z.prefetch_bucket_size, z.param_persistence_threshold) == (5e8, 5e7, 1e5)
    assert config.DeepSpeedZeroConfig(stage=2).overlap_comm is False
