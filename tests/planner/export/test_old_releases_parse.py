"""Issue 46 item 4 at every written line: the files `suggest --framework F@LINE --emit` writes for the plans it ranks
pass that release's OWN parser and validator, not only the newest one's (test_frameworks_export.py). One venv per
release (tools/fwenv_old.sh NAME builds it, 15-60 s; .fwenv-old/ or MEMPLAN_FWENV_OLD), one validator process per
release (verl: one more for its SFT scripts per model) over every plan kind the line runs (LoRA, full SFT, a 7B full
SFT that shards, DPO, GRPO, LLaMA-Factory's FSDP); a kind the line's rules leave unranked is counted, not written.
OpenRLHF and verl add their role runs (test_rl_exports.py's GRPO and PPO plans, `check`ed at the line). Every line
once on every commit (`make test` builds `tools/fwenv_old.sh ci` first) but LLaMA-Factory's 0.7; a line's other end
and that line in the sweep tier (SWEEP_VENVS, `make test-all`). A release whose venv is not built is skipped, saying which command builds it.
docs/tests.md records the runs."""

import os
import subprocess
from pathlib import Path

import pytest

from planner import advise
from planner.errors import BadInput
from planner.export import launch
from planner.model import catalog

from .test_rl_exports import BASE as RL_BASE
from .test_rl_exports import CASES as RL_CASES

