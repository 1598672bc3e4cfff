"""Issue 36: probe jobs on a real Slurm cluster (tests/engines/slurm.py: munged, slurmctld and slurmd on localhost,
GRES gpu:2 on /dev/null), submitted through a real API server whose store is a real PostgreSQL database: a sweep of 4
probes as one job array (8 in the sweep tier), cancellation through scancel, a node lost mid-job, a submission Slurm refuses."""

import time

import pytest

from tests.api.conftest import Server, probe_pids_in, records, running_hang, wait_for, wait_job

PROBE = {"model": "debug-llama", "micro_batch": 1, "seq_len": 32, "backend": "sim"}
pytestmark = pytest.mark.usefixtures("slurm_cluster")


def slurm_server(tmp_path, cluster, store, **env) -> Server:
    shared = tmp_path / "shared"
    settings = {
        "MEMPLAN_EXECUTOR": "slurm",
        "MEMPLAN_SHARED_DIR": str(shared),
        "MEMPLAN_STATE_DIR": str(tmp_path / "state"),
        "MEMPLAN_PROBE_GPUS": "1",
        **cluster.env(),
        **env,
    }
    return Server(store, env=settings).start()


# 4 probes on every commit (2 cpu, 2 sim: one array, both backends); 8 in the sweep tier (since stop 71, for CI's
# room: 75 s of a worker in make test at 8)
@pytest.mark.parametrize("n", [4, pytest.param(8, marks=pytest.mark.sweep)])
def test_a_job_array_of_probes_completes_with_a_record_each(tmp_path, slurm_cluster, pg_url, n):
    s = slurm_server(tmp_path, slurm_cluster, pg_url)
    try:
        c = s.client()
        probes = [{**PROBE, "seq_len": 32 + 8 * i, "backend": "cpu" if i < 2 else "sim"} for i in range(n)]
        r = c.post("/v1/probes/sweep", json={"probes": probes})
        assert r.status_code == 202, r.text
        jobs = r.json()
        assert len({j["sweep"] for j in jobs}) == 1 and all(j["executor"] == "slurm" for j in jobs)
        final = [wait_job(c, j["id"], timeout_s=180) for j in jobs]
        assert [j["status"] for j in final] == ["done"] * n, final
        assert [j["outcome"] for j in final] == ["ok"] * n, [
            j["record"]["detail"] for j in final if j["outcome"] != "ok"
        ]
        array = {j["scheduler_id"].split("_")[0] for j in final}
        assert len(array) == 1  # one sbatch: one array job, its tasks 0..n-1
        assert sorted(int(j["scheduler_id"].split("_")[1]) for j in final) == list(range(n))
        assert {j["scheduler_state"] for j in final} == {"COMPLETED"}
        assert {j["record"]["backend"] for j in final} == {"cpu", "sim"}
        assert all(j["record"]["peak_allocated_bytes"] > 0 for j in final)
        assert len({j["record"]["id"] for j in final}) == n == records(pg_url)
        assert slurm_cluster.jobs() == []
    finally:
        s.kill()


def test_a_cancelled_job_is_scancelled_and_leaves_nothing(tmp_path, slurm_cluster, pg_url):
    s = slurm_server(tmp_path, slurm_cluster, pg_url)
    try:
        c = s.client()
        jid = running_hang(c, PROBE)
        wait_for(lambda: probe_pids_in(tmp_path / "shared"), "its probe process")
        job = c.delete(f"/v1/probes/{jid}").json()
        assert job["status"] == "cancelled"
        wait_for(lambda: not slurm_cluster.jobs() and not probe_pids_in(tmp_path / "shared"), "nothing running")
        time.sleep(2)  # a poll later: still no record, and the row keeps its cancel
        assert c.get(f"/v1/probes/{jid}").json()["status"] == "cancelled" and records(pg_url) == 0
    finally:
        s.kill()


def test_a_node_lost_mid_job_fails_it_with_slurms_reason(tmp_path, slurm_cluster, pg_url):
    s = slurm_server(tmp_path, slurm_cluster, pg_url)
    try:
        c = s.client()
        jid = running_hang(c, PROBE)
        node = slurm_cluster.node
        out = slurm_cluster.client(["scontrol", "update", f"nodename={node}", "state=down", "reason=test:_lost_node"])
        assert out.returncode == 0, out.stderr
        job = wait_job(c, jid, done=("failed",), timeout_s=60)
        assert job["scheduler_state"] == "NODE_FAIL" and job["scheduler_reason"], job
        assert job["record"] is None and records(pg_url) == 0  # nothing was measured: no evidence stored
    finally:
        slurm_cluster.client(["scontrol", "update", f"nodename={slurm_cluster.node}", "state=resume"])
        s.kill()
    wait_for(slurm_cluster._idle, "the node back")


def test_a_submission_slurm_refuses_fails_with_sbatchs_words(tmp_path, slurm_cluster):
    s = slurm_server(tmp_path, slurm_cluster, tmp_path / "store.sqlite", MEMPLAN_PROBE_GPUS="3")  # the node has 2
    try:
        c = s.client()
        jid = c.post("/v1/probes", json=PROBE).json()["id"]
        job = wait_job(c, jid, done=("failed",), timeout_s=30)
        assert job["scheduler_state"] == "REFUSED"
        assert "Requested node configuration is not available" in job["scheduler_reason"]
    finally:
        s.kill()
