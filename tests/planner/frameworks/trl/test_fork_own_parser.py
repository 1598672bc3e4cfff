"""The fork and unsloth scripts memplan reads (issue 46 item 4), read as those projects' own config classes read them.
VLM-R1: each command that runs src/open_r1/grpo_jsonl.py (its three run_scripts at 90052f4, and one that sets nothing
but the model, for the defaults) goes through that script's TrlParser((GRPOScriptArguments, GRPOConfig,
GRPOModelConfig)) in the venv of its pins (trl-0.17.0: transformers 4.49.0; validators/fork_validate.py --values, the
dataclasses from the verbatim copy's syntax tree), and every field memplan reads from it, or takes as VLM-R1's default,
is the value that parser gives. The command's words are memplan's shell reader's (planner.intake.shell): what is
compared is the fields. unsloth: its notebooks' config calls through the classes unsloth builds (below).
Sweep tier (their venvs: trl-0.17.0 is `tools/fwenv_old.sh all`'s): one validator process each, 21 s and 10 s on a
loaded 2-core machine."""

import json
import os
import subprocess

import pytest

from planner import intake
from planner.config.workload import Workload
from planner.intake.shell import read_script
from tests.planner.export.test_old_releases_parse import FORK_SCRIPTS, ROOT, VALIDATORS
from tests.planner.intake.conftest import DATA

RUN = DATA / "scripts" / "VLM-R1" / "run_scripts"
SCRIPT = FORK_SCRIPTS["vlm-r1"]
MODEL_ONLY = "cd src/open-r1-multimodal\ntorchrun --nproc_per_node 2 src/open_r1/grpo_jsonl.py --dataset-name x \\\n  --model_name_or_path Qwen/Qwen2.5-VL-3B-Instruct\n"
ATTENTION = {"flash_attention_2": "flash", "sdpa": "sdpa", "eager": "eager", None: None}


def argv(path) -> list[str]:
    """The arguments the script's torchrun line hands grpo_jsonl.py."""
    (words,) = [c.argv for c in read_script(path).commands if any(w.endswith("grpo_jsonl.py") for w in c.argv)]
    return words[next(i for i, w in enumerate(words) if w.endswith("grpo_jsonl.py")) + 1 :]


def held(venv: str, validator: str, *args: str) -> list[dict]:
    """What `validator --values ARGS` prints in `venv` (tools/fwenv_old.sh), one dict an argument after the first
    of fork_validate's (its script) or each of unsloth_validate's."""
    python = ROOT / venv / "bin" / "python"
    if not python.is_file():
        pytest.skip(f"no {python}: `tools/fwenv_old.sh {venv}` builds it")
    run = subprocess.run(
        [str(python), str(VALIDATORS / validator), "--values", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(VALIDATORS)},
    )
    assert run.returncode == 0, run.stderr[-6000:]
    return [json.loads(line) for line in run.stdout.strip().splitlines() if line.startswith("{")]


def expected(parsed: dict) -> dict:
    """memplan's fields as the parser's values say them."""
    out = {
        "micro_batch": parsed["per_device_train_batch_size"],
        "grad_accum": parsed["gradient_accumulation_steps"],
        "checkpointing": "full" if parsed["gradient_checkpointing"] else "off",
        "precision": "bf16" if parsed["bf16"] else "fp16" if parsed["fp16"] else "fp32",
        "num_generations": parsed["num_generations"],
        "max_completion_length": parsed["max_completion_length"],
        "beta": parsed["beta"],
        "max_pixels": parsed["max_pixels"],
        "min_pixels": parsed["min_pixels"],
        "lora_rank": parsed["lora_r"] if parsed["use_peft"] else None,
        "attention": ATTENTION[parsed["attn_implementation"]],
    }
    if not parsed["deepspeed"]:  # a DeepSpeed JSON's optimizer is DeepSpeed's (memplan reads it there)
        out["optimizer"] = {"adamw_torch": "adamw", "adamw_torch_fused": "adamw-fused"}[parsed["optim"]]
    return out


def read(path) -> dict:
    """memplan's reading of the same fields (a workload field not set: its default)."""
    r = intake.read([str(path)]).request
    w = r["workload"]
    assert r["framework"] == "trl@vlm-r1"
    out = {k: r.get(k) for k in ("micro_batch", "grad_accum", "checkpointing", "precision", "max_pixels", "min_pixels")}
    out |= {k: w.get(k, Workload.model_fields[k].default) for k in ("num_generations", "max_completion_length", "beta")}
    out |= {"lora_rank": r.get("lora_rank"), "attention": r.get("attention"), "optimizer": r.get("optimizer")}
    return out


@pytest.mark.sweep
def test_vlm_r1_scripts_read_as_vlm_r1s_own_parser_reads_them(tmp_path):
    venv = "trl-0.17.0"  # VLM-R1's pins
    (tmp_path / "model_only.sh").write_text(MODEL_ONLY)
    scripts = [*sorted(RUN.glob("run_grpo_rec*.sh")), tmp_path / "model_only.sh"]
    files = []
    for i, path in enumerate(scripts):
        files.append(tmp_path / f"argv{i}.json")
        files[-1].write_text(json.dumps(argv(path)))
    for path, line in zip(scripts, held(venv, "fork_validate.py", str(SCRIPT), *map(str, files)), strict=True):
        want = expected(line)
        got = read(path)
        assert {k: got.get(k) for k in want} == want, path.name


UNSLOTH = DATA / "scripts" / "unsloth"
# HF's optim names the notebooks use -> memplan's optimizer
OPTIM = {"adamw_8bit": "adamw-8bit", "paged_adamw_8bit": "paged-adamw-8bit", "adamw_torch": "adamw"}


@pytest.mark.sweep
def test_unsloth_notebooks_read_as_unsloths_own_config_classes_hold_them():
    """unsloth's notebooks (trl@unsloth), their SFTConfig / GRPOConfig call through the class unsloth puts in TRL's
    place (validators/unsloth_validate.py --values: built from unsloth's own template, at trl 0.22.2, the notebooks'
    pin), its GRPO batch rule applied as unsloth applies it (the GRPO notebook's micro-batch 1 becomes num_generations,
    6): memplan reads the same batch, optimizer and GRPO lengths. The sequence length is not the config's (unsloth's
    SFT trainer sets max_length from the model's max_seq_length, rl.py's max_length_check): test_unsloth.py reads it."""
    notebooks = sorted(UNSLOTH.glob("*.py"))
    for path, values in zip(notebooks, held("trl-0.22.2", "unsloth_validate.py", *map(str, notebooks)), strict=True):
        r = intake.read([str(path)]).request
        assert values["config"].startswith("Unsloth") and r["framework"] == "trl@unsloth"
        got = (r["micro_batch"], r["grad_accum"], r["optimizer"])
        want = (values["per_device_train_batch_size"], values["gradient_accumulation_steps"], OPTIM[values["optim"]])
        assert got == want, path.name
        if values["config"] == "UnslothGRPOConfig":
            w = r["workload"]
            grpo = ("num_generations", "max_prompt_length", "max_completion_length")
            assert tuple(w[k] for k in grpo) == tuple(values[k] for k in grpo), path.name
