"""Issue 47 ("another trainer's defaults are never borrowed silently") at each LLaMA-Factory release line: what memplan
fills where a YAML names only the model, stage and finetuning type, read at the line its version pin names
(requirements.txt `llmtuner==` to 0.7.1, `llamafactory==` after), equals that release's own argument classes'
defaults (hparams DataArguments, ModelArguments, FinetuningArguments and its TrainingArguments, HF's
Seq2SeqTrainingArguments before v0.9.2, with the transformers and torch of the line's venv, tools/fwenv_old.sh). The
classes are read with dataclasses.fields, never instantiated, from their own modules (the package's __init__, which
loads the web UI and the trainers, is not run): one process a venv, ~3-5 s. The other end of a line (lf-0.9.0, the 0.8
line's) runs in the sweep tier, as tests/planner/export/test_old_releases_parse.py SWEEP_VENVS.
The lf-0.9.4 case failed before the fix: memplan planned v0.9.4 with foreach AdamW (the hungrier of its 4.51-4.57.1
pin's two answers), where pip's transformers 4.57.1 runs adamw_torch_fused (training_args.py:1292-1299)."""

from pathlib import Path

import pytest

from planner.errors import BadInput
from planner.frameworks.llamafactory.reader import REFUSED, UNPLANNED
from tests.planner.export.test_old_releases_parse import SWEEP, SWEEP_VENVS
from tests.planner.frameworks.linedefaults import cited_defaults, own_defaults, read_pinned, venv_or_skip

LINES = [
    *(("0.5", "0.5.3"), ("0.6", "0.6.3"), ("0.7", "0.7.0"), ("0.7.1", "0.7.1"), ("0.8", "0.8.3"), ("0.8", "0.9.0")),
    *((line, line) for line in ("0.9.1", "0.9.2", "0.9.3", "0.9.4")),
]
KEYS = (
    "cutoff_len",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "optim",
    "lora_rank",
    "lora_target",
    "lora_dropout",
    "disable_gradient_checkpointing",
    "bf16",
    "fp16",
    "flash_attn",
)
# the argument modules alone, under stand-in packages (llmtuner's and llamafactory's __init__ import the web UI)
PROBE = f"""
import dataclasses, importlib, importlib.util, json, sys, types
name = "llamafactory" if importlib.util.find_spec("llamafactory") else "llmtuner"
root = importlib.util.find_spec(name).submodule_search_locations[0]
for pkg, path in ((name, root), (name + ".hparams", root + "/hparams")):
    sys.modules[pkg] = types.ModuleType(pkg)
    sys.modules[pkg].__path__ = [path]
classes = []
for mod, cls in (("data_args", "DataArguments"), ("model_args", "ModelArguments"),
                 ("finetuning_args", "FinetuningArguments"), ("training_args", "TrainingArguments")):
    try:
        classes.append(getattr(importlib.import_module(name + ".hparams." + mod), cls))
    except ModuleNotFoundError:  # no training_args.py before v0.9.2: HF's own class
        from transformers import Seq2SeqTrainingArguments
        classes.append(Seq2SeqTrainingArguments)
out = {{}}
for c in classes:
    for f in dataclasses.fields(c):
        if f.name in {KEYS!r}:
            out[f.name] = f.default
names = {{f.name for c in classes for f in dataclasses.fields(c)}}
out["takes"] = sorted(names & set({sorted({*UNPLANNED, *REFUSED})!r}))
print(json.dumps(out, default=str))
"""
OPTIM = {"adamw_torch": "adamw", "adamw_torch_fused": "adamw-fused"}
YAML = "model_name_or_path: Qwen/Qwen2.5-0.5B-Instruct\nstage: {stage}\ndo_train: true\nfinetuning_type: {ft}\noutput_dir: out\n"


