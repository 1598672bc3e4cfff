import ctypes
import os
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def fake_nvml(monkeypatch, devices: list[tuple[str, int]]) -> None:
    """Stand in for nvidia-ml-py's module: a host with these (name, total bytes) GPUs. Only the driver
    is faked; the code under test makes its real NVML calls."""
    import types

    class NVMLError(Exception):
        pass

    m = types.ModuleType("pynvml")
    m.NVMLError = NVMLError
    m.nvmlInit = lambda: None
    m.nvmlShutdown = lambda: None
    m.nvmlDeviceGetCount = lambda: len(devices)
    m.nvmlDeviceGetHandleByIndex = lambda i: devices[i]
    m.nvmlDeviceGetName = lambda h: h[0]
    m.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=h[1], used=0, free=h[1])
    monkeypatch.setitem(sys.modules, "pynvml", m)


# -- issue 20: the suite leaks nothing ----------------------------------------------------------------------
PR_SET_CHILD_SUBREAPER = 36


def _ppid_state(pid: int) -> tuple[int, str] | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), fields[0]


def live_descendants(root: int) -> list[tuple[int, str]]:
    """(pid, command line) of every live process under `root` (orphans reparent to it: it is a subreaper)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (ps := _ppid_state(int(entry.name))) and ps[1] != "Z":
            children.setdefault(ps[0], []).append(int(entry.name))
    out, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        out.append((pid, cmd[:200]))
        todo += children.get(pid, [])
    return out


def _memplan_temp() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("memplan-*")}


@pytest.fixture(scope="session", autouse=True)
def nothing_leaks():
    """Fail the run when a process a test started is still alive at the end (orphans included: this
    process is made their subreaper), or a memplan temporary folder is left behind. The session gets a
    temporary folder of its own (TMPDIR, for its subprocesses too), so another run on the machine is not
    counted as ours."""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    own = tempfile.mkdtemp(prefix="pytest-session-")
    os.environ["TMPDIR"], tempfile.tempdir = own, own
    before = _memplan_temp()
    yield
    deadline = time.monotonic() + 15        # grace for what is shutting down (a server's last probe)
    while (left := live_descendants(os.getpid())) and time.monotonic() < deadline:
        time.sleep(0.25)
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:    # reap what reparented to us and ended
                pass
        except ChildProcessError:
            pass
    dirs = sorted(_memplan_temp() - before)
    problems = [f"process {pid} still alive: {cmd}" for pid, cmd in left]
    problems += [f"temporary folder left: {Path(tempfile.gettempdir()) / d}" for d in dirs]
    if problems:
        pytest.fail("the test session leaked:\n" + "\n".join(problems), pytrace=False)
    import shutil

    shutil.rmtree(own, ignore_errors=True)
