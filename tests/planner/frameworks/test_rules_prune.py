"""Issue 46 item 4, the guard: a framework's rules prune the search. For each framework with its own files, the catalog
models (one a family per commit, every size in the sweep tier) x two shapes x full fine-tuning, LoRA and the RL
workloads it runs (one a family in turn on every commit, each workload at both shapes there; all in the sweep tier):
every plan `suggest` ranks (the top one a request on every commit, two in the sweep tier, four at the other sizes) is
written in that framework's files, never the HF fallback, and the files pass the framework's own parser in its venv
(tests/planner/export/validators, where the venv is named)."""

import os
import subprocess
from pathlib import Path

import pytest

from planner import advise
from planner.errors import BadInput
from planner.export import launch
from planner.frameworks import FRAMEWORKS
from planner.frameworks.torchtitan import MODELS as TORCHTITAN_MODELS
from planner.model import catalog
from planner.model.shapes import REMOTE_CODE_ONLY

VALIDATORS = Path(__file__).parents[1] / "export" / "validators"
# framework -> (venv variable, validator, the file it reads); RL plans of verl use their own validator
PARSERS = {
    "llamafactory": ("MEMPLAN_LLAMAFACTORY_PYTHON", "llamafactory_validate.py"),
    "swift": ("MEMPLAN_SWIFT_PYTHON", "swift_validate.py"),
    "axolotl": ("MEMPLAN_AXOLOTL_PYTHON", "axolotl_validate.py"),
    "verl": ("MEMPLAN_VERL_PYTHON", "verl_validate.py"),
    "verl-rl": ("MEMPLAN_VERL_PYTHON", "verl_rl_validate.py"),
    "torchtitan": ("MEMPLAN_TORCHTITAN_PYTHON", "torchtitan_validate.py"),
    "openrlhf": ("MEMPLAN_OPENRLHF_PYTHON", "openrlhf_validate.py"),
}
WORKLOADS = {
    "sft": {},
    "lora": {"lora_rank": [16]},
    "grpo": {"workload": {"kind": "grpo", "num_generations": 8, "max_completion_length": 256}},
    "dpo": {"workload": {"kind": "dpo", "max_length": 1024}},
    "ppo": {"workload": {"kind": "ppo", "num_generations": 4, "max_completion_length": 256}},
}
SHAPES = ((16, 2048), (64, 8192))
OWN = {"torchtitan": {"attention": ["flash"], "batching": ["packed"]}}  # what torchtitan alone runs
TOP = {"families": 1, "families-more": 2, "sizes": 4}  # the plans ranked and written a request


def _family_heads() -> set[str]:
    seen, out = set(), set()
    for name in catalog.model_names():
        if name.startswith("debug-"):
            continue
        kind = catalog.load_model(name).model_type
        if kind not in seen:
            seen.add(kind)
            out.add(name)
    return out


HEADS = _family_heads()
EXPORTERS = ("llamafactory", "swift", "axolotl", "verl", "torchtitan", "openrlhf")
# one model a family on every commit, each at one of the two shapes in turn (so that every family and every shape is
# checked there: stop 68, for CI's room, where both took 200 s of a worker), its top plan (stop 70: the top two took
# 98 s of a worker for verl alone, 61 s of them verl's Hydra composing 96 RL scripts), for one workload in turn (stop 74:
# workloads()); both shapes' top two plans of each family for every workload and the catalog's other sizes in the sweep
# tier (`make test-all`)
TIERS = [
    pytest.param(fw, tier, marks=() if tier == "families" else pytest.mark.sweep)
    for fw in EXPORTERS
    for tier in ("families", "families-more", "sizes")
]


def shapes(tier: str, i: int) -> tuple:
    """The shapes the i-th model of a tier is ranked at: its turn's on every commit, both in the sweep tier."""
    return (SHAPES[i % len(SHAPES)],) if tier == "families" else SHAPES


