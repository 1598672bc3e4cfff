"""pyproject.toml's extras are whole (issue 50): each one, installed alone into a fresh venv, runs the docs example of
the commands it is for. Before, `pip install -e ".[scan]"` left out jinja2 and docs/data.md's own `planner scan`
ended in a traceback; deepspeed, qlora and trl ran no step without the sim extra beside them.

uv (the dev extra) builds each venv from its cache in seconds (hard links; the first run downloads from the index).
torch goes in first, alone, from the CPU wheel pip is set up to find (its find-links; Makefile TORCH_VERSION): a bare
`torch` requirement would pull the CUDA build, several GB. Every example writes its store under tmp_path.
"""

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TORCH = "torch==" + re.search(r"^TORCH_VERSION := (\S+)$", (ROOT / "Makefile").read_text(), re.MULTILINE).group(1)
NEEDS_TORCH = {"sim", "deepspeed", "qlora", "trl"}
PLAN = "--model llama-3.1-8b --gpu a100-80gb --gpus-per-node 8 --global-batch 256 --seq-len 4096 --top 5"
# extra -> its docs example (the page it is on) and a line of what it prints
EXAMPLES = {
    "scan": (  # docs/data.md
        "scan docs/examples/vlm-chat.jsonl --tokenizer docs/examples/tokenizer",
        "the longest is row 96",
    ),
    "sim": ("profile --model llama-3.1-8b --micro-batch 2 --seq-len 4096 --precision bf16 --top 4", "model.layers"),
    "trl": (  # docs/rl.md's GRPO probe on --backend sim (its cpu run, real TRL steps, takes a minute on 2 cores)
        (
            "probe --model debug-llama --micro-batch 4 --grad-accum 2 --workload grpo --num-generations 4 "
            "--max-prompt-length 32 --max-completion-length 64 --beta 0.04 --precision fp32 --backend sim"
        ),
        "peak by phase",
    ),
    "qlora": (  # docs/probes.md: QLoRA with real bitsandbytes in the CPU run
        "probe --model debug-llama --micro-batch 1 --seq-len 32 --lora-rank 8 --quant nf4 --backend cpu",
        "cpu ok",
    ),
    "deepspeed": (  # docs/trainer.md: DeepSpeed plans (zero >= 1) run the DeepSpeed engine
        "train --model debug-llama --micro-batch 1 --seq-len 16 --max-steps 1 --zero 2 --device cpu",
        "step 1/1",
    ),
    "plot": (f"suggest {PLAN} --plot plans.png", "memory per GPU"),  # docs/api.md; and plans.png is drawn
}


def find_links() -> list[str]:
    """The folders and pages pip is set up to find wheels in (its config and PIP_FIND_LINKS), for uv."""
    cmd = [sys.executable, "-m", "pip", "config", "list"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return list(dict.fromkeys(w for v in re.findall(r"find-links='([^']*)'", out) for w in v.split()))


def uv() -> str:
    found = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    assert found, "uv is missing: the dev extra installs it (make setup-dev)"
    return found


def venv_of(extra: str, where: Path) -> Path:
    """A fresh venv holding memplan (editable) with `extra` alone, torch first where the extra needs it."""
    env = {**os.environ, "VIRTUAL_ENV": str(where)}
    env.pop("PYTHONPATH", None)
    links = [a for link in find_links() for a in ("--find-links", link)]

    def install(*what: str) -> None:
        cmd = [uv(), "pip", "install", "-q", *links, *what]
        subprocess.run(cmd, cwd=ROOT, env=env, check=True, timeout=600)

    subprocess.run([uv(), "venv", "-q", str(where)], cwd=ROOT, env=env, check=True, timeout=120)
    if extra in NEEDS_TORCH:
        install(TORCH)
    constraint = where / "torch-constraint.txt"
    constraint.write_text(TORCH + "\n")  # the CPU wheel stays
    # deepspeed is an sdist whose setup.py imports torch: built against the venv's own
    # constraints.txt: the versions the tests measure, as make setup-dev installs them
    install(
        "-c",
        str(constraint),
        "-c",
        str(ROOT / "constraints.txt"),
        "--no-build-isolation-package",
        "deepspeed",
        "-e",
        f".[{extra}]",
    )
    return where


def planner(venv: Path, args: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """`planner ARGS` with the venv's entry point, from the repository root (the examples' paths are relative)."""
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run_env = {**clean, "MEMPLAN_STORE": str(tmp_path / "store.sqlite"), "HOME": str(tmp_path), **env}
    args = args.replace("plans.png", str(tmp_path / "plans.png"))
    cmd = [str(venv / "bin" / "planner"), *args.split()]
    return subprocess.run(cmd, cwd=ROOT, env=run_env, capture_output=True, text=True, timeout=600, check=False)


# the trl extra's example, real TRL GRPO steps (a minute on 2 cores), in the sweep tier since stop 68, for CI's room;
# the deepspeed and qlora extras' (34 s and 25 s of a worker in make test on 2026-12-07: DeepSpeed's sdist built into a
# fresh venv, then a ZeRO-2 step; bitsandbytes' QLoRA step) since stop 76. Every commit installs torch and the probes
# alone (the sim extra) and the torch-free extras (scan, plot, api), each from a fresh venv by the same venv_of
SWEEP_EXTRAS = {"trl", "deepspeed", "qlora"}


@pytest.mark.parametrize(
    "extra", [pytest.param(e, marks=pytest.mark.sweep if e in SWEEP_EXTRAS else ()) for e in sorted(EXAMPLES)]
)
def test_an_extra_alone_runs_its_docs_example(extra, tmp_path):
    venv = venv_of(extra, tmp_path / "venv")
    args, says = EXAMPLES[extra]
    out = planner(venv, args, tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert says in out.stdout + out.stderr
    assert extra != "plot" or (tmp_path / "plans.png").read_bytes().startswith(b"\x89PNG")


def test_the_api_extra_alone_serves(tmp_path):
    """docs/api.md: `planner serve`, then a plan over HTTP."""
    import json
    import urllib.request

    from recipe.dist import free_port

    venv = venv_of("api", tmp_path / "venv")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(MEMPLAN_STORE=str(tmp_path / "store.sqlite"), HOME=str(tmp_path))
    cmd = [str(venv / "bin" / "planner"), "serve", "--port", str(port)]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=subprocess.PIPE, start_new_session=True)
    try:
        body = {"model": "llama-3.1-8b", "gpu": "h100", "gpus_per_node": 8, "global_batch": 256, "seq_len": 4096}
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/plans", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    assert r.status == 200 and json.loads(r.read())["plans"]
                    break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
                assert time.monotonic() < deadline, "planner serve did not answer in 60 s"
                time.sleep(0.3)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_postgres_extra_alone_reads_a_shared_store(tmp_path, pg_url):
    """docs/cluster.md: MEMPLAN_STORE=postgresql://... is read by every face (`planner probes list` here)."""
    venv = venv_of("postgres", tmp_path / "venv")
    out = planner(venv, "probes list", tmp_path, MEMPLAN_STORE=pg_url)
    assert out.returncode == 0, out.stderr[-3000:]
