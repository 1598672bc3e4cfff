"""Where the service's planning work runs: a few worker processes, each under a memory limit (RLIMIT_DATA), each
call under a wall-clock deadline. A call past its deadline, or whose client left, has its worker killed and
replaced; the event loop and the threads serving /healthz never run planning code. Expensive calls (`verify`,
sim evidence) also take one of a few heavy slots, so they cannot occupy every worker.

Each worker is a fresh interpreter (`python -m api.sandbox`) that imports the planner before its first call; a killed
worker's successor starts at once, so it is ready by the next call. The CLI plans in its own process instead: the readers' own limits (planner.intake.limits) bound
what one config can cost there.
"""

from __future__ import annotations

import asyncio
import os
import queue
import resource
import signal
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path

MIB = 1024 * 1024


class Deadline(Exception):
    """The call ran past its deadline (or its client left) and its worker was killed."""


class Busy(Exception):
    """No worker or heavy slot came free in time: try again later (the service answers 429 with Retry-After)."""


class OverMemory(Exception):
    """The call needed more memory than a worker may hold."""


def _serve(conn: Connection, memory_bytes: int) -> None:
    """A worker's loop: receive (function, args), send back ("ok", value), ("err", exception) or ("mem", None)."""
    if memory_bytes:
        resource.setrlimit(resource.RLIMIT_DATA, (memory_bytes, memory_bytes))
    conn.send(("ready", None))
    while True:
        try:
            fn, args = conn.recv()
        except (EOFError, OSError):
            return
        try:
            out = ("ok", fn(*args))
        except MemoryError:
            out = ("mem", None)
        except Exception as e:  # noqa: BLE001 - the caller re-raises it in the service's process
            out = ("err", e)
        try:
            conn.send(out)
        except Exception as e:  # noqa: BLE001 - an answer that does not pickle is the call's error
            conn.send(("err", RuntimeError(f"{type(e).__name__}: {e}")))
        if out[0] == "mem":
            return  # a worker that ran out of memory may hold half-built state: the pool replaces it


def main() -> None:
    """`python -m api.sandbox READ_FD WRITE_FD MEMORY_BYTES PRELOAD...`: a worker (its pipe's ends as fds)."""
    import importlib

    rfd, wfd, memory = (int(a) for a in sys.argv[1:4])
    for name in sys.argv[4:]:
        importlib.import_module(name)
    _serve(_Duplex(Connection(rfd, writable=False), Connection(wfd, readable=False)), memory)


class _Duplex:
    """A reading and a writing Connection as one (a worker's two pipes)."""

    def __init__(self, r: Connection, w: Connection) -> None:
        self.r, self.w = r, w

    def send(self, obj) -> None:
        self.w.send(obj)

    def recv(self):
        return self.r.recv()

    def poll(self, timeout: float) -> bool:
        return self.r.poll(timeout)

    def close(self) -> None:
        self.r.close()
        self.w.close()


class _Worker:
    """A fresh interpreter (no fork of the threaded server: nothing of its state or locks comes along) that
    imports `preload` and then serves calls over two pipes."""

    def __init__(self, memory_bytes: int | None, preload: list[str]) -> None:
        to_child, from_parent = os.pipe()
        to_parent, from_child = os.pipe()
        root = str(Path(__file__).resolve().parents[1])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
        argv = [sys.executable, "-m", "api.sandbox", str(to_child), str(from_child), str(memory_bytes or 0), *preload]
        self.proc = subprocess.Popen(  # its own process group: a kill takes the probes a `verify` started too
            argv, pass_fds=(to_child, from_child), env=env, stdin=subprocess.DEVNULL, start_new_session=True
        )
        os.close(to_child)
        os.close(from_child)
        self.conn = _Duplex(Connection(to_parent, writable=False), Connection(from_parent, readable=False))
        self.ready = False

    def wait_ready(self, end: float) -> None:
        """Block until the worker has imported its preload (its first message), to `end` (monotonic)."""
        if self.ready:
            return
        if not self.conn.poll(max(end - time.monotonic(), 0)):
            raise Busy("a planning worker did not start in time")
        self.conn.recv()
        self.ready = True

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
        self.conn.close()


