"""Probe jobs as Slurm batch jobs: one `sbatch` per job, or one job array per sweep (`--array=0-N`, each task running
the job whose folder is at its index), with the settings' partition, account, GRES `gpu:N` and a time limit of the
probe timeout; `scancel` to cancel; states read back with `scontrol show job` while the controller holds the job
(MinJobAge, 300 s by default), then `sacct` where accounting is kept. Jobs are named `memplan-<job id>` (a sweep's
array `memplan-<sweep id>`) so that a job submitted by a process that died before writing its id is found again.

Slurm's job states (slurm.h, `job_states`; sacct(1) "JOB STATE CODES") map to State: PENDING, CONFIGURING, RUNNING,
COMPLETING, SUSPENDED, REQUEUED are live; COMPLETED and FAILED are the probe's own end (its exit code says which);
TIMEOUT is the time limit; NODE_FAIL, BOOT_FAIL, PREEMPTED, OUT_OF_MEMORY (the node's cgroup, not the GPU),
DEADLINE and a CANCELLED the API did not ask for are the job lost, with Slurm's reason.
"""

from __future__ import annotations

import math
import os
import shlex
import subprocess

from api.executors import State, Submission, code_root, probe_command

LIVE = {
    "PENDING",
    "CONFIGURING",
    "RUNNING",
    "COMPLETING",
    "SUSPENDED",
    "REQUEUED",
    "RESIZING",
    "SIGNALING",
    "STAGE_OUT",
}
TIMEOUT_STATES = {"TIMEOUT"}
OWN_END = {"COMPLETED", "FAILED"}
LOST_REASONS = {
    "JobLaunchFailure",
    "NodeDown",
    "SystemFailure",
    "launch_failed_requeue_held",
}  # FAILED, not by the probe


class SlurmError(RuntimeError):
    pass


def _run(cmd: list[str], timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def _exit(code: str) -> int | None:
    """Slurm's ExitCode `status:signal` as a Popen returncode (a signal negative)."""
    status, _, sig = code.partition(":")
    if sig and sig != "0":
        return -int(sig)
    return int(status) if status.isdigit() else None


def to_state(state: str, reason: str, exit_code: str) -> State:
    word = state.split()[0].rstrip("+") if state else "UNKNOWN"
    if word in LIVE:
        return State(word, reason)
    if word in TIMEOUT_STATES:
        return State(word, reason, terminal=True, timeout=True)
    if word in OWN_END and reason not in LOST_REASONS:
        return State(word, reason, terminal=True, returncode=_exit(exit_code))
    return State(word, reason or word, terminal=True, lost=True)


class Slurm:
    kind = "slurm"

    def __init__(self, settings) -> None:
        self.settings = settings

    def script(self, subs: list[Submission], name: str) -> str:
        s = self.settings
        minutes = max(1, math.ceil(max(x.timeout_s for x in subs) / 60))
        # each task writes its own folder (its stderr is the crash record's tail); Slurm's own file would outlive a
        # finished task's folder and fail the launch of the array's later tasks (JobLaunchFailure)
        lines = ["#!/bin/bash", f"#SBATCH --job-name={name}", f"#SBATCH --time={minutes}", "#SBATCH --no-requeue"]
        lines += ["#SBATCH --ntasks=1", "#SBATCH --output=/dev/null"]
        if s.probe_gpus:
            lines.append(f"#SBATCH --gres=gpu:{s.probe_gpus}")
        if s.slurm_partition:
            lines.append(f"#SBATCH --partition={s.slurm_partition}")
        if s.slurm_account:
            lines.append(f"#SBATCH --account={s.slurm_account}")
        lines += [f"#SBATCH {a}" for a in s.slurm_args]
        if len(subs) > 1:
            lines.append(f"#SBATCH --array=0-{len(subs) - 1}")
        lines.append(f"export PYTHONPATH={shlex.quote(code_root())}${{PYTHONPATH:+:$PYTHONPATH}}")
        cmds = [
            " ".join(shlex.quote(p) for p in probe_command(s, x)) + f" 2>{shlex.quote(str(x.folder / 'stderr.txt'))}"
            for x in subs
        ]
        envs = [" ".join(f"{k}={shlex.quote(v)}" for k, v in x.env.items() if v) for x in subs]
        runs = [f"exec env {e} {c}" if e else f"exec {c}" for e, c in zip(envs, cmds)]
        if len(subs) == 1:
            lines.append(runs[0])
        else:
            lines.append("case $SLURM_ARRAY_TASK_ID in")
            lines += [f"  {i}) {r} ;;" for i, r in enumerate(runs)]
            lines.append("esac")
        return "\n".join(lines) + "\n"

    def submit(self, subs: list[Submission], name: str) -> list[str]:
        """One job (or one array for several); their Slurm ids (`123`, or `123_0` ... for an array's tasks)."""
        path = subs[0].folder / "probe.sbatch"
        path.write_text(self.script(subs, name))
        out = _run(["sbatch", "--parsable", str(path)])
        if out.returncode != 0:
            raise SlurmError(
                out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"sbatch exit {out.returncode}"
            )
        job = out.stdout.strip().split(";")[0]
        return [job] if len(subs) == 1 else [f"{job}_{i}" for i in range(len(subs))]

    def states(self, ids: list[str]) -> dict[str, State]:
        """Each id's state (an id neither the controller nor accounting knows is absent)."""
        out: dict[str, State] = {}
        for sid in ids:
            got = self._scontrol(sid) or self._sacct(sid)
            if got is not None:
                out[sid] = got
        return out

    def _scontrol(self, sid: str) -> State | None:
        r = _run(["scontrol", "show", "job", "-o", sid])
        if r.returncode != 0:
            return None
        for line in r.stdout.splitlines():
            f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
            task = f"{f.get('ArrayJobId')}_{f.get('ArrayTaskId')}" if f.get("ArrayTaskId") else f.get("JobId")
            if task == sid or "_" not in sid:
                return to_state(f.get("JobState", ""), f.get("Reason", ""), f.get("ExitCode", ""))
        return None

    def _sacct(self, sid: str) -> State | None:
        r = _run(["sacct", "-n", "-P", "-X", "-j", sid, "-o", "JobID,State,Reason,ExitCode"])
        if r.returncode != 0:
            return None
        for line in r.stdout.splitlines():
            jid, state, reason, code = (line.split("|") + ["", "", "", ""])[:4]
            if jid == sid:
                return to_state(state, reason, code)
        return None

    def find(self, name: str) -> list[str]:
        """The ids of the jobs of this name the controller holds, live or ended (its submitter died before writing them)."""
        r = _run(["squeue", "-h", "-r", "-t", "all", "--name", name, "-o", "%i"])
        return r.stdout.split() if r.returncode == 0 else []

    def cancel(self, ids: list[str]) -> None:
        if ids:
            _run(["scancel", *ids])

    @staticmethod
    def available() -> str | None:
        """Why sbatch cannot be used here (None when it can)."""
        from shutil import which

        gone = [c for c in ("sbatch", "scontrol", "scancel", "squeue") if which(c) is None]
        return f"no {', '.join(gone)} on PATH (SLURM_CONF={os.environ.get('SLURM_CONF', 'unset')})" if gone else None
