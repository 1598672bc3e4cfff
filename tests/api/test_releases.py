"""POST /v1/check with `"framework": "NAME@RELEASE"`: the request in that release's terms (planner.config.release),
a release memplan does not list a 422 on the framework field naming those it does."""

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings

BODY = {
    "model": "qwen2.5-0.5b",
    "gpu": "h100",
    "gpus_per_node": 8,
    "micro_batch": 2,
    "workload": {"kind": "grpo", "num_generations": 4},
    "evidence": "analytic",
}


@pytest.fixture
def client(tmp_path):
    client = TestClient(create_app(Settings(store=tmp_path / "store.sqlite")))
    yield client
    client.app.state.pool.stop()


def test_the_api_plans_a_trl_0_14_grpo_batch_in_prompts(client):
    r = client.post("/v1/check", json={**BODY, "framework": "trl@0.14"})
    assert r.status_code == 200, r.text
    plan = r.json()["plan"]
    assert (plan["framework"], plan["release"], plan["micro_batch"]) == ("trl", "0.14", 8)
    assert plan["workload"]["beta"] == 0.04
    newest = client.post("/v1/check", json={**BODY, "framework": "trl"}).json()["plan"]
    assert (newest["release"], newest["micro_batch"], newest["workload"]["beta"]) == ("", 2, 0.0)


def test_a_release_not_listed_is_a_422_on_the_framework(client):
    r = client.post("/v1/check", json={**BODY, "framework": "trl@0.13"})
    assert r.status_code == 422, r.text
    (d,) = r.json()["detail"]
    assert d["loc"][-1] == "framework" and "no release '0.13'" in d["msg"] and "0.14" in d["msg"]