class Pool:
    """`processes` workers under `memory_mib` each; `heavy` of them at most on expensive calls at once."""

    def __init__(self, processes: int, memory_mib: int | None, heavy: int = 1, preload: tuple[str, ...] = ()) -> None:
        self.processes, self.memory = processes, memory_mib * MIB if memory_mib else None
        self.heavy = threading.BoundedSemaphore(heavy)
        self.preload = list(preload)
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._all: set[_Worker] = set()
        self._stopped = False
        self._lock = threading.Lock()

    def _spawn(self) -> _Worker:
        with self._lock:
            w = _Worker(self.memory, self.preload)
            self._all.add(w)
            return w

    def start(self) -> None:
        """Start the workers now (each imports the planner meanwhile; else each starts on first use)."""
        self._stopped = False
        while len(self._all) < self.processes:
            self._idle.put(self._spawn())

    def stop(self) -> None:
        with self._lock:
            workers, self._all, self._stopped = list(self._all), set(), True
        for w in workers:
            w.kill()

    def _take(self, wait_s: float) -> _Worker:
        while True:  # an idle worker stopped meanwhile (Pool.stop) is dropped
            try:
                w = self._idle.get_nowait()
            except queue.Empty:
                break
            if w in self._all and w.alive():
                return w
        with self._lock:
            room = len(self._all) < self.processes
        if room:
            return self._spawn()
        try:
            w = self._idle.get(timeout=max(wait_s, 0.0))
            return w if w in self._all else self._take(0)
        except queue.Empty:
            raise Busy(f"all {self.processes} planning workers stayed busy for {wait_s:.0f} s") from None

    def _replace(self, w: _Worker) -> None:
        """Kill the worker; start its successor now, so that it has imported the planner by the next call."""
        w.kill()
        with self._lock:
            self._all.discard(w)
            stopped = self._stopped
        if not stopped:
            self._idle.put(self._spawn())

    def run(self, fn, args: tuple, deadline_s: float, heavy: bool = False, left: threading.Event | None = None):
        """fn(*args) in a worker; its exception re-raised here. Deadline when it runs past `deadline_s` (waiting
        for a worker included) or `left` is set meanwhile (the client went away); OverMemory past the limit."""
        end = time.monotonic() + deadline_s
        if heavy and not self.heavy.acquire(timeout=0):
            raise Busy("the server's heavy slots (verify, sim evidence) are all in use")
        try:
            return self._call(fn, args, end, left)
        finally:
            if heavy:
                self.heavy.release()

    def _call(self, fn, args: tuple, end: float, left: threading.Event | None):
        w = self._take(end - time.monotonic())
        try:
            w.wait_ready(end)
            w.conn.send((fn, args))
            while not w.conn.poll(min(0.25, max(end - time.monotonic(), 0))):
                if time.monotonic() >= end or (left is not None and left.is_set()):
                    raise Deadline("the client left" if left is not None and left.is_set() else "deadline")
            kind, value = w.conn.recv()
        except (EOFError, OSError):  # the worker died: the memory limit's SIGKILL, or a crash
            self._replace(w)
            raise OverMemory(f"the planning worker ended (exit code {w.proc.returncode})") from None
        except BaseException:
            self._replace(w)
            raise
        if kind == "mem":
            self._replace(w)
            raise OverMemory("the call needed more memory than a planning worker may hold")
        self._idle.put(w)
        if kind == "err":
            raise value
        return value


async def offload(pool: Pool, disconnected, fn, args: tuple, deadline_s: float, heavy: bool = False):
    """Pool.run from the event loop: a thread waits on the worker while this polls `disconnected()` (the client
    went away: its worker is killed); cancelling this (the request's deadline) kills the worker too."""
    import anyio.to_thread

    left = threading.Event()
    task = asyncio.ensure_future(anyio.to_thread.run_sync(pool.run, fn, args, deadline_s, heavy, left))
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=0.5)
            if done:
                return task.result()
            if await disconnected():
                left.set()
    except asyncio.CancelledError:
        left.set()
        raise


def default_processes() -> int:
    """Two workers, or one on a single-core host."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(2, cores)


if __name__ == "__main__":
    main()
