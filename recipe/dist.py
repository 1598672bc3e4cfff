"""Distributed launch helpers the probes and the bundled trainer share: a free local port for torchrun's
rendezvous, DeepSpeed's init on CPU, a DeepSpeed config for a client optimizer, and the exit of a rank."""

from __future__ import annotations

import logging
import os
import random
import socket
import sys
from typing import NoReturn

FIRST_PORT = 20_000  # above `ray start`'s default worker ports (10002-19999: ray 2.55.0 scripts/scripts.py:406-418)


def _ephemeral_low(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> int:
    """The lowest port the kernel hands out for outgoing connections (Linux's default range is 32768-60999)."""
    try:
        return int(open(path).read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(tries: int = 64) -> int:
    """A local port free now for torchrun's rendezvous, drawn between Ray's worker ports and the kernel's ephemeral
    range. A port from bind(0) lies inside that range, where the gloo connections of ranks running beside it take
    their own ports: CI's run at stop 79 lost a torchrun to EADDRINUSE that way. Below 20000 lie Ray's default worker
    ports (10002-19999, `ray start --min-worker-port/--max-worker-port`), which Ray refuses to share with a port it is
    given. Falls back to bind(0)."""
    low = max(_ephemeral_low(), FIRST_PORT + 1)
    rng = random.SystemRandom()
    for _ in range(tries):
        port = rng.randrange(FIRST_PORT, low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def client_optimizer_config(ds_config: dict) -> dict:
    """A DeepSpeed config to run with a client torch optimizer (the probe's and the trainer's): its
    optimizer block dropped (DeepSpeed's FusedAdam is compiled at run time on CPU), untested
    optimizers allowed, no periodic prints."""
    cfg = {k: v for k, v in ds_config.items() if k != "optimizer"}
    cfg.update(zero_allow_untested_optimizer=True, steps_per_print=10**9)
    return cfg


def no_shm_collectives() -> None:
    """DeepSpeed on CPU without its shared-memory collectives, another run-time build (1-3 minutes of both
    cores of a 2-core machine, again for every venv: its build folder is shared): gloo carries everything.
    Before DeepSpeed's backend starts (deepspeed.init_distributed, or accelerate's for TRL)."""
    import deepspeed

    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False


def init_deepspeed(backend: str, cpu: bool) -> None:
    """deepspeed.init_distributed; on CPU without the shared-memory collectives (no_shm_collectives)."""
    import deepspeed

    if cpu:
        no_shm_collectives()
    deepspeed.init_distributed(dist_backend=backend)


def exit_rank(code: int) -> NoReturn:
    """End a torchrun rank once its work is written: streams and logs flushed, then os._exit, skipping
    the interpreter's finalization and C++ static destructors. CI saw a rank that had finished ("done: 7
    steps") abort in that teardown ("terminate called without an active exception", SIGABRT), so the run
    was reported failed. Two known ways lead there, and os._exit avoids both: a gloo worker thread
    dropping a collective's tensor while CPython 3.11 finalizes (its GIL request ends the thread with
    pthread_exit, whose unwinding through a noexcept destructor calls std::terminate; CPython gh-87135,
    pytorch/pytorch#179291), and a static object's std::thread destroyed while still joinable."""
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(code)
