"""Running the `planner` command as a user does: a subprocess (a narrow terminal, so a printed command must
stay whole), one-line errors, exit codes 0, 2, 3."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PLAN_KEYS = {
    "micro_batch",
    "grad_accum",
    "world_size",
    "global_batch",
    "precision",
    "checkpointing",
    "zero_stage",
    "offload",
    "optimizer",
    "lora_rank",
    "memory",
    "fits",
    "reason",
    "step_time_s",
    "tokens_per_s",
    "evidence",
    "launch",
}
MEMORY_KEYS = {
    "params_bytes",
    "grads_bytes",
    "optimizer_bytes",
    "activations_bytes",
    "temp_bytes",
    "peak_allocated_bytes",
    "overhead_bytes",
    "device_total_bytes",
    "capacity_bytes",
    "headroom_bytes",
}
SUGGEST = [
    "suggest",
    "--model",
    "llama-3.1-8b",
    "--gpu",
    "a100-80gb",
    "--gpus-per-node",
    "8",
    "--global-batch",
    "256",
    "--seq-len",
    "4096",
]


def planner(*args, store=None, cwd=ROOT, timeout=600, env=None):
    """`python -m planner.cli ARGS` at COLUMNS=40 (CI's longer checkout path once made rich wrap a command
    mid-flag); `store` sets MEMPLAN_STORE."""
    penv = {
        "OMP_NUM_THREADS": "1",
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "COLUMNS": "40",
        "HOME": os.environ.get("HOME", "/tmp"),
        "MEMPLAN_HUB": os.environ.get("MEMPLAN_HUB", "0"),  # no Hub fetch (tests/conftest.py)
        **(env or {}),
    }
    if store is not None:
        penv["MEMPLAN_STORE"] = str(store)
    return subprocess.run(
        [sys.executable, "-m", "planner.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        check=False,
        env=penv,
    )


def one_line_error(r, needle: str, code: int = 2) -> None:
    """Exit `code`, `needle` in a single stderr line, and no traceback."""
    assert r.returncode == code, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.stderr[-2000:]


def flags_of(data: dict, tmp_path: Path | None = None) -> list[str]:
    """The CLI flags a user would type for a request's fields (knobs by their flag, zero_stage as --zero; a workload as
    --workload KIND and its inputs' own flags; a list comma-joined; a config.json object written under tmp_path)."""
    from planner.config.knobfields import flag_of

    out = []
    for key, value in data.items():
        if key == "model" and isinstance(value, dict):
            path = tmp_path / f"c{len(list(tmp_path.iterdir()))}.json"
            path.write_text(json.dumps(value))
            value = str(path)
        if value is None or value is False:
            continue
        if key == "workload" and isinstance(value, dict):
            inputs = {k: v for k, v in value.items() if k not in ("kind", "roles")}
            out += flags_of({"workload": value.get("kind", "sft"), **inputs}, tmp_path)
            out += role_flags(value.get("roles") or {})
        elif value is True:
            out.append(flag_of(key))
        else:
            out += [flag_of(key), ",".join(map(str, value)) if isinstance(value, list) else str(value)]
    return out


def role_flags(roles: dict) -> list[str]:
    """The RL roles' flags (planner/cli/roleargs.py: one a Roles field; booleans as true/false, lists comma-joined)."""
    from planner.cli.roleargs import flag

    out = []
    for key, value in roles.items():
        if value is None:
            continue
        shown = (
            str(value).lower()
            if isinstance(value, bool)
            else ",".join(value)
            if isinstance(value, (list, tuple))
            else str(value)
        )
        out += [flag(key), shown]
    return out
