"""Issue 50 item 1, the server's side of the web page: the form inlined in the page (labels from the declaration's
descriptions), POST /v1/plans/lines, /v1/plans/files and /v1/plans/zip, and POST /v1/check/config with the files
themselves."""

import io
import json
import re
import zipfile

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings
from api.webform import catalog, label_and_help, missing_descriptions
from planner.config.requests import SuggestRequest

SWIFT = {"model": "qwen2.5-0.5b", "gpu": "h100", "gpus_per_node": 8, "global_batch": 64, "seq_len": 2048}
GRPO = {**SWIFT, "seq_len": None, "framework": "trl", "workload": {"kind": "grpo", "num_generations": 4}}


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    with TestClient(create_app(Settings(store=tmp_path_factory.mktemp("web") / "s.sqlite"))) as c:
        yield c


def test_the_page_holds_its_form_and_every_label_is_a_description():
    assert missing_descriptions() == []  # a field without one would be its name on the page
    assert label_and_help("activation checkpointing: off, full, selective-op", ("off", "full")) == (
        "activation checkpointing",
        "activation checkpointing: off, full, selective-op",
    )
    whole = "sdpa (the family's default), flash (flash-attn) or eager"
    assert label_and_help(whole, ("sdpa", "flash", "eager")) == (whole, "")
    assert label_and_help("VLMs: image tokens per sample (part of seq_len)") == (
        "VLMs: image tokens per sample",
        "VLMs: image tokens per sample (part of seq_len)",
    )


def test_the_page_inlines_the_form(client):
    text = client.get("/").text
    inline = json.loads(re.search(r'id="form-catalog">(.*?)</script>', text, re.DOTALL).group(1))
    assert inline == json.loads(json.dumps(catalog()))
    names = {f["name"] for f in inline["fields"]}
    assert {info.alias or name for name, info in SuggestRequest.model_fields.items()} == names
    assert {"qwen2.5-0.5b", "llama-3.1-8b"} <= {m["name"] for m in inline["models"]}
    assert client.get("/static/favicon.svg").status_code == 200


def test_a_ranked_plans_files_and_zip(client):
    swift = client.post("/v1/plans/files", json={"request": {**SWIFT, "framework": "swift"}, "rank": 1}).json()
    # the script first; an FSDP plan (the rank-1 plan since the ZeRO-3 terms moved) carries its fsdp config beside it
    assert swift["command"] == "bash swift_train.sh" and next(iter(swift["files"])) == "swift_train.sh"
    assert set(swift["files"]) <= {"swift_train.sh", "swift_fsdp.json", "swift_ds.json", "requirements.txt"}
    z = client.post("/v1/plans/zip", json={"request": {**SWIFT, "framework": "swift"}})
    assert z.headers["content-type"] == "application/zip"
    assert 'filename="memplan-plan-1-swift.zip"' in z.headers["content-disposition"]
    with zipfile.ZipFile(io.BytesIO(z.content)) as got:
        assert {n: got.read(n).decode() for n in got.namelist()} == swift["files"]  # the script is the command
    hf = client.post("/v1/plans/files", json={"request": GRPO, "rank": 2}).json()
    with zipfile.ZipFile(io.BytesIO(client.post("/v1/plans/zip", json={"request": GRPO, "rank": 2}).content)) as got:
        files = {n: got.read(n).decode() for n in got.namelist()}
    assert files == {**hf["files"], "command.sh": f"#!/bin/bash\n{hf['command']}\n"}
    assert "--num_generations 4" in hf["command"] and hf["rank"] == 2 and hf["framework"] == "trl"


def test_a_rank_past_the_plans_is_refused_naming_it(client):
    r = client.post("/v1/plans/files", json={"request": {**SWIFT, "top": 3}, "rank": 4})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "rank"]
    assert "gives 3 plans" in r.json()["detail"][0]["msg"]


def test_the_lines_the_cli_prints_beside_its_table(client):
    vlm = {"model": "qwen2.5-vl-3b", "gpu": "h20", "gpus_per_node": 6, "global_batch": 24, "seq_len": 16384}
    media = {"images": 2, "videos": 1, "video_seconds": 10}
    # at the checkpoint's own cap (12,845,056 pixels, 16,384 tokens an image) the images and the video pass seq_len:
    # a bound, not a refusal (issue 47 item 5): the towers run on every patch and the text is cut after them
    capped = client.post("/v1/plans/lines", json={**vlm, **media})
    assert capped.status_code == 200, capped.text
    assert capped.json()["images"][0].startswith(
        "images: 2 a sample at the qwen2-vl rule's worst case, max_pixels 12,845,056 (the checkpoint's processor"
    ), capped.json()
    out = client.post("/v1/plans/lines", json={**vlm, **media, "max_pixels": 1003520}).json()
    assert out["workload"] == "SFT"
    head = "images: 2 a sample at the qwen2-vl rule's worst case, max_pixels 1,003,520, 1,280 tokens an image"
    assert out["images"] == [head + " (a 1120x896 image gives that many)"]
    assert out["videos"][0].startswith("videos: 1 a sample, 7,680 tokens each at worst (10 s at 2 fps")
    grpo = client.post("/v1/plans/lines", json={**GRPO, "framework": "verl"}).json()
    assert grpo["workload"].startswith("GRPO: 4 samples") and grpo["workload"].endswith("vllm rollout, colocate")


def test_a_configuration_uploaded_is_read_beside_nothing_else(client):
    script = client.post("/v1/plans/files", json={"request": {**SWIFT, "framework": "swift"}}).json()["files"]
    r = client.post("/v1/check/config", json={"files": script, "gpu": "h100"})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["config"]["framework"] == "swift" and out["config"]["files"][0] == "swift_train.sh"
    assert out["plan"]["world_size"] == 8 and "memplan-config-" not in json.dumps(out)
    for body, loc in (
        ({"files": {"../up.sh": "x"}, "gpu": "h100"}, ["body", "files", "../up.sh", "[key]"]),
        ({"gpu": "h100"}, ["body", "config"]),
        ({"files": script, "config": ["/etc/passwd"], "gpu": "h100"}, ["body", "config"]),
    ):
        bad = client.post("/v1/check/config", json=body)
        assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == loc, bad.text
