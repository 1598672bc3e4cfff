"""The fork and unsloth scripts memplan reads (issue 46 item 4), read as those projects' own config classes read them.
The GRPO forks: each command that runs the fork's entry script (VLM-R1's three run_scripts at 90052f4 through
grpo_jsonl.py; R1-V's run_grpo.sh at bbbbe3d and its issue 71 script through grpo.py; for each, one that sets nothing
but the model, for the defaults) goes through that script's own TrlParser in the venv of the fork's pins (trl-0.17.0
with transformers 4.49.0; trl-0.14.0: validators/fork_validate.py --values, the dataclasses from the verbatim copy's
syntax tree), and every field memplan reads from it, or takes as the fork's default, is the value that parser gives.
The command's words are memplan's shell reader's (planner.intake.shell): what is compared is the fields. unsloth: its
notebooks' config calls through the classes unsloth builds (below). Sweep tier (trl-0.17.0 is `tools/fwenv_old.sh
all`'s): one validator process a fork or unsloth, 10-25 s each on a loaded 2-core machine."""

import json
import os
import subprocess

import pytest

from planner import intake
from planner.config.workload import Workload
from planner.intake.shell import read_script
from tests.planner.export.test_old_releases_parse import FORK_SCRIPTS, ROOT, VALIDATORS
from tests.planner.intake.conftest import DATA

# per fork: the venv of its pins, the folder its commands `cd` to (memplan knows the fork by its files' paths), its
# own scripts memplan reads (tests/data; R1-V's issue 71 script as posted, tests/field), and a command that sets nothing
# but the model and the required dataset, for the fork's defaults
FIELD = DATA.parents[1] / "field"
FORKS = {
    "vlm-r1": (
        "trl-0.17.0",
        "src/open-r1-multimodal",
        sorted((DATA / "scripts" / "VLM-R1" / "run_scripts").glob("run_grpo_rec*.sh")),
        "--dataset-name x --model_name_or_path Qwen/Qwen2.5-VL-3B-Instruct",
    ),
    "r1-v": (
        "trl-0.14.0",
        "src/r1-v",
        [
            DATA / "scripts" / "R1-V" / "src" / "r1-v" / "run_grpo.sh",
            FIELD / "r1v-71-qwen25vl7b-grpo-z3-4xa100" / "train.sh",
        ],
        "--output_dir out --dataset_name x --model_name_or_path Qwen/Qwen2.5-VL-3B-Instruct",  # transformers 4.48.2 needs output_dir
    ),
}
ATTENTION = {"flash_attention_2": "flash", "sdpa": "sdpa", "eager": "eager", None: None}


def argv(path, entry: str) -> list[str]:
    """The arguments the script's torchrun line hands the fork's entry script."""
    (words,) = [c.argv for c in read_script(path).commands if any(w.endswith(entry) for w in c.argv)]
    return words[next(i for i, w in enumerate(words) if w.endswith(entry)) + 1 :]


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
        "max_pixels": parsed["max_pixels"],  # where memplan plans images (read() leaves them out otherwise)
        "min_pixels": parsed["min_pixels"],
        "lora_rank": parsed["lora_r"] if parsed["use_peft"] else None,
        "attention": ATTENTION[parsed["attn_implementation"]],
    }
    if not parsed["deepspeed"]:  # a DeepSpeed JSON's optimizer is DeepSpeed's (memplan reads it there)
        out["optimizer"] = {"adamw_torch": "adamw", "adamw_torch_fused": "adamw-fused"}[parsed["optim"]]
    return out


def read(path, fork: str) -> dict:
    """memplan's reading of the same fields (a workload field not set: its default; the pixel caps only where it plans
    images: R1-V's are not planned without a catalog model)."""
    r = intake.read([str(path)]).request
    w = r["workload"]
    assert r["framework"] == f"trl@{fork}"
    out = {k: r.get(k) for k in ("micro_batch", "grad_accum", "checkpointing", "precision")}
    out |= {k: w.get(k, Workload.model_fields[k].default) for k in ("num_generations", "max_completion_length", "beta")}
    out |= {"lora_rank": r.get("lora_rank"), "attention": r.get("attention"), "optimizer": r.get("optimizer")}
    return out | ({"max_pixels": r["max_pixels"], "min_pixels": r["min_pixels"]} if "images" in r else {})


@pytest.mark.sweep
@pytest.mark.parametrize("fork", FORKS)
def test_fork_scripts_read_as_the_forks_own_parser_reads_them(fork, tmp_path):
    venv, folder, scripts, flags = FORKS[fork]
    entry = FORK_SCRIPTS[fork]
    model_only = tmp_path / fork / "run.sh"  # under a folder named as the fork: memplan knows it by the path
    model_only.parent.mkdir()
    model_only.write_text(f"cd {folder}\ntorchrun --nproc_per_node 2 src/open_r1/{entry.name} {flags}\n")
    scripts = [*scripts, model_only]
    files = []
    for i, path in enumerate(scripts):
        files.append(tmp_path / f"argv{i}.json")
        files[-1].write_text(json.dumps(argv(path, entry.name)))
    for path, line in zip(scripts, held(venv, "fork_validate.py", str(entry), *map(str, files)), strict=True):
        want, got = expected(line), read(path, fork)
        both = want.keys() & got.keys()  # the optimizer where no DeepSpeed JSON names one, the pixels where planned
        assert {k: want[k] for k in both} == {k: got[k] for k in both}, path


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