ROOT = Path(os.environ.get("MEMPLAN_FWENV_OLD", Path(__file__).resolve().parents[3] / ".fwenv-old"))
VALIDATORS = Path(__file__).parent / "validators"
GRPO = {"workload": {"kind": "grpo", "num_generations": 4}}
KINDS = {
    "lora": {"lora_rank": 8, "seq_len": 1024},
    "full": {"seq_len": 1024},
    "full-7b": {"model": "qwen2.5-7b", "seq_len": 1024},
    "dpo": {"workload": {"kind": "dpo", "max_length": 1024}},
    "grpo": GRPO,
}
# a framework's (or a line's) own kinds besides: LLaMA-Factory's FSDP plan (0.9.3 on; before, a rule: its accelerate
#   predates FSDP2) writes accelerate_fsdp_config.yaml, which the validator loads with that release's accelerate; HF's
#   Trainer at its 4 line (transformers 4.53.0) the same: accelerate_config.yaml as `accelerate launch --config_file`
#   reads it with accelerate 1.8.1 (trl_validate.py accelerate_launched; its hybrid shard pins accelerate>=1.10.1: the
#   -mesh venvs, MESHED); the GRPO forks' vision-language GRPO (LoRA on the language model, its images within a pixel cap the
#   fork's script takes; the 7B sharded with ZeRO, their FSDP being a rule)
FSDP = {"fsdp": {"fsdp": ["full"], "seq_len": 1024}}
# HSDP over 2 nodes x 2 GPUs: the validator builds the mesh the ranks' Accelerator builds from the written variables
# and reports it (trl_validate.py mesh); FSDP2 over a mesh that is not one replica a node, or none, fails the case
HSDP = {"hsdp": {"fsdp": ["hybrid"], "nodes": 2, "seq_len": 1024}}
MESH = {"hsdp": " mesh=('dp_replicate', 'dp_shard_cp') 2x2"}
# the HSDP files pin accelerate>=1.10.1 (its ParallelismConfig reads the mesh variables: planner.frameworks.hf.launchenv
# ACCELERATE_HSDP): a venv with an older accelerate (hf@4's and trl@0.19's month ran 1.8.1) leaves that kind to the
# line's -mesh venv, the line's release with accelerate 1.10.1 (sweep tier)
MESHED = (1, 10)
VL_GRPO = {
    "grpo-vl-lora": {"model": "qwen2.5-vl-3b", "lora_rank": 8, "images": 1, "max_pixels": 401408, **GRPO},
    "grpo-vl-7b": {"model": "qwen2.5-vl-7b", **GRPO},
}
# Liger's loss with SFT (use_liger_kernel) at TRL's 1.0 and 1.10 lines, which run it (planner/frameworks/trl/
# releases.py ONE_X_RUNS; the newest's fused head refuses it)
LIGER = {"liger": {"loss": ["fused"], "seq_len": 1024}}
OWN_KINDS = {
    "1.0": LIGER,
    "1.10": LIGER,
    # freeze tuning of the first 2 layers: a negative freeze_trainable_layers (num_layer_trainable to v0.7.0)
    "llamafactory": FSDP | {"freeze-first": {"trained_layers": 2, "trained_layout": "first", "seq_len": 1024}},
    "hf": FSDP | HSDP,
    "trl": HSDP,
    "r1-v": VL_GRPO,
    "vlm-r1": VL_GRPO,
    # ms-swift's --train_type adalora | vera at 3.x, with their own rank flags (planner/frameworks/swift/keys.py)
    "swift": {
        "adalora": {"lora_rank": 12, "lora_variant": "adalora", "seq_len": 1024},
        "vera": {"lora_rank": 64, "lora_variant": "vera", "lora_targets": "v_proj", "seq_len": 1024},
        # --train_type adapter --adapter_length (v3.12.6 swift/llm/argument/tuner_args.py:192-193)
        "adapter": {"lora_rank": 64, "lora_variant": "adapter", "seq_len": 1024},
        # --train_type llamapro --llamapro_num_new_blocks (v3.0.0 swift/llm/argument/tuner_args.py:183-184)
        "llamapro": {"trained_layers": 4, "trained_layout": "inserted", "precision": ["bf16-pure"], "seq_len": 1024},
        # GRPO with vLLM: --vllm_mode from 3.5, 3.4.x's --num_infer_workers / --vllm_device at the 3.4 line
        # (planner/frameworks/swift/writer_rollout.py; 3.4.1's parser leaves --vllm_mode over)
        **{
            f"grpo-vllm-{g}": {"workload": {**GRPO["workload"], "generation": f"vllm-{g}"}}
            for g in ("colocate", "server")
        },
    },
}
RANKED = {
    ("llamafactory", "0.9.3"): {"fsdp"},
    ("llamafactory", "0.9.4"): {"fsdp"},
    ("hf", "4"): {"fsdp"},
    ("trl", "1.0"): {"liger"},
    ("trl", "1.10"): {"liger"},
}
CONFIG = {
    "lora": "SFTConfig",
    "full": "SFTConfig",
    "liger": "SFTConfig",
    "full-7b": "SFTConfig",
    "fsdp": "SFTConfig",
    "hsdp": "SFTConfig",
    "dpo": "DPOConfig",
}
LF, SWIFT, TRL = "llamafactory_old_validate.py", "swift_old_validate.py", "trl_validate.py"
# the GRPO forks' lines: their GRPO command through the fork's own entry script's parser (its dataclasses from the
# verbatim copy's syntax tree, VLM-R1's GRPOConfig from its own trainer/grpo_config.py), their SFT and DPO plans
# through TRL's configs at the pinned release (trl_validate.py's check): one process a line
FORK = "fork_validate.py"
SCRIPTS = Path(__file__).resolve().parents[2] / "data" / "frameworks" / "scripts"
FORK_SCRIPTS = {
    "r1-v": SCRIPTS / "R1-V" / "src" / "r1-v" / "src" / "open_r1" / "grpo.py",
    "vlm-r1": SCRIPTS / "VLM-R1" / "src" / "open-r1-multimodal" / "src" / "open_r1" / "grpo_jsonl.py",
}
ORL, VERL = "openrlhf_validate.py", "verl_rl_validate.py"
VERL_SFT = "verl_validate.py"  # verl's SFT scripts (verl@0.6 writes them since a649829): Hydra, dataclasses, engine
# the role runs `check`ed per line; verl's PPO also without its reward model (0.6.x writes none: its rule)
ROLE_RUNS = {
    "openrlhf": RL_CASES["openrlhf"],
    "verl": RL_CASES["verl"]
    | {"ppo-no-rm": {**RL_CASES["verl"]["ppo"], "workload": {"kind": "ppo", "num_generations": 4}}},
}
# per line, what a request adds (none: OpenRLHF 0.8.x's --flash_attn switch writes flash-attn or eager, and a request
# naming no attention is searched at the line's own, eager: planner.config.requests Space.release_attention; so are
# LLaMA-Factory's 0.5 and 0.6 lines)
BODY: dict[tuple[str, str], dict] = {}
SWEEP = pytest.mark.sweep
# (framework, line, venv of tools/fwenv_old.sh, validator): each written line once on every commit (the venvs of
# `tools/fwenv_old.sh ci`, which `make test` builds; VLM-R1's and unsloth's own parsers too); the sweep tier adds the
# other end of a line: LLaMA-Factory's 0.8 line runs 0.8.0 .. 0.9.0, verl's 0.6 is
# 0.6.0 and 0.6.1. R1-V's fork trains with trl 0.14.0's GRPOConfig (setup.py:65), VLM-R1 its own GRPOConfig over
# transformers 4.49.0 with trl 0.17.0 (setup.py:65-66: the venv trl-0.17.0); hf@4 and hf@4.54 write TRL's
# script flags and TrainingArguments (TrainingArguments' own parser)
RELEASES = [
    *(("llamafactory", line, f"lf-{v}", LF) for line, v in (("0.5", "0.5.3"), ("0.6", "0.6.3"), ("0.7", "0.7.0"))),
    ("llamafactory", "0.7.1", "lf-0.7.1", LF),
    *(("llamafactory", line, f"lf-{v}", LF) for line, v in (("0.8", "0.8.3"), ("0.8", "0.9.0"), ("0.9.1", "0.9.1"))),
    *(("llamafactory", line, f"lf-{line}", LF) for line in ("0.9.2", "0.9.3", "0.9.4")),
    *(("swift", line, f"swift-{v}", SWIFT) for line, v in (("3", "3.0.3"), ("3.4", "3.4.1"), ("3.7", "3.7.3"))),
    ("swift", "3.9", "swift-3.12.6", SWIFT),  # 3.9's newest: its flags are 3.7's (keys.V3), its KTO packs
    *(("trl", line, f"trl-{v}", TRL) for line, v in (("0.14", "0.14.0"), ("0.15", "0.15.2"), ("0.19", "0.19.1"))),
    *(("trl", line, f"trl-{v}", TRL) for line, v in (("0.22", "0.22.2"), ("1.0", "1.0.0"), ("1.10", "1.10.0"))),
    ("trl", "r1-v", "trl-0.14.0", FORK),
    ("trl", "vlm-r1", "trl-0.17.0", FORK),
    # unsloth over TRL 0.22.2 (its notebooks' pin; unsloth 2026.8.19 allows 0.18.2-0.24.0): the config classes unsloth
    # puts in TRL's place, built from its own template (validators/unsloth_validate.py)
    ("trl", "unsloth", "trl-0.22.2", "unsloth_validate.py"),
    # hf@4's FSDP files pin transformers >=4.51 and accelerate >=1.6 (the Trainer's FSDP2 path: planner.frameworks.hf
    # .launchenv), so the line is checked at its newest, 4.53.0; hf@4.54 with trl-0.22.2's 4.56.2, its newest 4.57.1
    # in the sweep tier
    ("hf", "4", "hf-4.53.0", TRL),
    ("hf", "4", "hf-4.53.0-mesh", TRL),
    ("trl", "0.19", "trl-0.19.1-mesh", TRL),
    ("hf", "4.54", "trl-0.22.2", TRL),
    ("hf", "4.54", "hf-4.57.1", TRL),
    # OpenRLHF's flat-flag lines (0.8 is 0.5.4 .. 0.8.9: its newest checked; 0.5 writes 0.8's flags), verl 0.6 at both
    ("openrlhf", "0.10", "orl-0.10.1", ORL),
    ("openrlhf", "0.8", "orl-0.8.9", ORL),
    *(("verl", "0.6", f"verl-{v}", VERL) for v in ("0.6.0", "0.6.1")),
]
SWEEP_VENVS = {
    "lf-0.9.0",
    "verl-0.6.0",
    "hf-4.57.1",
    "hf-4.53.0-mesh",
    "trl-0.19.1-mesh",
}  # those `tools/fwenv_old.sh ci` leaves out
# lines checked in the sweep tier in a venv the default tier builds (for its release's own defaults, checked on every
# commit by the lines' test_line_defaults.py): since stop 69, for CI's room (about 10 s each in make test), the lines
# between two neighbours checked here on every commit: LLaMA-Factory 0.6 (between 0.5 and 0.7), 0.9.2 and 0.9.3
# (between 0.9.1 and 0.9.4), TRL 0.15 (between 0.14 and 0.19). Their key tables differ from the neighbours' in a few
# keys (planner/frameworks/llamafactory/keys.py), which only the sweep tier's run of this check passes through
# their own parsers; since stop 70 also ms-swift 3.4 (between 3 and 3.7) and TRL 0.22 (between 0.19 and 1.0; its venv
# still checks unsloth's line on every commit); since stop 71 LLaMA-Factory 0.8 (between 0.7.1 and 0.9.1) and TRL 1.0
# (between 0.19 and 1.10, whose Liger files are 1.0's)
SWEEP_LINES = {
    ("llamafactory", "0.8"),
    ("trl", "1.0"),
    ("llamafactory", "0.6"),
    ("llamafactory", "0.9.2"),
    ("llamafactory", "0.9.3"),
    ("trl", "0.15"),
    ("swift", "3.4"),
    ("trl", "0.22"),
}
CASES = [
    pytest.param(*r, id=f"{r[0]}@{r[1]}:{r[2]}", marks=[SWEEP] if r[2] in SWEEP_VENVS or r[:2] in SWEEP_LINES else [])
    for r in RELEASES
]


