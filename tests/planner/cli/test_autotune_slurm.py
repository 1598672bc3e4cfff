"""`planner autotune --executor slurm` (issue 36 item 5) on a real Slurm cluster (tests/engines/slurm.py): the plan is
probed by a job on one node of the partition, its record lands in the store, and the plan's job is submitted with the
generated sbatch script and trains (the bundled trainer, 2 ranks under srun and torchrun on the CPU node). And the
refusals, each one line before anything is submitted."""

import json
import sqlite3
import time

import pytest

pytest.importorskip("transformers")
from tests.planner.cli.helpers import one_line_error, planner

BASE = ("autotune", "--model", "debug-llama", "--global-batch", "8", "--seq-len", "64")


def test_probe_on_a_node_then_the_plans_job_trains(tmp_path, slurm_cluster):
    store = tmp_path / "store.sqlite"
    # global batch 2 on the node's 2 GPUs: one split, so that the search's sims are its knobs' alone (at 8, 21 sims took
    # 40 s of the test's 96 in make test, stop 70)
    out = planner(
        *BASE[:4],
        "2",
        *BASE[5:],
        "--executor",
        "slurm",
        "--gpu",
        "h100",
        "--gpus-per-node",
        "2",
        "--partition",
        "debug",
        "--probe-backend",
        "sim",
        "--max-steps",
        "2",
        "--store",
        str(store),
        cwd=tmp_path,
        env=slurm_cluster.env(),
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "sbatch memplan_train.sbatch"
    assert "probed on the partition: sim ok" in out.stderr and "submitted the training job" in out.stderr
    job = out.stderr.split("submitted the training job ")[1].split()[0]
    script = (tmp_path / "memplan_train.sbatch").read_text()
    assert "#SBATCH --partition=debug" in script and "--launcher slurm" in script and "#SBATCH --nodes=1" in script
    with sqlite3.connect(store) as db:  # the planner's own sim records, and the node's probe
        (record,) = [r[0] for r in db.execute("SELECT record FROM probes") if '"scheduler"' in r[0]]
    assert json.loads(record)["detail"]["scheduler"] | {"id": None} == {
        "executor": "slurm",
        "id": None,
        "state": "COMPLETED",
    }
    deadline = time.monotonic() + 240
    while slurm_cluster.jobs() and time.monotonic() < deadline:
        time.sleep(1)
    state = slurm_cluster.client(["scontrol", "show", "job", "-o", job]).stdout
    log = (tmp_path / f"slurm-{job}.out").read_text()
    assert "JobState=COMPLETED" in state, log[-3000:]
    assert "done: 2 steps" in log
    assert not (tmp_path / "memplan-autotune").exists() or not any((tmp_path / "memplan-autotune").iterdir())


def test_a_dry_run_writes_the_script_and_submits_nothing(tmp_path):
    out = planner(
        *BASE[:4],
        "32",
        *BASE[5:],
        "--executor",
        "slurm",
        "--gpu",
        "h100",
        "--gpus-per-node",
        "8",
        "--nodes",
        "2",
        "--account",
        "ml",
        "--time",
        "2:00:00",
        "--dry-run",
        "--emit",
        "job",
        "--",
        "train.py",
        "--model_name_or_path",
        "x",
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    script = (tmp_path / "job" / "memplan_train.sbatch").read_text()
    assert "#SBATCH --nodes=2" in script and "#SBATCH --account=ml" in script and "#SBATCH --time=2:00:00" in script
    assert "train.py --model_name_or_path x --per_device_train_batch_size" in script and "srun" in script
    assert "nothing submitted" in out.stderr


@pytest.mark.parametrize(
    "flags, needle",
    [
        (("--executor", "slurm", "--gpus-per-node", "8"), "--executor slurm: name the partition's GPU kind"),
        (("--executor", "slurm", "--gpu", "h100"), "--executor slurm: give --gpus-per-node"),
        (
            ("--executor", "slurm", "--gpu", "h100", "--gpus-per-node", "8", "--", "torchrun", "train.py"),
            "not a launcher",
        ),
        (
            ("--nodes", "2", "--gpu", "h100", "--dry-run"),
            "--nodes, --partition, --account and --time are for --executor slurm",
        ),
    ],
)
def test_refusals_are_one_line(tmp_path, flags, needle):
    out = planner(*BASE, *flags, cwd=tmp_path)
    one_line_error(out, needle)
    assert not (tmp_path / "memplan_train.sbatch").exists()
