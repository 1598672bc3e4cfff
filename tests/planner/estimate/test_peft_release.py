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
    """memplan's venv holds constraints.txt's PEFT; the lines that pin none are planned at it."""
    pytest.importorskip("peft")
    assert version(importlib.metadata.version("peft")) == peft_release.PEFT_0_22


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