def own_kinds(framework: str, line: str) -> dict:
    return OWN_KINDS.get(framework, {}) | OWN_KINDS.get(line, {})


def written(framework: str, line: str, kind: str, folder: Path) -> Path | None:
    """The top plan `suggest --framework framework@line` ranks for `kind`, its files written into `folder`; None
    where the line ranks none (its rules: a key it lacks, a workload it does not run)."""
    body = {"model": "qwen2.5-0.5b", "gpu": "h100", "gpus_per_node": 2, "global_batch": 16, "top": 1}
    body |= {
        **(KINDS | own_kinds(framework, line))[kind],
        **BODY.get((framework, line), {}),
        "framework": f"{framework}@{line}",
        "evidence": "analytic",
    }
    try:
        res = advise.suggest(advise.parse(advise.SuggestRequest, body), with_nearest=False)
    except BadInput:
        return None
    if not res.plans:
        return None
    plan, (model, hw, goal) = res.plans[0], res.context
    folder.mkdir()
    files = launch.files(plan, hw, model, goal.seq_len, goal)
    if launch.exporter(framework) is None:  # HF's and TRL's command, as the web page and the API hand it out
        files["command.sh"] = f"#!/bin/bash\n{launch.with_launch(plan, model, hw, goal).launch.command}\n"
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def checked(framework: str, line: str, case: str, folder: Path) -> Path | None:
    """test_rl_exports' role run `case` `check`ed at `line`, its files in `folder`; None where the line writes none."""
    body = {**RL_BASE, **ROLE_RUNS[framework][case], "framework": f"{framework}@{line}"}
    try:
        res = advise.check(advise.parse(advise.CheckRequest, body))
    except BadInput:
        return None
    model, hw, goal = res.context
    files = launch.files(res.plan, hw, model, goal.seq_len)
    if not any(n.endswith(".sh") and n != launch.LAUNCH_NAME for n in files):
        return None
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def call_of(validator: str, kind: str, path: str, line: str) -> tuple[str, ...]:
    """The validator, with its flags, a written file goes to: verl's SFT script to its SFT validator with the planned
    model's heads (verl_validate.py's tiny stand-in model carries them), a GRPO fork's files to the fork validator with
    the fork's entry script, every other file to the line's validator."""
    if validator == FORK:
        return FORK, str(FORK_SCRIPTS[line])
    if not path.endswith("verl_sft.sh"):
        return (validator,)
    text = catalog.load_model(KINDS[kind].get("model", "qwen2.5-0.5b")).text
    return VERL_SFT, "--heads", str(text.heads), "--kv-heads", str(text.kv_heads)


