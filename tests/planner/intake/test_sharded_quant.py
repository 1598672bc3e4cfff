"""A quantized base under FSDP or ZeRO-3 as the readers give it (planner.intake.settle._sharded_quant): bitsandbytes
4-bit is planned sharded (FSDP-QLoRA; the round trip's QLoRA cases write and read it), under FSDP its parameters
offloaded to the host too, while a base FSDP cannot shard (int8) is planned in 16 bits with one line."""

import pytest

from planner import intake

BASE = "base_model: meta-llama/Llama-3.1-8B\nadapter: qlora\nlora_r: 16\nfsdp_version: 2\n"


@pytest.mark.parametrize(
    ("extra", "quant", "line"),
    [
        ("load_in_4bit: true\nfsdp_config:\n  reshard_after_forward: true\n", "nf4", None),
        ("load_in_8bit: true\nfsdp_config:\n  reshard_after_forward: true\n", None, "int8 base sharded"),
        ("load_in_4bit: true\nfsdp_config:\n  offload_params: true\n", "nf4", None),
    ],
    ids=["nf4", "int8", "nf4-offloaded"],
)
def test_axolotl_quantized_base_under_fsdp(extra, quant, line, tmp_path):
    cfg = tmp_path / "ax.yaml"
    cfg.write_text(BASE + extra)
    r = intake.read([str(cfg)])
    assert r.request["fsdp"] == "full" and r.request.get("quant") == quant
    notes = [u for u in r.unplanned if "planned in 16 bits" in u]
    assert notes == ([] if line is None else [next(u for u in notes if line in u)])
