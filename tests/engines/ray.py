"""A real Ray head on loopback for the tests (issue 36): `ray start --head` from the Ray venv (tools/fwenv.sh ray:
ray[default] 2.55.0, whose dashboard serves the Jobs API), with 2 CPUs and 2 GPUs declared (Ray schedules declared GPUs
as it does real ones, and sets CUDA_VISIBLE_DEVICES for the job), its temporary folder short (Ray's sockets live there),
stopped with `ray stop --force`."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from tests.engines.slurm import _free_ports

ROOT = Path(__file__).resolve().parents[2]


def ray_bin() -> str | None:
    for cand in (os.environ.get("MEMPLAN_RAY_BIN"), str(ROOT / ".fwenv" / "ray" / "bin" / "ray"), shutil.which("ray")):
        if cand and Path(cand).is_file():
            return cand
    return None


def missing() -> str | None:
    if ray_bin() is None:
        return "no ray with its dashboard (`make fwenv` builds .fwenv/ray: ray[default]==2.55.0)"
    return None


class RayHead:
    def __init__(self) -> None:
        self.temp = Path(tempfile.mkdtemp(prefix="memplan-ray-", dir="/tmp"))  # short: Ray's socket paths
        self.port, self.dash = _free_ports(2)
        self.address = f"http://127.0.0.1:{self.dash}"
        self.env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}

    def start(self) -> RayHead:
        cmd = [
            ray_bin(),
            "start",
            "--head",
            f"--port={self.port}",
            f"--dashboard-port={self.dash}",
            "--dashboard-host=127.0.0.1",
            "--node-ip-address=127.0.0.1",
            "--num-cpus=2",
            "--num-gpus=2",
            "--include-dashboard=true",
            "--disable-usage-stats",
            f"--temp-dir={self.temp}",
        ]
        out = subprocess.run(cmd, env=self.env, capture_output=True, text=True, check=False, timeout=120)
        if out.returncode != 0:
            raise RuntimeError(f"ray start failed: {out.stderr[-2000:]}")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.address + "/api/version", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.5)
        raise RuntimeError("the Ray dashboard did not answer in 60 s")

    def add_worker(self, resource: str) -> None:
        """A second node (a raylet of its own on this machine) holding 1 GPU and the custom resource `resource`."""
        cmd = [
            ray_bin(),
            "start",
            f"--address=127.0.0.1:{self.port}",
            "--num-cpus=1",
            "--num-gpus=1",
            f'--resources={{"{resource}": 1}}',
            "--node-ip-address=127.0.0.1",
            "--disable-usage-stats",
        ]
        out = subprocess.run(cmd, env=self.env, capture_output=True, text=True, check=False, timeout=120)
        if out.returncode != 0:
            raise RuntimeError(f"ray start (worker) failed: {out.stderr[-2000:]}")

    def crash_worker(self, resource: str) -> list[int]:
        """kill -9 the raylet of the worker node that holds `resource` (its node dies); the pids killed."""
        pids = []
        for proc in Path("/proc").iterdir():
            try:
                cmd = (proc / "cmdline").read_bytes() if proc.name.isdigit() else b""
            except OSError:
                continue
            if b"raylet" in cmd and resource.encode() in cmd:
                os.kill(int(proc.name), 9)
                pids.append(int(proc.name))
        return pids

    def stop(self) -> None:
        subprocess.run([ray_bin(), "stop", "--force"], env=self.env, capture_output=True, check=False, timeout=120)
        shutil.rmtree(self.temp, ignore_errors=True)
