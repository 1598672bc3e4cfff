"""The scheduler clients' own parts, without a cluster (issue 36): Slurm's and Ray's job states as the executor reads
them (Slurm's state codes from sacct(1) "JOB STATE CODES"; Ray's JobStatus from ray 2.55's dashboard/modules/job/
common.py), and the sbatch script of a single probe and of a sweep's job array."""

import pytest

from api.executors import Submission
from api.executors.ray import to_state as ray_state
from api.executors.slurm import Slurm, to_state
from api.settings import Settings


@pytest.mark.parametrize(
    "state, reason, code, want",
    [
        ("PENDING", "Resources", "0:0", {"terminal": False}),
        ("RUNNING", "None", "0:0", {"terminal": False}),
        ("COMPLETED", "None", "0:0", {"terminal": True, "returncode": 0, "lost": False}),
        (
            "FAILED",
            "NonZeroExitCode",
            "3:0",
            {"terminal": True, "returncode": 3, "lost": False},
        ),  # the probe's OOM exit
        ("FAILED", "None", "0:9", {"terminal": True, "returncode": -9, "lost": False}),  # killed by a signal
        ("FAILED", "JobLaunchFailure", "0:53", {"terminal": True, "lost": True}),  # never started: not the probe's end
        ("TIMEOUT", "TimeLimit", "0:15", {"terminal": True, "timeout": True, "lost": False}),
        ("NODE_FAIL", "NodeDown", "0:0", {"terminal": True, "lost": True}),
        ("CANCELLED by 0", "None", "0:15", {"terminal": True, "lost": True}),
        ("OUT_OF_MEMORY", "OutOfMemory", "0:125", {"terminal": True, "lost": True}),
    ],
)
def test_slurm_states(state, reason, code, want):
    got = to_state(state, reason, code)
    assert {k: getattr(got, k) for k in want} == want
    assert got.state == state.split()[0]


@pytest.mark.parametrize(
    "job, want",
    [
        ({"status": "PENDING", "message": "waiting"}, {"terminal": False}),
        ({"status": "SUCCEEDED", "driver_exit_code": 0}, {"terminal": True, "returncode": 0, "lost": False}),
        ({"status": "FAILED", "driver_exit_code": 3}, {"terminal": True, "returncode": 3, "lost": False}),
        (
            {"status": "FAILED", "driver_exit_code": None, "message": "supervisor died"},
            {"terminal": True, "lost": True},
        ),
        ({"status": "STOPPED", "message": "Job was intentionally stopped."}, {"terminal": True, "lost": True}),
    ],
)
def test_ray_states(job, want):
    got = ray_state(job)
    assert {k: getattr(got, k) for k in want} == want


def test_the_sbatch_script_of_a_probe_and_of_a_sweep(tmp_path):
    s = Settings(executor="slurm", slurm_partition="gpu", slurm_account="ml", probe_gpus=2, slurm_args=["--qos=short"])
    one = Slurm(s).script([Submission("a", tmp_path / "a", 90, {"MEMPLAN_PROBE_FAULT": "slow"})], "memplan-a")
    for line in ("#SBATCH --job-name=memplan-a", "#SBATCH --time=2", "#SBATCH --gres=gpu:2", "#SBATCH --partition=gpu"):
        assert line in one
    assert "#SBATCH --account=ml" in one and "#SBATCH --qos=short" in one and "--array" not in one
    assert "exec env MEMPLAN_PROBE_FAULT=slow " in one
    assert f"-m probes.run {tmp_path}/a/job.json {tmp_path}/a/result.json 2>{tmp_path}/a/stderr.txt" in one
    subs = [Submission(j, tmp_path / j, 60) for j in "xyz"]
    array = Slurm(s).script(subs, "memplan-sweep")
    assert "#SBATCH --array=0-2" in array and "case $SLURM_ARRAY_TASK_ID in" in array
    assert [line.split(")")[0].strip() for line in array.splitlines() if ") exec " in line] == ["0", "1", "2"]
    assert all(f"{tmp_path}/{j}/job.json" in array for j in "xyz")
