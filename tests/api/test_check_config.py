"""POST /v1/check/config (issue 31 item 2): the CLI's `check --config` behind the API, reading only files inside the
server's data directories, the files they name included."""

import shutil
from pathlib import Path

from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings

CONFIGS = Path(__file__).resolve().parents[2] / "docs" / "examples" / "configs"


def test_a_config_inside_the_data_directories_is_read_and_checked(tmp_path):
    allowed, outside = tmp_path / "data", tmp_path / "secret"
    shutil.copytree(CONFIGS / "vlm-r1", allowed / "vlm-r1")
    shutil.copytree(CONFIGS / "llamafactory", outside)
    script = allowed / "vlm-r1" / "run_scripts" / "run_grpo_rec_lora.sh"
    with TestClient(create_app(Settings(store=tmp_path / "s.sqlite", data_dirs=[allowed]))) as c:
        r = c.post("/v1/check/config", json={"config": [str(script)], "gpu": "h100"})
        assert r.status_code == 200, r.text
        out = r.json()
        assert out["config"]["framework"] == "trl" and out["plan"]["zero_stage"] == 2
        assert {Path(f).name for f in out["config"]["files"]} == {script.name, "zero2.json"}
        r = c.post("/v1/check/config", json={"config": [str(script)], "gpu": "h100", "overrides": {"micro_batch": 2}})
        assert r.status_code == 200 and r.json()["plan"]["micro_batch"] == 2
        bad = c.post("/v1/check/config", json={"config": [str(outside / "qwen2_5vl_lora_sft.yaml")], "gpu": "h100"})
        assert bad.status_code == 403, bad.text
        # the DeepSpeed JSON the script names lies outside (a link out of the data directory): it is not opened
        shutil.move(allowed / "vlm-r1" / "src", outside / "src")
        (allowed / "vlm-r1" / "src").symlink_to(outside / "src")
        linked = c.post("/v1/check/config", json={"config": [str(script)], "gpu": "h100"})
        assert linked.status_code == 200, linked.text
        read = linked.json()["config"]
        assert [Path(f).name for f in read["files"]] == [script.name]
        zero = next(s for s in read["settings"] if s["field"] == "zero_stage")
        assert "zero_optimization" not in zero["source"]
        bounds = c.post(
            "/v1/check/config", json={"config": [str(script)], "gpu": "h100", "overrides": {"micro_batch": 0}}
        )
        assert bounds.status_code == 422, bounds.text


def test_the_apis_check_says_text_only_where_a_vlm_is_planned_without_images(tmp_path):
    """Issue 47 item 5: "the JSON says so", the API's JSON too (CheckResult.text_only; the CLI added it alone before)."""
    body = {"model": "qwen2.5-vl-3b", "gpu": "h100", "micro_batch": 1, "seq_len": 1024, "evidence": "analytic"}
    with TestClient(create_app(Settings(store=tmp_path / "s.sqlite"))) as c:
        assert c.post("/v1/check", json=body).json()["text_only"] is True
        assert c.post("/v1/check", json={**body, "image_tokens": 256}).json()["text_only"] is False
        assert c.post("/v1/check", json={**body, "model": "qwen2.5-7b"}).json()["text_only"] is False
