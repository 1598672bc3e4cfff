"""TRL's disable_dropout read from a user's config (planner.intake.loraargs.read_disable_dropout): true zeroes LoRA's
dropout where the trainer would keep it (GRPO: read as lora_dropout 0), false keeps it where the trainer would zero it
(DPO: the knob lora_dropout_kept, its masks planned again), and the TRL command memplan writes says it back."""

from pathlib import Path

from planner import checkconfig
from planner.estimate.lora import dropout_zeroed

BASE = """model_name_or_path: Qwen/Qwen2.5-0.5B-Instruct
use_peft: true
lora_r: 16
lora_dropout: 0.05
per_device_train_batch_size: 8
gradient_checkpointing: false
bf16: true
"""
FLAGS = {"gpu": "h100-80gb", "gpus_per_node": 1}


def _check(tmp_path: Path, text: str, kind: str):
    path = tmp_path / f"{kind}.yaml"
    path.write_text(text)
    return checkconfig.check_config([str(path)], {**FLAGS, "workload": {"kind": kind}})


def _peak(out) -> int:
    return out.plan.memory.peak_allocated_bytes


def test_disable_dropout_false_keeps_dpos_dropout_and_its_masks(tmp_path):
    default = _check(tmp_path, BASE + "max_length: 1024\n", "dpo")
    kept = _check(tmp_path, BASE + "max_length: 1024\ndisable_dropout: false\n", "dpo")
    assert dropout_zeroed(default.plan.knobs) and not default.plan.knobs.lora_dropout_kept
    assert kept.plan.knobs.lora_dropout_kept and not dropout_zeroed(kept.plan.knobs)
    row = next(s for s in kept.config["settings"] if s["field"] == "lora_dropout_kept")
    assert row["key"] == "disable_dropout" and "dpo.yaml: disable_dropout: False" in row["source"]
    assert _peak(kept) > _peak(default)


def test_disable_dropout_true_zeroes_grpos_dropout(tmp_path):
    grpo = BASE + "num_generations: 8\nmax_completion_length: 256\n"
    default = _check(tmp_path, grpo, "grpo")
    zeroed = _check(tmp_path, grpo + "disable_dropout: true\n", "grpo")
    assert default.plan.knobs.lora_dropout == 0.05 and zeroed.plan.knobs.lora_dropout == 0
    assert _peak(zeroed) < _peak(default)


def test_the_trl_command_says_disable_dropout_false_back():
    from planner import advise
    from planner.export.commands import script_args

    req = {
        "model": "qwen2.5-0.5b",
        "gpu": "h100-80gb",
        "micro_batch": 4,
        "grad_accum": 2,
        "framework": "trl",
        "lora_rank": 16,
        "lora_dropout": 0.05,
        "lora_dropout_kept": True,
        "workload": {"kind": "dpo", "max_length": 1024},
    }
    plan = advise.check(advise.parse(advise.CheckRequest, req)).plan
    assert "--disable_dropout false" in " ".join(script_args(plan))
