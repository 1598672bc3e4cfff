"""Issue 47 ("another trainer's defaults are never borrowed silently") at each ms-swift 3 release line: what memplan
fills where a `swift sft` / `swift rlhf --rlhf_type dpo|grpo` command names only the model, read at the line its
`ms-swift==` pin names, equals that release's own TrainArguments and RLHFArguments defaults (swift.llm.argument in the
line's venv of tools/fwenv_old.sh, with the transformers and torch it resolves), read with dataclasses.fields, never
instantiated; where a default is None and __post_init__ decides it, the rule in the venv's own source is read
(inspect.getsource): gradient_accumulation_steps ceil(16 / micro-batch / world) (trainers/arguments.py), 1 for GRPO
where rlhf_args.py says so (v3.7.0 on). One process a venv, ~4 s; the 3.9 line at its newest, v3.12.6.
Failed before the fixes: swift-3.7.3 and swift-3.12.6 (optim: adamw_torch planned, where their pins' transformers
4.55.4 and 4.57.1 run adamw_torch_fused), swift-3.0.3 (gradient_accumulation_steps 1, transformers' own, planned as
ceil(16 / 1) = 16) and swift-3.4.1 (GRPO's accumulation ceil(16 / 1) = 16, planned as 3.7's 1)."""

import math
from pathlib import Path

import pytest

from tests.planner.frameworks.linedefaults import cited_defaults, own_defaults, read_pinned, venv_or_skip

LINES = [("3", "3.0.3"), ("3.4", "3.4.1"), ("3.7", "3.7.3"), ("3.9", "3.12.6")]
KEYS = (
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "gradient_checkpointing",
    "optim",
    "lora_rank",
    "lora_dropout",
    "target_modules",
    "max_length",
    "torch_dtype",
    "num_generations",
    "max_completion_length",
)
PROBE = f"""
import dataclasses, inspect, json
from swift.llm.argument import TrainArguments, RLHFArguments, rlhf_args

def own(c):
    out = {{}}
    for f in dataclasses.fields(c):
        if f.name in {KEYS!r}:
            out[f.name] = f.default if f.default is not dataclasses.MISSING else f.default_factory()
    return out

src = inspect.getsource(rlhf_args)
print(json.dumps({{"sft": own(TrainArguments), "rlhf": own(RLHFArguments),
                  "grpo_accum_1": "self.gradient_accumulation_steps = 1" in src}}, default=str))
"""
OPTIM = {"adamw_torch": "adamw", "adamw_torch_fused": "adamw-fused"}
MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
COMMANDS = {"sft": "swift sft", "dpo": "swift rlhf --rlhf_type dpo", "grpo": "swift rlhf --rlhf_type grpo"}


def _read(tmp_path: Path, version: str, kind: str) -> dict:
    """memplan's reading of a command that names the model alone (one process), beside `ms-swift==VERSION`."""
    command = f"{COMMANDS[kind]} --model {MODEL} --output_dir out\n"
    r = read_pinned(tmp_path / kind, f"ms-swift=={version}", "run.sh", command)
    return {s.field: s for s in r.settings}


def _expected(own: dict, kind: str) -> dict:
    c = own["sft" if kind == "sft" else "rlhf"]
    micro, accum = c["per_device_train_batch_size"], c["gradient_accumulation_steps"]
    if accum is None:  # __post_init__: 1 for GRPO where rlhf_args.py says so, else a total batch of 16 (one process)
        accum = 1 if kind == "grpo" and own["grpo_accum_1"] else max(1, math.ceil(16 / micro / 1))
    targets = c["target_modules"]
    out = {
        "micro_batch": micro,
        "grad_accum": accum,
        "checkpointing": "full" if c["gradient_checkpointing"] else "off",
        "optimizer": OPTIM[c["optim"]],
        "lora_rank": c["lora_rank"],
        "lora_dropout": c["lora_dropout"],
        "lora_targets": targets[0] if isinstance(targets, list) and len(targets) == 1 else targets,
        # torch_dtype None: the model's config (Qwen2.5's bfloat16), mixed precision following it
        "precision": "bf16" if c["torch_dtype"] is None else c["torch_dtype"],
    }
    if kind == "grpo":
        out |= {
            "workload.num_generations": c["num_generations"],
            "workload.max_completion_length": c["max_completion_length"],
        }
    return out


@pytest.mark.parametrize(("line", "version"), LINES, ids=[f"swift@{line}:swift-{v}" for line, v in LINES])
def test_each_line_fills_its_own_releases_defaults(tmp_path, line, version):
    venv = venv_or_skip(f"swift-{version}")
    own = own_defaults(venv, PROBE)
    for kind in ("sft", "dpo", "grpo") if "num_generations" in own["rlhf"] else ("sft", "dpo"):
        s = _read(tmp_path, version, kind)
        assert s["framework"].value == f"swift@{line}", (kind, s["framework"])
        for field, want in _expected(own, kind).items():
            assert s[field].value == want, (kind, field, s[field].value, s[field].source, want)
            # a default the line did not move names the line, as at the newest (line_defaults.restate)
            assert cited_defaults(s[field].source) <= {f"swift@{line}"}, (kind, field, s[field].source)
        length = s[
            "seq_len" if kind == "sft" else "workload.max_length" if kind == "dpo" else "workload.max_prompt_length"
        ]
        # max_length None: the model's context (base_args.py), Qwen2.5-0.5B's 32768
        assert own["sft"]["max_length"] is None and length.value == 32768 and "model's context" in length.source
