"""A real `planner serve` (uvicorn) on a loopback port, called over HTTP with httpx."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")
from recipe.dist import free_port

TOKEN = "test-token-0123456789"  # 16 characters at least (api/settings.py: MIN_TOKEN_CHARS)
ROOT = Path(__file__).resolve().parents[2]


class Server:
    def __init__(self, store: Path, env: dict | None = None, args: tuple = ()) -> None:
        self.store, self.port, self.args = store, free_port(), list(args)
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, "MEMPLAN_API_TOKEN": TOKEN, "MEMPLAN_TEST_FAULTS": "1", **(env or {})}
        self.proc = None

    def start(self) -> "Server":
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "planner.cli",
                "serve",
                "--port",
                str(self.port),
                "--store",
                str(self.store),
                "--probe-timeout",
                "120",
                *self.args,
            ],
            env=self.env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.2)
            if self.proc.poll() is not None:
                raise RuntimeError(self.proc.stderr.read().decode()[-2000:])
        raise RuntimeError("server did not start in 60 s")

    def kill(self, sig=signal.SIGTERM) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(timeout=30)

    def client(self, token: str | None = TOKEN) -> "httpx.Client":
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        # a pooled connection is dropped after 1 s idle, well before uvicorn closes it (timeout_keep_alive, 5 s): with
        # both at 5 s, a request sent as the server closed got "connection reset by peer" (stop 55's CI)
        limits = httpx.Limits(keepalive_expiry=1.0)
        return httpx.Client(base_url=self.url, headers=headers, timeout=60, limits=limits)


@pytest.fixture(scope="session", autouse=True)
def testclient_host():
    """TestClient's requests carry `Host: testserver`, which the Host allow-list (api/auth.py) answers only when it
    is listed: listed here, for every app these tests make (module-scoped ones too) and every server they start."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MEMPLAN_ALLOWED_HOSTS", '["testserver"]')
        yield


@pytest.fixture
def server(tmp_path):
    s = Server(tmp_path / "store.sqlite").start()
    yield s
    s.kill()


def wait_job(client, jid: str, done=("done", "cancelled", "interrupted"), timeout_s: float = 120) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job = client.get(f"/v1/probes/{jid}").json()
        if job["status"] in done:
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {jid} still {job['status']} after {timeout_s} s")


def probe_pids(store: Path) -> list[int]:
    """The live probe processes of a server's job queue (their folders are under STORE.jobs/)."""
    return probe_pids_in(str(store) + ".jobs")


def probe_pids_in(folder) -> list[int]:
    """The live probe processes whose job folders are under `folder` (a cluster executor's shared folder)."""
    folder = str(folder)
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if "probes.run" in cmd and folder in cmd and state != "Z":
            pids.append(int(proc.name))
    return pids


def records(store) -> int:
    """The probe records in a store (a SQLite file or a PostgreSQL URL)."""
    from planner.evidence.store import Store

    st = Store(store)  # a store no probe has written yet has its tables made here
    try:
        return st.db.execute("SELECT COUNT(*) FROM probes").fetchone()[0]
    finally:
        st.close()


def wait_for(ok, what: str, timeout_s: float = 60):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = ok()
        if got:
            return got
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


def running_hang(client, probe: dict, timeout_s: float = 60) -> str:
    """A probe job that hangs, once its cluster scheduler says it runs; its id."""
    jid = client.post("/v1/probes", json={**probe, "inject_fault": "hang"}).json()["id"]
    wait_for(
        lambda: client.get(f"/v1/probes/{jid}").json()["scheduler_state"] == "RUNNING", "the job to run", timeout_s
    )
    return jid
