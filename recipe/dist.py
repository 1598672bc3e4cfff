"""Distributed launch helpers the probes and the bundled trainer share: a free local port for torchrun's
rendezvous, DeepSpeed's init on CPU, and a DeepSpeed config for a client optimizer."""

from __future__ import annotations

import socket


def free_port() -> int:
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


def init_deepspeed(backend: str, cpu: bool) -> None:
    """deepspeed.init_distributed; on CPU without the shared-memory collectives (another run-time
    build): gloo carries everything."""
    import deepspeed

    if cpu:
        deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    deepspeed.init_distributed(dist_backend=backend)
