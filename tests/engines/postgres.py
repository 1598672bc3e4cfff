"""A real PostgreSQL server for the tests (issue 36): initdb into a temporary folder, `postgres` on a free loopback port
with trust auth, one database; stop() kills it and removes the folder. Debian's postgresql package puts its programs in
/usr/lib/postgresql/<version>/bin; as root (initdb refuses root) the server runs as the `postgres` user the package makes.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from tests.engines.slurm import _free_ports


def bindir() -> Path | None:
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(versions[-1]).parent if versions else None


def missing() -> str | None:
    if bindir() is None:
        return "PostgreSQL not installed (no initdb): .ci/run installs Debian's postgresql"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root with no `postgres` user to run the server as"
    return None


class PgServer:
    def __init__(self) -> None:
        # as root the server runs as `postgres`, which cannot enter the session's private TMPDIR (mode 0700)
        self.root = Path(tempfile.mkdtemp(prefix="memplan-pg-", dir="/tmp" if os.geteuid() == 0 else None))
        self.port = _free_ports(1)[0]
        self.proc: subprocess.Popen | None = None
        self.url = f"postgresql://memplan@127.0.0.1:{self.port}/memplan"

    def _as_owner(self):
        if os.geteuid() != 0:
            return {}
        pw = pwd.getpwnam("postgres")
        for p in (self.root, *self.root.rglob("*")):
            os.chown(p, pw.pw_uid, pw.pw_gid)

        def demote():
            os.setgid(pw.pw_gid)
            os.setuid(pw.pw_uid)

        return {"preexec_fn": demote}

    def start(self) -> PgServer:
        b = bindir()
        data = self.root / "data"
        self.root.chmod(0o755)
        run = self._as_owner()
        subprocess.run(
            [str(b / "initdb"), "-D", str(data), "-U", "memplan", "-A", "trust", "-E", "UTF8", "--no-sync"],
            check=True,
            capture_output=True,
            cwd=self.root,
            **run,
        )
        log = open(self.root / "postgres.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [
                str(b / "postgres"),
                "-D",
                str(data),
                "-p",
                str(self.port),
                "-k",
                str(self.root),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=off",
                "-c",
                "max_connections=200",
            ],
            stdout=log,
            stderr=log,
            cwd=self.root,
            start_new_session=True,
            **run,
        )
        import psycopg

        deadline = time.monotonic() + 60
        while True:
            try:
                with psycopg.connect(self.url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as c:
                    c.execute("CREATE DATABASE memplan")
                return self
            except psycopg.OperationalError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((self.root / "postgres.log").read_text()[-2000:]) from None
                time.sleep(0.2)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)