def _read(tmp_path: Path, version: str, stage: str, ft: str, keys=()):
    """memplan's reading of a YAML naming the model, stage and finetuning type (and `keys` set on), beside its
    release's pin."""
    package = "llmtuner" if version < "0.8" else "llamafactory"
    yaml = YAML.format(stage=stage, ft=ft) + "".join(
        f"{k}: {0.01 if k == 'moe_aux_loss_coef' else 'true'}\n" for k in keys
    )
    return read_pinned(
        tmp_path / f"{stage}-{ft}{'-' + keys[0] if keys else ''}", f"{package}=={version}", "train.yaml", yaml
    )


def _check_unplanned(tmp_path: Path, line: str, version: str, takes: set[str]) -> None:
    """The reader's unplanned and refused keys (reader.py UNPLANNED, REFUSED) said as the line takes them: a key its
    venv's classes take is the newest's note (or refusal), never "not a llamafactory LINE key"; one they do not take
    is one note, that line's "not a ... key" where the line is that one release (a line of several releases may take
    it at another: the refused ones are read there only where the venv takes them). Failed before the fix: 0.7.1's
    use_dft_loss, fp8 and use_kt said twice, the newest's way too; 0.9.1's use_kt, use_dft_loss too."""
    keys = [*UNPLANNED, *(sorted(set(REFUSED) - takes) if line == version else ())]
    r = _read(tmp_path, version, "sft", "lora", keys)
    for key in keys:
        said = [u for u in r.unplanned if u.startswith(f"train.yaml: {key}:")]
        not_key = [u for u in said if f"not a llamafactory {line} key" in u]
        if key in takes:
            assert said and not not_key, (key, said)
        else:
            assert len(said) == 1 and (not_key or line != version), (key, said)
    for key in sorted(set(REFUSED) & takes):
        with pytest.raises(BadInput, match=REFUSED[key]):
            _read(tmp_path, version, "sft", "full", [key])


def _expected(own: dict, stage: str, ft: str) -> dict:
    out = {
        "workload.max_length" if stage == "dpo" else "seq_len": own["cutoff_len"],
        "micro_batch": own["per_device_train_batch_size"],
        "grad_accum": own["gradient_accumulation_steps"],
        "optimizer": OPTIM[own["optim"]],
        "checkpointing": "off" if own["disable_gradient_checkpointing"] else "full",
        "precision": "bf16" if own["bf16"] else "fp16" if own["fp16"] else "fp32",
        # flash_attn False (to v0.6.3): eager (keys.py OLD_FLASH_ATTN); "auto" is transformers' own choice: unset
        "attention": "eager" if own["flash_attn"] in (False, "False") else None,
    }
    if ft == "lora":
        out |= {"lora_rank": own["lora_rank"], "lora_dropout": own["lora_dropout"]}
    return out


@pytest.mark.parametrize(
    ("line", "version"),
    [
        pytest.param(line, v, id=f"llamafactory@{line}:lf-{v}", marks=[SWEEP] if f"lf-{v}" in SWEEP_VENVS else [])
        for line, v in LINES
    ],
)
def test_each_line_fills_its_own_releases_defaults(tmp_path, line, version):
    venv = venv_or_skip(f"lf-{version}")
    own = own_defaults(venv, PROBE)
    for stage, ft in (("sft", "lora"), ("sft", "full"), ("dpo", "lora")):
        r = _read(tmp_path, version, stage, ft)
        s = {x.field: x for x in r.settings}
        assert s["framework"].value == f"llamafactory@{line}", (stage, ft, s["framework"])
        for field, want in _expected(own, stage, ft).items():
            got = s.get(field)
            assert (got.value if got is not None else None) == want, (stage, ft, field, got, want)
            if got is not None:  # a default the line did not move names the line, as at the newest (line_defaults)
                assert cited_defaults(got.source) <= {f"llamafactory@{line}"}, (stage, ft, field, got.source)
        if ft == "lora" and own["lora_target"] is None:  # v0.5.3: LoRA stops without it (parser.py:141-142)
            assert any("stops without lora_target" in u for u in r.unplanned), r.unplanned
        elif ft == "lora":
            assert own["lora_target"] == "all" and s["lora_targets"].value == "all-linear", s["lora_targets"]
    _check_unplanned(tmp_path, line, version, set(own["takes"]))
