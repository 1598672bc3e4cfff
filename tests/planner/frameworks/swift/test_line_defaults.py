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

from planner.frameworks.swift.reader_keys import ALIASES
from planner.intake.collect import accepted
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
fields = sorted({{f.name for c in (TrainArguments, RLHFArguments) for f in dataclasses.fields(c) if f.init}})
print(json.dumps({{"sft": own(TrainArguments), "rlhf": own(RLHFArguments), "fields": fields,
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


def _check_flags(tmp_path: Path, line: str, version: str, fields: list[str]) -> None:
    """Each flag the line's venv takes (TrainArguments', RLHFArguments' init fields) and 4.6.0 does not is said as the
    line's ("an ms-swift 3.4 argument, not planned"), never "swift refuses it"; a flag no release takes is "not an
    ms-swift LINE argument" (reader_keys.py). Failed before: each such flag said as "not an ms-swift 4.6.0 argument:
    swift refuses it" (42 of 3.0.3's, 45 of 3.4.1's, 41 of 3.7.3's, 30 of 3.12.6's)."""
    own = sorted(set(fields) - accepted("swift") - {"train_type"})
    command = f"swift sft --model {MODEL} {' '.join(f'--{k} 1' for k in own)} --no_such_flag 1 --output_dir out\n"
    r = read_pinned(tmp_path / "flags", f"ms-swift=={version}", "run.sh", command)
    for k in own:
        said = [u for u in r.unplanned if f" --{k} 1 " in u]
        if k in ALIASES[line]:  # read as 4.x's flag (an SFT run plans no vLLM): no note
            assert said == [], (k, said)
            continue
        assert said == [u for u in said if f"(an ms-swift {line} argument, not planned)" in u] != [], (k, said)
    assert any(f"--no_such_flag 1 (not an ms-swift {line} argument: swift refuses it)" in u for u in r.unplanned)


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
    _check_flags(tmp_path, line, version, own["fields"])


@pytest.mark.parametrize(("transformers", "eager"), [("4.35.2", True), ("4.36.0", False)])
def test_2x_reads_a_transformers_pin_where_it_inherits(tmp_path, transformers, eager):
    """ms-swift 2.x sets every Trainer default that plans memory itself (reader_2.py DEFAULTS: optim adamw_torch at
    every 2.x tag, passed to Seq2SeqTrainingArguments, v2.5.2 swift/llm/utils/argument.py:793, :1234), so a
    transformers pin beside its files moves none of them; with --use_flash_attn unset (v2.5.2 swift/llm/utils/
    model.py:1951-1955) the attention is transformers' own choice, eager before 4.36 (hf/reader_attn.py), which
    2.x's transformers>=4.33 allows. Failed before: attention planned sdpa beside transformers==4.35.2, and 4.x's
    --padding_free planned packed."""
    pins = f"ms-swift==2.5.2\ntransformers=={transformers}"
    command = (
        "swift sft --model_id_or_path meta-llama/Llama-2-7b-hf --sft_type lora --padding_free true --output_dir o\n"
    )
    r = read_pinned(tmp_path / "run", pins, "run.sh", command)
    s = {x.field: x for x in r.settings}
    # 4.x's --padding_free, which no 2.x tag takes (2.x raises on it): one note in 2.x's words, not planned packed
    assert any("--padding_free true (not an ms-swift 2.x argument: swift refuses it" in u for u in r.unplanned)
    assert "batching" not in s, s["batching"]
    assert s["framework"].value == "swift@2"
    assert s["optimizer"].value == "adamw" and "v2.5.2 swift/llm/utils/argument.py:793" in s["optimizer"].source
    assert "transformers" not in s["optimizer"].source, s["optimizer"].source
    if eager:
        assert s["attention"].value == "eager" and f"transformers {transformers}:" in s["attention"].source
    else:  # memplan's sdpa, as transformers picks from 4.36
        assert "attention" not in s, s["attention"]


def test_3x_attention_follows_a_pin_before_4_36(tmp_path):
    """ms-swift 3.x allow transformers>=4.33 (v3.4.1 requirements/framework.txt) and pass no attention where
    --attn_impl is unset (v3.0.3 swift/llm/model/utils.py:36-47): beside transformers==4.35.2, eager (hf/reader_attn.py).
    Failed before: planned sdpa."""
    command = "swift sft --model meta-llama/Llama-2-7b-hf --output_dir out\n"  # Llama: in transformers 4.35
    r = read_pinned(tmp_path / "run", "ms-swift==3.4.1\ntransformers==4.35.2", "run.sh", command)
    s = {x.field: x for x in r.settings}
    assert s["attention"].value == "eager" and "transformers 4.35.2:" in s["attention"].source, s["attention"]


@pytest.mark.parametrize(("line", "version"), [("3.4", "3.4.1"), ("3.7", "3.7.3")])
def test_a_lines_own_vllm_names_are_read(tmp_path, line, version):
    """3.x's --tensor_parallel_size (GRPO's vLLM engine to v3.4.x, then an alias) and --gpu_memory_utilization (an
    alias from v3.7.0) are read as 4.x's --vllm_* flags (reader_keys.py ALIASES), not left as unplanned notes.
    Failed before: 3.7's two flags said "not an ms-swift 4.6.0 argument" and planned at 0.9 of a GPU, TP 1."""
    util = " --gpu_memory_utilization 0.5" if "gpu_memory_utilization" in ALIASES[line] else ""
    command = (
        f"swift rlhf --rlhf_type grpo --model {MODEL} --use_vllm true --tensor_parallel_size 2{util} --output_dir o\n"
    )
    r = read_pinned(tmp_path / "grpo", f"ms-swift=={version}", "run.sh", command)
    s = {x.field: x for x in r.settings}
    assert (
        s["workload.roles.rollout_tp"].value == 2 and f"ms-swift {line}'s name" in s["workload.roles.rollout_tp"].source
    )
    if util:
        assert s["workload.vllm_gpu_memory_utilization"].value == 0.5, s["workload.vllm_gpu_memory_utilization"]
    assert not any("tensor_parallel_size" in u or "gpu_memory_utilization" in u for u in r.unplanned), r.unplanned
