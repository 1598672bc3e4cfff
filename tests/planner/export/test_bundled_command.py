"""The bundled trainer's command (planner.export.commands.bundled_command) read back by `planner train`'s own parser:
the knobs it trains are the plan's, every one (a knob left out trains its default: --trained-layout inserted was)."""

import shlex

import pytest

from planner.cli import build_parser
from planner.cli.train_plan import plan_from
from planner.config import knobfields
from planner.config.spec import Goal, Knobs
from planner.export import commands
from planner.model import catalog, hardware
from planner.search.estimates import make_plan

CASES = [
    {"trained_layers": 4, "trained_layout": "inserted", "precision": "bf16-pure"},
    {"lora_rank": 16, "lora_variant": "dora", "lora_targets": "q_proj,v_proj", "lora_dropout": 0.05},
    {"lora_rank": 8, "quant": "nf4", "quant_absmax": "fp32", "expandable_segments": True, "eval_batch": 2},
    {"fsdp": "full", "save_weights": "sharded", "checkpointing": "selective-op", "sequence_parallel": 2},
    {"workload": {"kind": "grpo", "num_generations": 4, "beta": 0.04, "max_completion_length": 256}},
    {"workload": {"kind": "dpo", "max_length": 1024, "precompute_ref_log_probs": True}},
]


@pytest.mark.parametrize("knobs", CASES, ids=lambda k: ",".join(k))
def test_the_bundled_command_trains_the_plans_knobs(knobs):
    hw, model = hardware.resolve("h100", 2, 1), catalog.load_model("qwen2.5-0.5b")
    plan = make_plan(model, hw, Goal(global_batch=16, seq_len=1024), Knobs(**knobs), 2)
    words = shlex.split(commands.bundled_command(plan, hw, model, 1024))
    assert words[:2] == ["planner", "train"]
    _, _, read = plan_from(build_parser().parse_args(words[1:]))
    for field in knobfields.KNOBS:
        if field not in ("framework", "release", "workload"):
            assert getattr(read, field) == getattr(plan, field), field
    assert read.workload == plan.workload
