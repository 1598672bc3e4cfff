"""planner.estimate.peft_release against what each PEFT does (probes/peft_release.py, run in every venv that holds
one: memplan's, pinned by constraints.txt, and the frameworks' under MEMPLAN_*_PYTHON, `make fwenv`): the merge's B @ A
matrices and AdaLoRA's ranknum on a bf16 base, at the release the venv holds; and the release each line runs.

Measured when pinned (2026-12-07): PEFT 0.22.0 (.venv) 1 matrix, ranknum frozen; 0.21.2 (verl's venv) 2, trained;
0.20.0 (ms-swift's, axolotl's) 2, frozen; 0.18.1 (LLaMA-Factory's) 2, frozen."""

import importlib.metadata
import os
import sys
from pathlib import Path

import pytest

from planner.config.spec import Knobs
from planner.estimate import peft_release
from planner.frameworks import peft
from tests.probes.venvprobe import run_probe

VENVS = ["", "MEMPLAN_VERL_PYTHON", "MEMPLAN_SWIFT_PYTHON", "MEMPLAN_LLAMAFACTORY_PYTHON", "MEMPLAN_AXOLOTL_PYTHON"]


def version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(".")[:3])


@pytest.mark.parametrize("env", VENVS)
def test_each_peft_merges_and_casts_as_its_release_says(env):
    pytest.importorskip("peft")
    python = os.environ.get(env) if env else sys.executable
    if not python or not Path(python).exists():
        pytest.skip(f"{env} names no venv (make fwenv builds them)")
    got = run_probe(python, "peft_release.py")
    v = version(got["peft"])
    assert got["merge_matrices"] == peft_release.merge_copies_at(v), got
    assert got["ranknum_trained"] == peft_release.trains_ranknum_at(v), got


def test_the_peft_the_tests_measure_is_the_one_an_unpinned_line_runs():
    """memplan's venv holds constraints.txt's PEFT; the lines that pin none are planned at it (read from its metadata:
    importing PEFT takes seconds)."""
    try:
        installed = importlib.metadata.version("peft")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("no PEFT installed (make setup-dev installs constraints.txt's)")
    assert version(installed) == peft_release.PEFT_0_22


@pytest.mark.parametrize(
    "framework,release,peft_line,copies",
    [
        ("memplan", "", (0, 22, 0), 1),
        ("trl", "", (0, 22, 0), 1),
        ("hf", "", (0, 22, 0), 1),
        ("verl", "", (0, 22, 0), 1),
        ("trl", "0.22", (0, 21, 2), 2),  # transformers 4.56: a PEFT before 0.22
        ("llamafactory", "", (0, 18, 1), 2),  # v0.9.5: peft<=0.18.1
        ("swift", "", (0, 20, 0), 2),  # 4.6.0: peft<0.21
        ("axolotl", "", (0, 20, 0), 2),  # 0.19.0: peft==0.20.0
    ],
)
def test_each_line_runs_the_peft_its_pins_allow(framework, release, peft_line, copies):
    assert peft.peft_of(framework, release) == peft_line
    fsdp = {"fsdp": "full"} if framework == "verl" else {}  # verl runs FSDP alone
    assert peft_release.merge_copies(Knobs(framework=framework, release=release, lora_rank=8, **fsdp)) == copies


def test_a_transformers_4_line_reaches_every_linear_and_keeps_lora_dropout():
    """On transformers 4 each expert's projections and the router are nn.Linear modules: any all-linear adapts them
    (planned as PEFT 0.22's reach of the stacked ones) and LoRA dropout runs (no ParamWrapper); on transformers 5
    TRL's newest line maps Mixtral's experts onto ParamWrapper, which refuses it."""
    from planner import advise
    from planner.errors import BadInput
    from planner.estimate.setup import Setup
    from planner.model.catalog import load_model

    mixtral = load_model("mixtral-8x7b")
    old, new = (Setup(mixtral, Knobs(framework="trl", release=r, lora_rank=8), 1, 1, 16) for r in ("0.22", ""))
    assert old.model.lora_params(8, "all-linear") == new.model.lora_params(8, "all-linear")
    body = {"model": "mixtral-8x7b", "gpu": "h100", "gpus_per_node": 8, "micro_batch": 1, "seq_len": 1024}
    knobs = {"lora_rank": 8, "lora_dropout": 0.05, "zero_stage": 3}
    assert advise.check(advise.parse(advise.CheckRequest, {**body, **knobs, "framework": "trl@0.22"})).plan
    with pytest.raises(BadInput, match="ParamWrapper refuses any dropout"):
        advise.check(advise.parse(advise.CheckRequest, {**body, **knobs, "framework": "trl"}))
