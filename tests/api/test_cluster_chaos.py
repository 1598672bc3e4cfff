"""Issue 36's acceptance, the chaos test of tests/api/test_faults.py with probes on a real Slurm cluster and the store
in a real PostgreSQL database (tests/engines); a file of its own, so that the two chaos tests run on different pytest
workers."""

import pytest

from tests.api.conftest import Server, probe_pids_in
from tests.api.test_faults import chaos


@pytest.mark.usefixtures("slurm_cluster")
def test_chaos_with_the_slurm_executor_and_the_postgresql_store(tmp_path, slurm_cluster, pg_url):
    """Issue 36's acceptance: the same rounds with probes on Slurm and the store in PostgreSQL. Slurm runs jobs while
    the API is dead; at the end Slurm holds no job and no probe runs (no orphan), and records match done jobs."""
    shared = tmp_path / "shared"
    env = {"MEMPLAN_EXECUTOR": "slurm", "MEMPLAN_SHARED_DIR": str(shared), "MEMPLAN_STATE_DIR": str(tmp_path / "st")}
    chaos(pg_url, lambda: Server(pg_url, env={**env, **slurm_cluster.env()}), lambda: probe_pids_in(shared))
    assert slurm_cluster.jobs() == []
