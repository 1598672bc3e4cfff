"""planner/export/keys.py: the nearest settings in a framework's keys name no file `check` does not write, and do not
say checkpointing is off where FSDP checkpoints (issue 50: `--fsdp: swift_fsdp.json`, `--gradient_checkpointing:
false` beside a row whose checkpointing is FSDP's own)."""

from planner import advise
from planner.export import keys
from planner.model import catalog, hardware

REQ = {"model": "llama-3.1-8b", "gpu": "a100-40gb", "gpus_per_node": 8, "micro_batch": 1, "seq_len": 4096}


def swift(**knobs) -> dict:
    req = advise.parse(advise.CheckRequest, {**REQ, "framework": "swift", **knobs})
    plan = advise.check(req).plan
    return keys.settings(plan, catalog.load_model(REQ["model"]), hardware.resolve("a100-40gb", 8, 1), 4096)


def test_an_fsdp_file_is_said_by_its_keys_not_by_a_name_check_never_writes():
    out = swift(fsdp="full", offload="optimizer+params", checkpointing="full")
    assert "swift_fsdp.json" not in "; ".join(f"{k}: {v}" for k, v in out.items())
    assert out["--fsdp"] == "(a JSON file of the 'fsdp json' keys)"
    assert out["fsdp json fsdp"] == "full_shard auto_wrap offload"
    assert out["fsdp json fsdp_config.activation_checkpointing"] is True
    assert out["--gradient_checkpointing"] == "false (FSDP's own activation_checkpointing checkpoints)"


def test_swifts_fsdp2_preset_checkpoints_and_says_so():
    out = swift(fsdp="full", checkpointing="full")
    assert out["--fsdp"] == "fsdp2"
    assert out["--gradient_checkpointing"] == "false (FSDP's own activation_checkpointing checkpoints)"


def test_checkpointing_off_is_said_as_it_is():
    out = swift(fsdp="full", offload="optimizer+params", checkpointing="off")
    assert out["--gradient_checkpointing"] == "false"
    assert out["fsdp json fsdp_config.activation_checkpointing"] is False  # the file says it as it is too


def test_a_change_to_fsdp_reads_in_the_nearest_settings():
    before = swift(checkpointing="full")
    after = swift(fsdp="full", offload="optimizer+params", checkpointing="full")
    said = "; ".join(keys.changed(before, after))
    assert "--fsdp: (a JSON file of the 'fsdp json' keys); fsdp json fsdp: full_shard auto_wrap offload" in said
    assert "swift_fsdp.json" not in said
