"""A TRL run of a bitsandbytes 4-bit base under FSDP1 (planner.intake.settle._sharded_quant): TRL leaves
bnb_4bit_quant_storage unset, so the packed weight is uint8 and FSDP1's FlatParameter refuses it; refused in one line,
and planned once the storage is the model's dtype."""

import pytest

from planner import intake
from planner.errors import BadInput

FSDP1 = """compute_environment: LOCAL_MACHINE
distributed_type: FSDP
fsdp_config:
  fsdp_sharding_strategy: FULL_SHARD
num_processes: 2
mixed_precision: bf16
"""
SFT = "model_name_or_path: Qwen/Qwen2.5-0.5B\nuse_peft: true\nload_in_4bit: true\n"


def _read(tmp_path, sft: str, fsdp: str = FSDP1):
    (tmp_path / "fsdp.yaml").write_text(fsdp)
    (tmp_path / "sft.yaml").write_text(sft)
    (tmp_path / "run.sh").write_text("accelerate launch --config_file fsdp.yaml trl/scripts/sft.py --config sft.yaml\n")
    return intake.read([str(tmp_path / f) for f in ("run.sh", "fsdp.yaml", "sft.yaml")])


def test_fsdp1_with_a_uint8_stored_4bit_base_is_refused_in_one_line(tmp_path):
    with pytest.raises(BadInput, match=r"FSDP1 .*uint8.*_flat_param\.py:810-816.*bnb_4bit_quant_storage") as e:
        _read(tmp_path, SFT)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("sft", "fsdp"),
    [
        (SFT + "bnb_4bit_quant_storage: bfloat16\n", FSDP1),
        (SFT, FSDP1.replace("FULL_SHARD\n", "FULL_SHARD\n  fsdp_version: 2\n")),
    ],
    ids=["bf16-storage", "fsdp2"],
)
def test_a_float_storage_or_fsdp2_is_planned_sharded(tmp_path, sft, fsdp):
    value = {s.field: s.value for s in _read(tmp_path, sft, fsdp).settings}
    assert value["quant"] == "nf4" and value["fsdp"] == "full"