def argument(framework: str, kind: str, folder: Path) -> str:
    if framework in ("openrlhf", "verl"):
        (script,) = [p for p in folder.glob("*.sh") if p.name != launch.LAUNCH_NAME]
        return str(script)
    if framework == "llamafactory":
        return str(folder / "llamafactory_train.yaml")
    if framework == "swift":
        return str(folder / "swift_train.sh")
    if framework == "hf":
        return f"TrainingArguments:{folder}"
    return f"{CONFIG.get(kind, 'GRPOConfig')}:{folder}"


@pytest.mark.parametrize(("framework", "line", "venv", "validator"), CASES)
def test_every_written_line_passes_its_own_releases_parser(framework, line, venv, validator, tmp_path):
    python = ROOT / venv / "bin" / "python"
    if not python.is_file():
        pytest.skip(f"no {python}: `tools/fwenv_old.sh {venv}` builds {framework}'s release for line {line}")
    calls, unranked, pinned_past = {}, [], []  # (validator, its flags) -> the files it checks
    for kind in KINDS | own_kinds(framework, line):
        folder = written(framework, line, kind, tmp_path / kind)
        if folder is None:
            unranked.append(kind)
        elif kind in MESH and version_of(ROOT / venv, "accelerate") < MESHED:
            assert "accelerate>=1.10.1" in (folder / "requirements.txt").read_text()
            pinned_past.append(kind)
        else:
            path = argument(framework, kind, folder)
            calls.setdefault(call_of(validator, kind, path, line), []).append(path)
    for case in ROLE_RUNS.get(framework, ()):
        folder = checked(framework, line, case, tmp_path / f"role-{case}")
        if folder is None:
            unranked.append(case)
        else:
            calls.setdefault((validator,), []).append(argument(framework, case, folder))
    assert calls, f"{framework}@{line} ranks no plan of {unranked}"
    assert not RANKED.get((framework, line), set()) & set(unranked), f"{framework}@{line} ranks none of {unranked}"
    for (script, *flags), args in calls.items():
        run = subprocess.run(
            [str(python), str(VALIDATORS / script), *flags, *args],
            check=False,
            capture_output=True,
            text=True,
            timeout=900,
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(VALIDATORS)},
        )
        assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-8000:]
        assert run.stdout.count(": OK ") == len(args), run.stdout
        said = [line for line in run.stdout.splitlines() if ": OK " in line]
        for kind in set(MESH) & {Path(a.rpartition(":")[2]).name for a in args}:  # the HSDP mesh the ranks build
            assert [line for line in said if f"/{kind}: OK" in line and MESH[kind] in line], run.stdout
    files = sum(map(len, calls.values()))
    print(
        f"{venv} ({framework}@{line}): {files} OK in {len(calls)} validator runs, unranked {unranked}, {pinned_past=}"
    )


