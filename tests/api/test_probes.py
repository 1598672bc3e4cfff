"""api/routes/probes.py: a probe job this server cannot run is refused with a 422 naming the extra to install, before
it is queued (issue 50: it was accepted, 202, and ended `crash` with the reason in record.detail.stderr_tail). The
check is the real one (probes.ready: importlib's find_spec, torch.cuda.is_available); "no torch" is made the way
tests/planner/cli/test_extras.py makes it, a None in sys.modules, which find_spec answers with None."""

import sys

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings
from probes import ready

PROBE = {"model": "debug-llama", "micro_batch": 1, "seq_len": 16}


@pytest.fixture
def client(tmp_path):
    client = TestClient(create_app(Settings(store=tmp_path / "store.sqlite")))  # no lifespan: nothing runs a job
    yield client
    client.app.state.pool.stop()  # the planning workers a plan started (no lifespan stops them)


def jobs(client) -> list:
    return client.get("/v1/probes").json()


def test_a_sim_probe_without_torch_is_refused_before_it_is_queued(client, monkeypatch):
    for name in ("torch", "transformers", "peft"):
        monkeypatch.setitem(sys.modules, name, None)
    r = client.post("/v1/probes", json={**PROBE, "lora_rank": 4})
    assert r.status_code == 422, r.text
    assert r.json()["detail"] == [
        {
            "loc": ["body", "backend"],
            "type": "value_error",
            "msg": "a sim probe needs torch, transformers and peft: pip install 'memplan[sim]' (on this server)",
        }
    ]
    assert jobs(client) == []


def test_a_sweep_is_refused_whole_naming_the_probe_that_cannot_run(client, monkeypatch):
    monkeypatch.setitem(sys.modules, "trl", None)
    rl = {"kind": "grpo", "num_generations": 4, "max_prompt_length": 8, "max_completion_length": 8}
    grpo = {"model": "debug-llama", "micro_batch": 4, "grad_accum": 2, "workload": rl}
    r = client.post("/v1/probes/sweep", json={"probes": [PROBE, grpo]})
    assert r.status_code == 422, r.text
    (d,) = r.json()["detail"]
    assert d["loc"] == ["body", "probes", 1, "backend"]
    assert d["msg"] == "a sim probe needs trl: pip install 'memplan[trl]' (on this server)"
    assert jobs(client) == []


@pytest.mark.skipif(ready.cuda_available(), reason="this host's torch sees a GPU")
def test_a_cuda_probe_on_a_server_without_a_gpu_is_refused(client):
    r = client.post("/v1/probes", json={**PROBE, "backend": "cuda"})
    assert r.status_code == 422, r.text
    (d,) = r.json()["detail"]
    assert d["loc"] == ["body", "backend"]
    assert d["msg"].startswith("a cuda probe needs an NVIDIA GPU that torch can use")
    assert jobs(client) == []


def test_a_probe_the_server_can_run_is_still_queued(client):
    r = client.post("/v1/probes", json=PROBE)
    assert r.status_code == 202, r.text
    assert [j["status"] for j in jobs(client)] == ["queued"]
