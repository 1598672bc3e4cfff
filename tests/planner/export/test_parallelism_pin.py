"""A sequence- or context-parallel plan's train_args.json carries TrainingArguments.parallelism_config, a field from
transformers 4.56 (planner.frameworks.hf.launchenv TRAINER_PARALLELISM): the hf 4.54 line's pin starts there and
TRL's files name that transformers, or `pip install -r requirements.txt` may give a 4.54/4.55 whose parser refuses the
file. The release's own parser is the check: 4.54.1 and 4.55.4 refuse the written file, 4.56.2 takes it."""

import json
import subprocess

import pytest

from planner import advise
from planner.export import launch

from .test_old_releases_parse import ROOT


def written(framework: str) -> dict[str, str]:
    body = {"model": "qwen2.5-0.5b", "gpu": "h100", "gpus_per_node": 4, "global_batch": 16, "top": 1}
    body |= {"seq_len": 4096, "framework": framework, "evidence": "analytic"}
    body |= {"context_parallel": [2], "fsdp": ["full"]}
    res = advise.suggest(advise.parse(advise.SuggestRequest, body), with_nearest=False)
    plan, (model, hw, goal) = res.plans[0], res.context
    assert plan.context_parallel == 2
    return launch.files(plan, hw, model, goal.seq_len)


@pytest.mark.parametrize(
    ("framework", "pins"),
    [
        ("hf@4.54", ["transformers>=4.56.0,<5.0.0", "accelerate>=1.10.1"]),
        ("trl@0.22", ["trl>=0.22.0,<1.0.0", "transformers>=4.56.0", "accelerate>=1.10.1"]),
    ],
)
def test_a_context_parallel_plan_pins_the_transformers_of_parallelism_config(framework, pins):
    files = written(framework)
    assert "parallelism_config" in json.loads(files["train_args.json"])
    assert files["requirements.txt"].splitlines()[1:] == pins


PARSE = """import json, sys, transformers
import transformers.training_args as ta
from transformers import HfArgumentParser, TrainingArguments
ta.is_torch_bf16_gpu_available = lambda *a, **k: True  # a host without a bf16 GPU (validators/trl_validate.py)
args = json.load(open(sys.argv[1])) | {"output_dir": "o"}
try:
    HfArgumentParser(TrainingArguments).parse_dict(args)
    print(transformers.__version__, "taken")
except ValueError as e:
    print(transformers.__version__, "refused" if "not used by the HfArgumentParser" in str(e) else "error", e)
"""
# (venv, its transformers, what its parser does with the written file)
PARSERS = [("orl-0.8.9", "4.54.1", "refused"), ("swift-3.7.3", "4.55.4", "refused"), ("trl-0.22.2", "4.56.2", "taken")]


@pytest.mark.sweep
@pytest.mark.parametrize(("venv", "version", "verdict"), PARSERS, ids=[p[1] for p in PARSERS])
def test_the_release_parser_takes_the_field_from_4_56(venv, version, verdict, tmp_path):
    """6-13 s a venv (importing transformers, 2 shared cores)."""
    python = ROOT / venv / "bin" / "python"
    if not python.is_file():
        pytest.skip(f"no {python}: `tools/fwenv_old.sh {venv}` builds it")
    (tmp_path / "train_args.json").write_text(written("hf@4.54")["train_args.json"])
    run = subprocess.run(
        [str(python), "-c", PARSE, str(tmp_path / "train_args.json")],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.stdout.split()[:2] == [version, verdict], run.stdout + run.stderr[-2000:]
    if verdict == "refused":
        assert "parallelism_config" in run.stdout
