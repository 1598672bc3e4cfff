"""planner.intake.hub against a real local HTTP server serving the Hub's file layout (`/{repo_id}/resolve/{revision}/
config.json`, with the headers huggingface_hub 2.4.0 checks: X-Repo-Commit, ETag, Content-Length), HF_ENDPOINT pointed
at it and HF_HUB_CACHE at the test's folder; the server counts the requests it answers."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from planner.cli import main
from planner.errors import BadInput
from planner.intake import hub, models
from planner.intake.limits import MAX_FILE_BYTES, OverLimit

COMMIT = "0123456789abcdef0123456789abcdef01234567"
LLAMA = {  # a small Llama (transformers' LlamaConfig fields), which no catalog model is
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 512,
    "intermediate_size": 1376,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "vocab_size": 32000,
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
# what the Hub answers a missing repo and a gated one without a token (huggingface_hub utils/_http.py:826-955 reads
# X-Error-Code and X-Error-Message)
REFUSALS = {
    "acme/missing": (404, "RepoNotFound", "Repository not found"),
    "acme/gated": (401, "GatedRepo", "Access to model acme/gated is restricted. Please log in."),
}


class Hub(BaseHTTPRequestHandler):
    files: ClassVar[dict[str, bytes]] = {}
    requests: ClassVar[list[str]] = []

    def _answer(self, body: bool) -> None:
        type(self).requests.append(f"{self.command} {self.path}")
        repo, _, rest = self.path.lstrip("/").partition("/resolve/")
        if repo in REFUSALS:
            status, code, message = REFUSALS[repo]
            self.send_response(status)
            self.send_header("X-Error-Code", code)
            self.send_header("X-Error-Message", message)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = self.files.get(repo)
        if data is None or not rest.endswith("/config.json"):
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("ETag", f'"{len(data):x}{hash(data) & 0xFFFF:x}"')
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body:
            self.wfile.write(data)

    def do_HEAD(self):
        self._answer(False)

    def do_GET(self):
        self._answer(True)

    def log_message(self, *args):
        pass


@pytest.fixture
def server(tmp_path, monkeypatch):
    Hub.files = {"acme/tiny-llama": json.dumps(LLAMA).encode(), "acme/huge": b"{" + b" " * MAX_FILE_BYTES + b"}"}
    Hub.requests = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{httpd.server_address[1]}")
    monkeypatch.setenv("MEMPLAN_HUB", "1")
    # what this process asked before is keyed by endpoint: a later server may get an earlier one's port (CI, stop 77:
    # test_the_api_fetches_only_where_its_settings_allow found another test's answer and fetched nothing)
    monkeypatch.setattr(hub, "_ASKED", {})
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_ETAG_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)  # as hub.py sets it, wherever it was imported
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def test_an_unknown_id_is_fetched_then_read_from_the_cache(server, tmp_path, monkeypatch):
    found = models.lookup("acme/tiny-llama")
    url = f"http://127.0.0.1:{server.server_address[1]}"
    assert found.how == f"config.json fetched from {url} (revision {COMMIT})"
    assert found.config == LLAMA
    assert found.ref == str(tmp_path / "hf-cache" / "models--acme--tiny-llama" / "snapshots" / COMMIT / "config.json")
    assert (tmp_path / "hf-cache" / "models--acme--tiny-llama" / "refs" / "main").read_text() == COMMIT
    assert [r.split()[0] for r in Hub.requests] == ["HEAD", "HEAD", "GET"]  # ours, then hf_hub_download's
    server.shutdown()
    again = models.lookup("acme/tiny-llama")  # the server is stopped: the cache answers
    assert again.config == LLAMA and again.how == found.how and len(Hub.requests) == 3
    monkeypatch.setattr(hub, "_ASKED", {})  # as another process finds it
    assert models.lookup("acme/tiny-llama").how == f"cached config.json {found.ref}"


def test_offline_or_switched_off_no_request_is_made(server, monkeypatch):
    for env, says in (("HF_HUB_OFFLINE", "offline mode, HF_HUB_OFFLINE=1"), ("MEMPLAN_HUB", "MEMPLAN_HUB=0")):
        with monkeypatch.context() as m:
            m.setenv(env, "1" if env == "HF_HUB_OFFLINE" else "0")
            assert models.lookup("acme/tiny-llama") is None
            with pytest.raises(BadInput, match=f"which model is 'acme/tiny-llama'.*cache \\({says}"):
                models.resolve("acme/tiny-llama")
    with hub.allowed(False):  # the API's default (api/work.py)
        assert models.lookup("acme/tiny-llama") is None
    assert Hub.requests == []


def test_an_unreachable_hub_is_said_in_the_question(server, monkeypatch):
    port = server.server_address[1]
    server.shutdown()
    server.server_close()  # nothing listens there now: the connection is refused at once
    with pytest.raises(BadInput, match=f"cache \\(the Hugging Face Hub at http://127.0.0.1:{port} was not reached"):
        models.resolve("acme/tiny-llama")


@pytest.mark.parametrize("repo", sorted(REFUSALS))
def test_a_missing_or_gated_repo_is_refused_in_one_line(server, repo, capsys):
    status, _, message = REFUSALS[repo]
    assert models.lookup(repo) is None  # a reader may still find it another way (ms-swift's --model_type)
    with pytest.raises(BadInput) as e:
        models.resolve(repo)
    assert str(e.value) == (
        f"model {repo!r}: the Hugging Face Hub at {hub.endpoint()} answered {status} ({message}): give --model PATH "
        f"(its config.json: `hf download {repo} config.json` after `hf auth login` where it is gated or private)"
    )
    assert len(Hub.requests) == 1  # one HEAD, no retries
    assert main(["check", "--model", repo, "--gpu", "h100", "--micro-batch", "1", "--seq-len", "512"]) == 2
    assert capsys.readouterr().err == f"planner: error: {e.value}\n"
    assert len(Hub.requests) == 1  # asked once a process


def test_an_oversized_config_is_refused_before_it_is_downloaded(server):
    with pytest.raises(OverLimit, match=f"acme/huge's config.json at .*: {MAX_FILE_BYTES + 2:,} bytes, over 4 MiB"):
        models.lookup("acme/huge")
    assert [r.split()[0] for r in Hub.requests] == ["HEAD"]


def _check(capsys, *args) -> dict:
    assert main(["check", *args, "--gpu", "h100", "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_the_cli_model_and_a_config_naming_the_id_resolve_alike(server, tmp_path, capsys):
    """`check --model acme/tiny-llama` plans the served config, as a --config naming that id does."""
    given = _check(capsys, "--model", "acme/tiny-llama", "--micro-batch", "2", "--seq-len", "1024", "--lora-rank", "8")
    config = tmp_path / "sft.yaml"
    config.write_text(
        "model_name_or_path: acme/tiny-llama\nstage: sft\nfinetuning_type: lora\nlora_rank: 8\nlora_target: all\n"
        "cutoff_len: 1024\nper_device_train_batch_size: 2\nbf16: true\n"
    )
    read = _check(capsys, "--config", str(config))
    model = next(row for row in read["config"]["settings"] if row["field"] == "model")
    how = f"config.json fetched from {hub.endpoint()} (revision {COMMIT})"  # by this process: said so while cached
    assert model["source"] == f"sft.yaml: model_name_or_path: acme/tiny-llama ({how})"
    assert given["model"] == read["model"] and read["model"]["name"] == "acme/tiny-llama"
    assert given["plan"]["memory"]["params_bytes"] == read["plan"]["memory"]["params_bytes"]  # (the knobs differ)


def test_the_api_fetches_only_where_its_settings_allow(server):
    pytest.importorskip("pydantic_settings")
    from api.settings import Settings
    from api.work import bounded

    look = bounded(lambda name, settings: models.lookup(name))  # as the API's planning calls are wrapped
    assert look("acme/tiny-llama", Settings()) is None and Hub.requests == []
    assert look("acme/tiny-llama", Settings(fetch_models=True)).config == LLAMA


@pytest.mark.parametrize("fetch", [False, True])
def test_the_apis_model_field_resolves_a_hub_id_as_the_cli_does(server, tmp_path, fetch):
    """Stop 66 left it: the API's `model` was a catalog name, a posted config.json or a model-dir path; a Hugging Face
    id the CLI resolves was a 404. Now the catalog's ids resolve offline and an unknown id is fetched only where the
    server's settings allow it (--fetch-models)."""
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from api.main import create_app
    from api.settings import Settings

    body = {"gpu": "h100", "gpus_per_node": 1, "micro_batch": 1, "seq_len": 512, "evidence": "analytic"}
    settings = Settings(store=tmp_path / "s.sqlite", fetch_models=fetch, allowed_hosts=["testserver"])
    client = TestClient(create_app(settings))
    try:
        known = client.post("/v1/check", json={**body, "model": "Qwen/Qwen2.5-7B-Instruct"})
        assert known.status_code == 200 and known.json()["model"]["name"] == "qwen2.5-7b", known.text
        tiny = client.post("/v1/check", json={**body, "model": "acme/tiny-llama"})
        if fetch:
            assert tiny.status_code == 200, tiny.text
            layer = 4 * 512 * 512 + 3 * 512 * 1376 + 2 * 512  # LLAMA's attention, MLP and two norms
            # its parameters in fp32 (4 bytes), as the default mixed precision keeps them
            assert tiny.json()["plan"]["memory"]["params_bytes"] == 4 * (2 * 32000 * 512 + 4 * layer + 512)
        else:
            assert tiny.status_code == 404 and "MEMPLAN_FETCH_MODELS=1 lets it" in tiny.text and Hub.requests == []
        missing = client.post("/v1/check", json={**body, "model": "acme/missing"})
        assert missing.status_code == (422 if fetch else 404) and "acme/missing" in missing.text, missing.text
    finally:
        client.app.state.pool.stop()
