"""OpenRLHF's SFT (planner/frameworks/openrlhf/reader_sft.py): `deepspeed --module openrlhf.cli.train_sft`
read as OpenRLHF's trainer with its own flags and defaults (not as a plain HF Trainer), flat names of 0.10.1 and before
as their dotted names. The pre-Ray `openrlhf.cli.train_ppo`: tests/planner/estimate/test_one_process_ppo.py."""

import ast
from pathlib import Path

from planner import intake
from planner.frameworks.openrlhf.reader_sft import DEFAULTS
from tests.planner.estimate.test_weight_sync import framework_file

FIELD = Path(__file__).parents[3] / "field"


def _values(path: Path) -> tuple[dict, list[str]]:
    reading = intake.read([str(path)])
    return {s.field: s.value for s in reading.settings}, reading.unplanned


def test_openrlhf_698s_flat_sft_command_is_openrlhfs_trainer_with_its_flags():
    value, unplanned = _values(FIELD / "openrlhf-698-llama3-8b-sft-full-z2-1xa100" / "train.sh")
    assert value["framework"].split("@")[0] == "openrlhf" and value["workload.kind"] == "sft"
    assert (value["gpus_per_node"], value["micro_batch"], value["grad_accum"], value["seq_len"]) == (1, 1, 1, 128)
    assert (value["zero_stage"], value["checkpointing"], value["precision"], value["attention"]) == (
        2,
        "full",
        "bf16",
        "flash",
    )
    assert "offload" not in value  # no --adam_offload: the maintainer's fix, not the run
    assert any("--packing_samples" in n and "micro rows of max_len" in n for n in unplanned)
    assert any("--pretrain (--model.model_name_or_path)" in n for n in unplanned)


def test_a_dotted_sft_command_takes_train_sfts_own_defaults(tmp_path):
    script = tmp_path / "sft.sh"
    script.write_text(
        "deepspeed --num_gpus 4 --module openrlhf.cli.train_sft --model.model_name_or_path Qwen/Qwen2.5-7B-Instruct "
        "--ds.adam_offload --ds.lora.rank 16\n"
    )
    value, _ = _values(script)
    # micro 8 (:166), batch 128 (:167) over 4 GPUs: accumulation 4; max_len 2048 (:284); ZeRO-2 (:178); bf16 (:180)
    assert (value["micro_batch"], value["grad_accum"], value["seq_len"], value["zero_stage"]) == (8, 4, 2048, 2)
    assert (value["precision"], value["attention"], value["offload"], value["lora_rank"]) == (
        "bf16",
        "flash",
        "optimizer",
        16,
    )
    assert value["checkpointing"] == "off" and value["model"] == "qwen2.5-7b"


def test_the_defaults_are_train_sfts_own_at_the_cited_lines():
    """Each default sft.DEFAULTS cites is the installed 0.11.2 cli/train_sft.py's add_argument at that line."""
    path = framework_file("MEMPLAN_OPENRLHF_PYTHON", "openrlhf/cli/train_sft.py")
    found = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument" and node.args:
            name = getattr(node.args[0], "value", "")
            default = next((k.value for k in node.keywords if k.arg == "default"), None)
            if isinstance(default, ast.Constant):
                found[name.lstrip("-")] = (default.value, node.lineno)
    for key, (value, line, _) in DEFAULTS.items():
        assert found[key] == (value, line), key