def test_make_test_builds_every_venv_the_default_tier_runs():
    """`make test` builds `tools/fwenv_old.sh ci` (Makefile fwenv-old): exactly the venvs of the lines checked on
    every commit, so none is skipped there for want of its venv and none is built for nothing."""
    script = (Path(__file__).resolve().parents[3] / "tools" / "fwenv_old.sh").read_text()
    ci = set(script.split('\nCI="', 1)[1].split('"', 1)[0].split())
    assert ci == {r[2] for r in RELEASES} - SWEEP_VENVS
    assert not SWEEP_VENVS & ci


def version_of(venv: Path, package: str) -> tuple[int, ...] | None:
    """The (major, minor) of `package` in a venv, from its dist-info's name (nothing imported); None where it is not
    built."""
    found = sorted(venv.glob(f"lib/python*/site-packages/{package}-*.dist-info"))
    return (
        tuple(int(p) for p in found[0].name.split("-")[1].removesuffix(".dist-info").split(".")[:2]) if found else None
    )


# the lines above in their venvs, and ms-swift's newest in make fwenv's (ms-swift 4.6.0 on transformers 5.19.0)
SWIFT_NEWEST = Path(os.environ.get("MEMPLAN_SWIFT_PYTHON", ROOT.parent / ".fwenv/ms-swift/bin/python")).parents[1]
LINE_VENVS = sorted({(f, line, ROOT / venv) for f, line, venv, _ in RELEASES} | {("swift", "", SWIFT_NEWEST)})


@pytest.mark.parametrize("quant", ["ct-w4a16", "ct-w8a16", "hqq"])
def test_a_line_on_transformers_5_refuses_compressed_tensors_and_hqq(quant):
    """Every line with a venv: where that venv's transformers is 5.x, --quant ct-w4a16 / hqq is refused in one line
    (planner.frameworks.rules.transformers_5_quant: compressed-tensors 0.20.1 with PEFT 0.21.2, get_peft_model raises;
    transformers 5.25 cannot load HQQ); on 4.x no line refuses it for its transformers, and the line the refusal
    names instead runs it."""
    seen = []
    for framework, line, venv in LINE_VENVS:
        version = version_of(venv, "transformers")
        if version is None:
            continue
        seen.append((framework, line, version))
        body = {**BODY_QUANT, "quant": quant, "framework": f"{framework}@{line}" if line else framework}
        try:
            advise.check(advise.parse(advise.CheckRequest, body))
            refusal = None
        except BadInput as e:
            refusal = str(e)
        assert (refusal is not None) >= (version >= (5,)), (framework, line, version)
        if version < (5,):
            assert refusal is None or "transformers 5" not in refusal, refusal
        elif refusal and "transformers 5 cannot train" in refusal:
            assert "\n" not in refusal and "get_peft_model raises" in refusal
            instead = refusal.split("give --framework ")[1].split()[0]
            advise.check(advise.parse(advise.CheckRequest, {**body, "framework": instead}))
    if not seen:
        pytest.skip("no release venv: `make fwenv fwenv-old` builds them (tools/fwenv.sh, tools/fwenv_old.sh ci)")


BODY_QUANT = {"model": "qwen2.5-7b", "gpu": "h100", "lora_rank": 8, "seq_len": 1024, "micro_batch": 1, "grad_accum": 1}
