"""HSDP (--fsdp hybrid) as HF's Trainer and TRL run it: FSDP2's fully_shard over accelerate's dp_replicate x dp_shard
mesh, which the Accelerator builds from the launcher's variables (planner.export.parallel.hsdp_fields). The written
files carry the mesh (accelerate_config.yaml's section, the Slurm script's exports), `--fsdp full_shard` (transformers
5.10+ refuse hybrid_shard under FSDP2; before, it ran as a full shard over every rank), an accelerate that reads the
variables, and read back as the same HSDP plan. The libraries' own check (the mesh built at each release) is
test_old_releases_parse.py's hsdp kind."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from planner import advise, checkconfig
from planner.export import launch
from recipe.dist import free_port

from .test_old_releases_parse import ROOT

MESH = "ACCELERATE_USE_PARALLELISM_CONFIG=true"
READ = {"gpu": "h100", "model": "qwen2.5-0.5b", "seq_len": 1024}  # the Slurm script names no model


def written(framework: str, tmp_path, fsdp: str = "hybrid"):
    body = {"model": "qwen2.5-0.5b", "gpu": "h100", "gpus_per_node": 2, "nodes": 2, "global_batch": 16, "top": 1}
    body |= {"fsdp": [fsdp], "seq_len": 1024, "framework": framework, "evidence": "analytic"}
    res = advise.suggest(advise.parse(advise.SuggestRequest, body), with_nearest=False)
    plan, (model, hw, goal) = res.plans[0], res.context
    files = launch.files(plan, hw, model, goal.seq_len)
    files["command.sh"] = f"#!/bin/bash\n{launch.with_launch(plan, model, hw, goal).launch.command}\n"
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return plan, files


@pytest.mark.parametrize("framework", ["hf@4", "hf@4.54", "hf", "trl@0.19", "trl@0.22", "trl"])
def test_hsdp_is_a_full_shard_over_one_replica_a_node(framework, tmp_path):
    plan, files = written(framework, tmp_path)
    assert plan.fsdp == "hybrid"
    section = yaml.safe_load(files["accelerate_config.yaml"])["parallelism_config"]
    assert section == {"parallelism_config_dp_replicate_size": 2, "parallelism_config_dp_shard_size": 2}
    sbatch = files["launch.sbatch"]
    for line in (f"export {MESH}", "export PARALLELISM_CONFIG_DP_REPLICATE_SIZE=2", "DP_SHARD_SIZE=2"):
        assert line in sbatch
    assert files["command.sh"].split("\n")[1].startswith("FSDP_VERSION=2 accelerate launch --config_file")
    assert "--fsdp 'full_shard auto_wrap'" in files["command.sh"] and "hybrid_shard" not in files["train_args.json"]
    assert "accelerate>=1.10.1" in files["requirements.txt"]
    back = checkconfig.check_config([str(tmp_path / "command.sh")], READ).plan
    slurm = checkconfig.check_config([str(tmp_path / "launch.sbatch")], READ).plan
    assert back.fsdp == slurm.fsdp == "hybrid" and back.world_size == slurm.world_size == 4
    assert back.memory.peak_allocated_bytes == slurm.memory.peak_allocated_bytes == plan.memory.peak_allocated_bytes
    assert back.framework == plan.framework  # TRL's by memplan's requirements.txt (pins.planned_for)


def test_a_full_shard_has_no_mesh(tmp_path):
    _, files = written("hf@4.54", tmp_path, "full")
    assert MESH not in files["launch.sbatch"] and "parallelism_config" not in files["accelerate_config.yaml"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_the_slurm_script_hands_train_py_every_flag(tmp_path):
    """srun's bash -c '...' string once ended at the quote of `--fsdp 'full_shard auto_wrap'`: train.py got
    `--fsdp full_shard` and no --fsdp_config. Run with srun, scontrol and torchrun standing in, the script hands
    train.py the flags as written."""
    _, files = written("hf@4.54", tmp_path)
    stubs = 'srun() { while [[ $1 == --* ]]; do shift; done; "$@"; }; scontrol() { echo node0; }\n'
    stubs += "export -f srun scontrol; export SLURM_NNODES=2 SLURM_JOB_ID=1 SLURM_JOB_NODELIST=node0\n"
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "torchrun").write_text('#!/bin/bash\nprintf "%s\\n" "$@"\n')
    (tmp_path / "bin" / "torchrun").chmod(0o755)
    script = files["launch.sbatch"].replace("set -euo pipefail\n", f"set -euo pipefail\n{stubs}")
    run = subprocess.run(
        ["bash", "-c", script],
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": f"{tmp_path}/bin:/usr/bin:/bin"},
    )
    assert run.returncode == 0, run.stderr
    argv = run.stdout.splitlines()
    flags = argv[argv.index("train.py") + 1 :]
    assert flags[flags.index("--fsdp") + 1 :][:3] == ["full_shard auto_wrap", "--fsdp_config", "fsdp_config.json"]


VALIDATORS = Path(__file__).parent / "validators"
# (line, the python whose transformers and accelerate build the ranks): 4.56.2 with 1.10.1, the newest with its own,
# and the 4 line's 4.53.0 and TRL 0.19.1's 4.53.1 with the accelerate 1.10.1 their HSDP files pin (the -mesh venvs)
RANKS = [
    ("hf@4.54", ROOT / "trl-0.22.2" / "bin" / "python"),
    ("hf", Path(sys.executable)),
    ("hf@4", ROOT / "hf-4.53.0-mesh" / "bin" / "python"),
    ("trl@0.19", ROOT / "trl-0.19.1-mesh" / "bin" / "python"),
]


@pytest.mark.sweep
@pytest.mark.parametrize(("framework", "python"), RANKS, ids=[r[0] for r in RANKS])
def test_four_gloo_ranks_build_the_planned_mesh(framework, python, tmp_path):
    """The written HSDP plan (2 nodes x 2 GPUs) on 4 CPU ranks (validators/hsdp_mesh.py): each rank's parameters are
    DTensors on the 2 x 2 (dp_replicate, dp_shard_cp) mesh, replicated over nodes and sharded within one, each rank
    holding half of them (the files written before held a quarter: a full shard over the world). ~12 s a line; hf@4 and
    trl@0.19 (transformers 4.53, accelerate 1.10.1) the same: 20.9 s and 25.6 s on the shared 2 cores."""
    if not python.is_file():
        pytest.skip(f"no {python}: `tools/fwenv_old.sh {python.parents[1].name}` builds it")
    written(framework, tmp_path)
    run = subprocess.run(
        [str(python), "-m", "torch.distributed.run", "--nproc_per_node", "4", "--master_port", str(free_port())]
        + [str(VALIDATORS / "hsdp_mesh.py"), str(tmp_path)],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    ranks = [line for line in run.stdout.splitlines() if line.startswith("rank ")]
    assert len(ranks) == 4, run.stdout[-2000:] + run.stderr[-4000:]
    for line in ranks:
        assert "mesh [[0, 1], [2, 3]] ('dp_replicate', 'dp_shard_cp') (Replicate(), Shard(dim=0))" in line, line
        assert line.endswith("= 0.500"), line
