"""Issue 51 item 5, authentication that means something (api/auth.py): `planner serve` refuses to start without a
usable token beyond loopback, or on a wildcard address without the names clients use, in one line and before it
loads the server; a set token covers every /v1 endpoint (reading ones too) and /metrics; a Host header the server
does not list gets a 400 (DNS rebinding), in process and from a real uvicorn."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from api.auth import allowed_hosts, refusal, waived
from api.main import create_app
from api.settings import Settings
from planner.errors import BadInput
from tests.api.conftest import ROOT, TOKEN, Server

PLAN = {"model": "gpt2", "gpu": "h100", "gpus_per_node": 1, "global_batch": 8, "seq_len": 512}
CHECK = {"model": "gpt2", "gpu": "h100", "micro_batch": 1, "grad_accum": 8, "seq_len": 512, "precision": "bf16"}
HEAVY = ("fastapi", "uvicorn", "starlette", "api.main")
# the CLI in a subprocess; then whether it loaded the server's modules before it answered
SERVE = (
    "import sys; from planner.cli import main; rc = main(['serve', *sys.argv[1:]]); "
    f"print([m for m in {HEAVY!r} if m in sys.modules]); sys.exit(rc)"
)


def serve(*args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MEMPLAN_")} | env
    return subprocess.run(
        [sys.executable, "-c", SERVE, *args],
        env=environ,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    "args, env, says",
    [
        (("--port", "1"), {"MEMPLAN_API_TOKEN": ""}, "MEMPLAN_API_TOKEN is empty"),
        (("--host", "0.0.0.0"), {"MEMPLAN_API_TOKEN": "  \t "}, "MEMPLAN_API_TOKEN is empty"),
        ((), {"MEMPLAN_API_TOKEN": "changeme"}, "MEMPLAN_API_TOKEN has 8 characters: it needs 16 or more"),
        (("--host", "10.1.2.3"), {}, "--host 10.1.2.3: listening beyond loopback needs MEMPLAN_API_TOKEN"),
        (("--host", "0.0.0.0"), {"MEMPLAN_API_TOKEN": TOKEN}, "--host 0.0.0.0 answers to any name"),
        (("--allowed-host", "https://x.example"), {}, "--allowed-host 'https://x.example': a host name"),
    ],
)
def test_serve_refuses_to_start_in_one_line(args, env, says):
    r = serve(*args, **env)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith("planner: error: "), r.stderr
    assert says in r.stderr and "changeme" not in r.stderr  # the token itself is never echoed
    assert json.loads(r.stdout.replace("'", '"')) == []  # refused before the server was loaded


def test_insecure_waives_the_refusals_with_one_warning(tmp_path):
    """--insecure, or MEMPLAN_INSECURE=1, starts anyway after one warning line: the server loads and binds (to a
    port this test holds, so it stops there)."""
    with socket.socket() as held:
        held.bind(("0.0.0.0", 0))
        held.listen()
        port, store = str(held.getsockname()[1]), str(tmp_path / "s.sqlite")
        for flag, env in [(("--insecure",), {}), ((), {"MEMPLAN_INSECURE": "1"})]:
            r = serve("--host", "0.0.0.0", "--port", port, "--store", store, *flag, **env)
            first = r.stderr.splitlines()[0]
            assert first.startswith("planner: warning: --insecure: no MEMPLAN_API_TOKEN on 0.0.0.0"), r.stderr
            assert "any Host name is accepted" in first and "planner: error" not in r.stderr
            assert r.returncode != 0 and "address already in use" in r.stderr.lower(), r.stderr[-500:]


def test_the_rules_in_process():
    """refusal, waived and allowed_hosts for each kind of bind (what create_app refuses under uvicorn --factory)."""
    loop, lan = Settings(allowed_hosts=[]), Settings(host="10.0.0.5", api_token=TOKEN)
    assert refusal(loop) is None and waived(loop) is None
    assert allowed_hosts(loop) == ["127.0.0.1", "localhost", "[::1]"]
    assert refusal(lan) is None and "10.0.0.5" in allowed_hosts(lan)
    assert "[fe80::1]" in allowed_hosts(Settings(host="fe80::1", api_token=TOKEN))
    named = Settings(host="0.0.0.0", api_token=TOKEN, allowed_hosts=["Memplan.Example.com", "*.corp.example", "::2"])
    assert refusal(named) is None and allowed_hosts(named)[-3:] == ["memplan.example.com", "*.corp.example", "[::2]"]
    bare = Settings(host="::", api_token=TOKEN, allowed_hosts=[])
    assert "answers to any name" in refusal(bare)
    with pytest.raises(BadInput, match="answers to any name"):
        create_app(bare)
    assert allowed_hosts(bare.model_copy(update={"insecure": True})) == ["*"]
    with pytest.raises(ValueError, match="--allowed-host '\\*' would answer any name"):
        Settings(allowed_hosts=["*"])


@pytest.fixture
def client(tmp_path):
    app = create_app(Settings(store=tmp_path / "s.sqlite", api_token=TOKEN))
    with TestClient(app) as c:
        yield c


def test_a_set_token_covers_reading_endpoints(client):
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    for method, path, body in [
        ("GET", "/v1/gpus", None),
        ("GET", "/v1/models/gpt2", None),
        ("GET", "/v1/probes", None),
        ("POST", "/v1/plans", PLAN),
        ("POST", "/v1/check", CHECK),
        ("POST", "/v1/plans/lines", PLAN),
        ("GET", "/metrics", None),
    ]:
        anon = client.request(method, path, json=body)
        assert anon.status_code == 401 and anon.headers["www-authenticate"] == "Bearer", (path, anon.text)
        assert "bearer token" in anon.json()["detail"]
        wrong = client.request(method, path, json=body, headers={"Authorization": "Bearer " + TOKEN[:-1] + "x"})
        assert wrong.status_code == 401, path
        assert client.request(method, path, json=body, headers=bearer).status_code == 200, path
    assert client.get("/v1/no-such-thing").status_code == 401  # unknown paths too: nothing to enumerate
    for path in ("/", "/static/common.js", "/healthz", "/openapi.json", "/docs"):  # the page, its files, the docs
        assert client.get(path).status_code == 200, path


def test_an_unlisted_host_gets_400(client):
    assert client.get("/v1/gpus", headers={"Host": "evil.example"}).status_code == 400
    for host in ("localhost:8000", "127.0.0.1", "[::1]:8000"):
        assert client.get("/", headers={"Host": host}).status_code == 200, host
    assert client.get("/healthz", headers={"Host": "10.0.0.7:8000"}).status_code == 200  # a load balancer's check


def test_a_real_server_refuses_dns_rebinding(tmp_path):
    """uvicorn on loopback, started by `planner serve` as a team would: the rebinding attacker's page asks with its
    own name as Host and gets a 400; the same request under the server's name without the token gets a 401."""
    s = Server(tmp_path / "store.sqlite", env={"MEMPLAN_ALLOWED_HOSTS": "[]"}).start()
    try:
        evil = httpx.get(s.url + "/v1/gpus", headers={"Host": "evil.example"}, timeout=30)
        assert evil.status_code == 400 and evil.text == "Invalid host header"
        assert httpx.get(s.url + "/v1/gpus", timeout=30).status_code == 401
        assert s.client().get("/v1/gpus").status_code == 200
    finally:
        s.kill()


def test_docs_show_the_refusals_as_printed():
    """docs/api.md pastes the start-up refusals: each line there is what `planner serve` prints (stderr, so the
    docs/readme.py markers, which compare stdout, cannot hold them)."""
    text = (Path(ROOT) / "docs" / "api.md").read_text()
    cases = [
        ((), {"MEMPLAN_API_TOKEN": ""}),
        (("--host", "0.0.0.0"), {}),
        (("--host", "0.0.0.0"), {"MEMPLAN_API_TOKEN": TOKEN}),
    ]
    for args, env in cases:
        line = serve(*args, **env).stderr.strip()
        assert line in text, line