def workloads(framework: str, tier: str, i: int, n: int) -> list[str]:
    """The workloads the i-th of n models of a tier is ranked for: on every commit one in turn (the turn moving every
    second model, so that each workload meets both shapes), every one where the tier has fewer models than twice the
    workloads; all of them in the sweep tier. Stop 74, for CI's room: every family's five workloads took 259 s of a
    worker in make test, and the requests that rank nothing (a 671B model at 16 x 2,048) cost as much as the others."""
    own = [w for w in WORKLOADS if runs(framework, w)]
    if tier != "families" or n < 2 * len(own):
        return own
    return [own[(i // len(SHAPES)) % len(own)]]


def models(tier: str, framework: str) -> list[str]:
    """The models of a tier (debug models stand for their families' own); torchtitan's are the ones it defines."""
    # a family transformers has no class for (Qwen v1) has no module tree the validators can build on the meta device
    names = [
        n
        for n in catalog.model_names()
        if not n.startswith("debug-") and catalog.load_model(n).model_type not in REMOTE_CODE_ONLY
    ]
    if framework == "torchtitan":
        return [n for n in TORCHTITAN_MODELS if (n in ("llama-3.1-8b", "qwen3-30b-a3b")) == tier.startswith("families")]
    return [n for n in names if (n in HEADS) == tier.startswith("families")]


def runs(framework: str, workload: str) -> bool:
    kind = (WORKLOADS[workload].get("workload") or {"kind": "sft"})["kind"]
    return kind in FRAMEWORKS[framework].runs.get("workload", ("sft",))


def ranked(framework: str, model: str, workload: str, batch: int, seq: int, top: int = 4):
    body = {
        "model": model,
        "gpu": "h100",
        "gpus_per_node": 8,
        "global_batch": batch,
        "seq_len": seq,
        "framework": framework,
        "evidence": "analytic",
        "top": top,
        **WORKLOADS[workload],
        **OWN.get(framework, {}),
    }
    if "workload" in body:
        body.pop("seq_len")
    return suggested(body)


def suggested(body: dict) -> list:
    """(plan, model, hardware, sequence length) of every plan `suggest` ranks for request `body`."""
    try:
        res = advise.suggest(advise.parse(advise.SuggestRequest, body), with_nearest=False)
    except BadInput:
        return []  # refused whole, in one line: nothing ranked
    model_spec, hw, goal = res.context
    return [(p, model_spec, hw, goal.seq_len) for p in res.plans]


def written(
    framework: str, model: str, folder: Path, top: int, at: tuple = SHAPES, kinds: list[str] | None = None
) -> dict[str, list[Path]]:
    """Every ranked plan's files in a folder of its own (the requests for the workloads `kinds`, all the framework
    runs by default, at the shapes `at`); the files each validator reads, by validator."""
    out: dict[str, list[Path]] = {}
    for workload in kinds or [w for w in WORKLOADS if runs(framework, w)]:
        for batch, seq in at:
            for i, (plan, spec, hw, seq_len) in enumerate(ranked(framework, model, workload, batch, seq, top)):
                try:
                    _command, files = launch.framework_launch(plan, spec, hw, seq_len)
                except ValueError as e:  # what launch() would turn into HF material and a note
                    raise AssertionError(f"{framework} {model} {workload} {batch}x{seq}: ranked, then refused: {e}")
                d = folder / f"{workload}-{batch}-{seq}-{i}"
                d.mkdir(parents=True)
                for name, text in files.items():
                    (d / name).write_text(text)
                key = "verl-rl" if framework == "verl" and plan.knobs.role_run else framework
                out.setdefault(key, []).append(d / primary(key, files))
    return out


def primary(key: str, files: dict[str, str]) -> str:
    """The file a framework's validator reads: its config or launch script (not launch.sh, DeepSpeed or FSDP JSON)."""
    ext = {"llamafactory": ".yaml", "axolotl": ".yaml", "torchtitan": ".py"}.get(key, ".sh")
    return next(n for n in files if n.endswith(ext) and n != launch.LAUNCH_NAME)


@pytest.mark.parametrize("framework,tier", TIERS)
def test_every_ranked_plan_is_written_and_parsed_by_its_framework(framework, tier, tmp_path):
    by_validator: dict[str, list[tuple[str, Path]]] = {}
    names, met = models(tier, framework), set()
    for i, model in enumerate(names):
        kinds = workloads(framework, tier, i, len(names))
        met.update((w, s) for w in kinds for s in shapes(tier, i))
        for key, paths in written(framework, model, tmp_path / model, TOP[tier], shapes(tier, i), kinds).items():
            by_validator.setdefault(key, []).extend((model, p) for p in paths)
    assert by_validator, "nothing ranked: the guard checks nothing"
    # every workload the framework runs is requested at both shapes on every commit, whichever models take the turns
    assert met == {(w, s) for w in WORKLOADS if runs(framework, w) for s in SHAPES}, sorted(met)
    for key, written_files in by_validator.items():
        var, script = PARSERS[key]
        python = os.environ.get(var)
        if not python:
            continue  # the fallback half above still ran; `make test` names every venv
        if key == "verl":  # verl's validator builds a stand-in with each model's heads: PATH@HEADS,KV
            t = {m: catalog.load_model(m).text for m, _ in written_files}
            args = [f"{p}@{t[m].heads},{t[m].kv_heads}" for m, p in written_files]
        else:
            args = [str(p) for _, p in written_files]
        run = subprocess.run(
            [python, str(VALIDATORS / script), *args],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
            cwd=written_files[0][1].parent,
        )
        assert run.returncode == 0, f"{key}: " + run.stdout[-3000:] + run.stderr[-3000:]
        assert run.stdout.count(": OK") >= len(args), run.stdout[-3000:]
