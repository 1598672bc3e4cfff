"""Slurm as a launch script meets it: the `#SBATCH` header's options as the job's SLURM_* variables, check's
--nodes / --gpus-per-node as the job's allocation (over the header's), and the options of an `srun` that starts a
launcher (world.srun reads what it starts).
"""

from __future__ import annotations

import re

from planner.intake.collect import GIVEN_FIELDS
from planner.intake.shellvars import Vars

# check's flags that are the job's allocation, and the Slurm variables a job has them in (sbatch(1))
GIVEN_SLURM = {"nodes": "nodes", "gpus_per_node": "gpus-per-node"}


def given() -> dict:
    """The allocation's flags the caller gives (GIVEN_FIELDS), field -> value."""
    return {f: v for f, v in GIVEN_FIELDS.get().items() if f in GIVEN_SLURM and isinstance(v, int)}


def given_allocation(vars: Vars) -> None:
    """--nodes / --gpus-per-node given beside the script are the job's: its SLURM_* variables (over the header's), so
    `NNODES=${SLURM_JOB_NUM_NODES:-1}` and the arithmetic after it follow the flag; reads of them are noted."""
    for f, value in given().items():
        for name in SBATCH[GIVEN_SLURM[f]]:
            vars.set(name, str(value))
            vars.exported.add(name)
            vars.watched.add(name)


# `#SBATCH` options and the variables Slurm sets from them in the job's environment (sbatch(1), "OUTPUT ENVIRONMENT
# VARIABLES": SLURM_JOB_NUM_NODES and SLURM_NNODES from --nodes, SLURM_NTASKS_PER_NODE, SLURM_GPUS_PER_NODE and
# SLURM_GPUS_ON_NODE from --gpus-per-node or --gres=gpu[:type]:N, SLURM_JOB_NAME); VILA's scripts also read
# SLURM_JOB_GPUS_PER_NODE
SBATCH = {
    "nodes": ("SLURM_JOB_NUM_NODES", "SLURM_NNODES"),
    "ntasks-per-node": ("SLURM_NTASKS_PER_NODE",),
    "gpus-per-node": ("SLURM_GPUS_PER_NODE", "SLURM_GPUS_ON_NODE", "SLURM_JOB_GPUS_PER_NODE"),
    "job-name": ("SLURM_JOB_NAME",),
}
SBATCH_SHORT = {"-N": "nodes", "-J": "job-name"}


def sbatch_environment(text: str, vars: Vars) -> None:
    """The `#SBATCH` header's options as the job's Slurm variables (a node range `4-8` takes its least)."""
    for line in text.splitlines()[:200]:
        if not line.startswith("#SBATCH"):
            continue
        words = line[len("#SBATCH") :].split("#")[0].split()
        for i, w in enumerate(words):
            key, _, value = w.lstrip("-").partition("=") if w.startswith("--") else (SBATCH_SHORT.get(w, ""), "", "")
            if w in SBATCH_SHORT and i + 1 < len(words):
                value = words[i + 1]
            if key == "gres" and (m := re.fullmatch(r"gpu(?::[\w.-]+)?:(\d+)", value)):
                key, value = "gpus-per-node", m.group(1)
            if key not in SBATCH or not value:
                continue
            value = value.split("-")[0] if key == "nodes" else value
            for name in SBATCH[key]:
                vars.set(name, value)
                vars.exported.add(name)


def given_lines(vars: Vars) -> list[str]:
    """One line where the script read a Slurm variable a flag set (given_allocation)."""
    if not vars.seen:
        return []
    flags = ", ".join(f"--{f.replace('_', '-')} {v}" for f, v in given().items())
    line = (
        f"{flags} (given) read as the Slurm job's {', '.join(sorted(vars.seen))}: the script's own arithmetic follows"
    )
    return [line + " the flag"]


# srun's options that place its tasks (srun(1)): a short option's value may follow it or be joined to it (-N4)
SRUN = {"-N": "nodes", "--nodes": "nodes", "-n": "ntasks", "--ntasks": "ntasks", "--ntasks-per-node": "ntasks_per_node"}


def srun_options(words: list[str]) -> dict[str, str] | None:
    """srun's placing options from the words before a launcher; None where no srun starts it."""
    names = [w.rsplit("/", 1)[-1] for w in words]
    if "srun" not in names:
        return None
    out, rest = {}, words[names.index("srun") + 1 :]
    for i, w in enumerate(rest):
        name, eq, value = w.partition("=")
        if not eq and re.fullmatch(r"-[Nn]\d+", w):
            name, value = w[:2], w[2:]
        elif not eq and i + 1 < len(rest):
            value = rest[i + 1]
        if name in SRUN and value:
            out[SRUN[name]] = value.split("-")[0]
    return out
