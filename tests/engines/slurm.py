"""A real Slurm cluster of one node on localhost for the tests (issue 36): munged with its own key and socket, slurmctld
and slurmd from Debian's slurm-wlm 22.05, each on free ports, with every state file in one temporary folder. The node
declares GRES gpu:2 on /dev/null files (scheduling only: no device is bound), so `--gres=gpu:N` is scheduled and refused
as on a GPU partition. No slurmdbd: a finished job's state is read from the controller (MinJobAge keeps it an hour),
which is what memplan's executor falls back to where `sacct` has no accounting to read."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from recipe.dist import free_port

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol")


def missing() -> str | None:
    """Why no cluster can start here (None when it can): a daemon not installed, or not root (slurmd runs jobs as
    their users, which takes root)."""
    gone = [d for d in DAEMONS if shutil.which(d) is None and not Path("/usr/sbin", d).exists()]
    if gone:
        return f"Slurm/munge not installed ({', '.join(gone)}): .ci/run installs Debian's slurm-wlm and munge"
    if os.geteuid() != 0:
        return "slurmd needs root to start jobs as their users"
    return None


def _free_ports(n: int) -> list[int]:
    """n distinct free ports below the ephemeral range (recipe.dist.free_port)."""
    ports: list[int] = []
    while len(ports) < n:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


def _conf(root: Path, ctld_port: int, slurmd_port: int, socket_path: Path, cpus: int) -> str:
    node = socket.gethostname().split(".")[0]
    return f"""ClusterName=memplan-test
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={socket_path}
StateSaveLocation={root}/ctld
SlurmdSpoolDir={root}/slurmd
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge=3600
SlurmdTimeout=30
MpiDefault=none
GresTypes=gpu
NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=1000 Gres=gpu:2 State=UNKNOWN
PartitionName=debug Nodes={node} Default=YES MaxTime=60 State=UP
"""


class SlurmCluster:
    """start() brings up the three daemons and waits until the node is idle; env() is what a client (sbatch, the API)
    needs to reach it; stop() kills them all."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.procs: list[subprocess.Popen] = []
        self.conf = self.root / "slurm.conf"
        self.node = socket.gethostname().split(".")[0]

    def env(self) -> dict:
        return {"SLURM_CONF": str(self.conf)}

    def start(self) -> SlurmCluster:
        r = self.root
        for d in ("munge", "ctld", "slurmd"):
            (r / d).mkdir(parents=True, exist_ok=True)
        (r / "munge").chmod(0o700)
        key = r / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        sock = r / "munge" / "munge.socket"
        ctld_port, slurmd_port = _free_ports(2)
        self.conf.write_text(_conf(r, ctld_port, slurmd_port, sock, os.cpu_count() or 2))
        (r / "gres.conf").write_text(
            f"NodeName={self.node} Name=gpu File=/dev/null\nNodeName={self.node} Name=gpu File=/dev/zero\n"
        )
        munged = shutil.which("munged") or "/usr/sbin/munged"
        self._spawn(
            [
                munged,
                "-F",
                "-f",
                f"--key-file={key}",
                f"--socket={sock}",
                f"--pid-file={r}/munge/munged.pid",
                f"--log-file={r}/munge/munged.log",
                f"--seed-file={r}/munge/munged.seed",
            ]
        )
        self._wait(lambda: sock.exists(), "munged")
        env = {**os.environ, **self.env()}
        self._spawn([shutil.which("slurmctld") or "/usr/sbin/slurmctld", "-D", "-i", "-f", str(self.conf)], env)
        self._spawn([shutil.which("slurmd") or "/usr/sbin/slurmd", "-D", "-f", str(self.conf)], env)
        self._wait(self._idle, "the node to be idle")
        return self

    def _spawn(self, cmd: list[str], env: dict | None = None) -> None:
        log = open(self.root / (Path(cmd[0]).name + ".out"), "wb")  # noqa: SIM115
        self.procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=log, start_new_session=True))

    def _idle(self) -> bool:
        out = self.client(["sinfo", "-h", "-N", "-o", "%t"])
        return out.returncode == 0 and out.stdout.strip() in ("idle", "mix", "alloc")

    def _wait(self, ok, what: str, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if ok():
                return
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{p.args[0]} exited {p.returncode} waiting for {what}: {self.logs()}")
            time.sleep(0.2)
        raise RuntimeError(f"timed out waiting for {what}: {self.logs()}")

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-1500:]}" for p in sorted(self.root.glob("*.log*"))
        )

    def client(self, cmd: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(cmd, env={**os.environ, **self.env()}, capture_output=True, text=True, check=False)

    def jobs(self) -> list[str]:
        """The ids of the jobs the controller holds that are not yet ended."""
        out = self.client(["squeue", "-h", "-r", "-o", "%i"])
        return out.stdout.split()

    def stop(self) -> None:
        """Cancel every job and wait for its steps to end (slurmstepd outlives slurmd by design), then the daemons."""
        self.client(["scancel", "--full", "--user=root"])
        deadline = time.monotonic() + 20
        while self.jobs() and time.monotonic() < deadline:
            time.sleep(0.25)
        for p in reversed(self.procs):
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()
        for pid in _stepds(self.root):
            os.kill(pid, 9)


def _stepds(root: Path) -> list[int]:
    """slurmstepd processes of this cluster (their command line or environment names its spool folder)."""
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if b"slurmstepd" in cmd:
            try:
                if str(root).encode() in (proc / "environ").read_bytes() or str(root).encode() in cmd:
                    out.append(int(proc.name))
            except OSError:
                continue
    return out
