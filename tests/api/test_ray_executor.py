"""Issue 36: probe jobs as Ray Jobs on a real Ray head (tests/engines/ray.py: `ray start --head` on loopback, 2 GPUs
declared), through a real API server: sim and cpu probes end to end, a cancel that stops the Ray job and leaves no
probe, a job Ray lost (stopped behind the API's back) failed with Ray's words, and a resubmission that Ray refuses to
run twice."""

import os
import time

import pytest

from tests.api.conftest import Server, probe_pids_in, records, running_hang, wait_for, wait_job

PROBE = {"model": "debug-llama", "micro_batch": 1, "seq_len": 32, "backend": "sim"}
pytestmark = pytest.mark.usefixtures("ray_head")


def ray_server(tmp_path, head, store, **more) -> Server:
    env = {
        **more,
        "MEMPLAN_EXECUTOR": "ray",
        "MEMPLAN_RAY_ADDRESS": head.address,
        "MEMPLAN_SHARED_DIR": str(tmp_path / "shared"),
        "MEMPLAN_STATE_DIR": str(tmp_path / "state"),
    }
    return Server(store, env=env).start()


def test_sim_and_cpu_probes_run_as_ray_jobs(tmp_path, ray_head):
    store = tmp_path / "store.sqlite"
    s = ray_server(tmp_path, ray_head, store)
    try:
        c = s.client()
        r = c.post("/v1/probes/sweep", json={"probes": [PROBE, {**PROBE, "backend": "cpu", "seq_len": 48}]})
        final = [wait_job(c, j["id"], timeout_s=180) for j in r.json()]
        assert [(j["status"], j["outcome"]) for j in final] == [("done", "ok")] * 2, final
        assert [j["scheduler_id"] for j in final] == [f"memplan-{j['id']}" for j in final]
        assert {j["scheduler_state"] for j in final} == {"SUCCEEDED"}
        assert [j["record"]["backend"] for j in final] == ["sim", "cpu"] and records(store) == 2
    finally:
        s.kill()


def test_a_cancel_stops_the_ray_job_and_a_lost_job_fails_with_rays_words(tmp_path, ray_head):
    from api.executors.ray import Ray
    from api.settings import Settings

    store = tmp_path / "store.sqlite"
    s = ray_server(tmp_path, ray_head, store)
    ray = Ray(Settings(ray_address=ray_head.address))
    try:
        c = s.client()
        jid = running_hang(c, PROBE, timeout_s=90)
        wait_for(lambda: probe_pids_in(tmp_path / "shared"), "its probe process")
        assert c.delete(f"/v1/probes/{jid}").json()["status"] == "cancelled"
        wait_for(lambda: ray.states([f"memplan-{jid}"])[f"memplan-{jid}"].state == "STOPPED", "Ray to stop it")
        wait_for(lambda: not probe_pids_in(tmp_path / "shared"), "no probe left")

        lost = running_hang(c, {**PROBE, "seq_len": 40}, timeout_s=90)
        ray.cancel([f"memplan-{lost}"])  # someone else stops it: the API did not ask
        job = wait_job(c, lost, done=("failed",), timeout_s=60)
        assert job["scheduler_state"] == "STOPPED" and job["scheduler_reason"], job
        time.sleep(1)
        assert records(store) == 0
    finally:
        s.kill()


def test_a_job_whose_node_dies_fails_with_rays_words(tmp_path, ray_head):
    """A node of its own (a second raylet holding a custom resource the probe asks for, MEMPLAN_RAY_RESOURCES), killed
    with kill -9 while the probe runs: Ray says the job's supervisor died with its node; the job is failed with those
    words and no record. The probe itself is left an orphan by the dead raylet (on a real cluster it dies with the
    machine): the test ends it."""
    ray_head.add_worker("memplan_pool")
    store = tmp_path / "store.sqlite"
    s = ray_server(tmp_path, ray_head, store, MEMPLAN_RAY_RESOURCES='{"memplan_pool": 1}')
    try:
        c = s.client()
        jid = running_hang(c, PROBE, timeout_s=90)
        assert ray_head.crash_worker("memplan_pool")
        job = wait_job(c, jid, done=("failed",), timeout_s=120)
        assert job["scheduler_state"] == "FAILED" and "node has died" in job["scheduler_reason"], job
        assert job["record"] is None and records(store) == 0
    finally:
        s.kill()
        for pid in probe_pids_in(tmp_path / "shared"):
            os.kill(pid, 9)
