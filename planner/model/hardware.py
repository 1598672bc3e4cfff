"""Resolve `--gpu` to a catalog GPU, or detect the local GPUs through NVML (nvidia-ml-py)."""

from __future__ import annotations

import re

from planner.config.spec import DEFAULT_HOST_RAM_GIB, DEFAULT_INTER_NODE_GBPS, GPU, MIB, MIN_INTER_NODE_GBPS, Hardware
from planner.errors import BadInput
from planner.model import catalog


def nvml_devices() -> list[tuple[str, int]]:
    """(NVML name, total bytes) of each local NVIDIA GPU, whatever its kind; BadInput where NVML or a
    driver is missing."""
    try:
        import pynvml
    except ImportError:
        raise BadInput("--gpu local needs nvidia-ml-py (pip install nvidia-ml-py)", "gpu") from None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        raise BadInput(
            f"--gpu local: no NVIDIA driver found (NVML: {e}); name a GPU from `planner gpus`", "gpu"
        ) from None
    try:
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(h)
            out.append((name.decode() if isinstance(name, bytes) else name, pynvml.nvmlDeviceGetMemoryInfo(h).total))
        return out
    finally:
        pynvml.nvmlShutdown()


def local_gpu_count() -> int:
    """How many NVIDIA GPUs this host has (catalog or not); 0 without NVML or a driver."""
    try:
        return len(nvml_devices())
    except BadInput:
        return 0


def detect_local() -> tuple[GPU, int]:
    """(GPU kind, count) of this host's NVIDIA GPUs, the kind matched in the catalog (device 0's);
    BadInput where NVML or a driver is missing, or the kind is not in the catalog."""
    devices = nvml_devices()
    if not devices:
        raise BadInput("--gpu local: NVML sees no GPU; name a GPU from `planner gpus`", "gpu")
    name, total = devices[0]
    return match_local(name, total), len(devices)


# NVML device names (lower case) -> catalog kind, most specific first: "gb200" before "b200", "h20-3e" before "h20",
# "l40s" before "l40" and "l4"; \b keeps "a40" out of "rtx a4000" and "t4" out of "rtx 4000"
NVML_NAMES = (
    (r"\bgb200", "gb200"),
    (r"\bb300", "b300"),
    (r"\bb200", "b200"),
    (r"\bgh200", "gh200"),
    (r"\bh200", "h200"),
    (r"\bh20-3e", "h20-141gb"),
    (r"\bh20\b", "h20"),
    (r"\bh800 pcie", "h800-pcie"),
    (r"\bh800", "h800"),
    (r"\bh100 nvl", "h100-nvl"),
    (r"\bh100 pcie", "h100-80gb-pcie"),
    (r"\bh100", "h100-80gb"),
    (r"\ba800.*pcie", "a800-80gb-pcie"),
    (r"\ba800", "a800-80gb"),
    (r"\ba10g\b", "a10g"),
    (r"\brtx pro 6000", "rtx-pro-6000"),
    (r"\brtx 6000 ada", "rtx-6000-ada"),
    (r"\brtx a6000", "rtx-a6000"),
    (r"\b5090\b", "rtx5090"),
    (r"\bl40s\b", "l40s"),
    (r"\bl40\b", "l40"),
    (r"\bl20\b", "l20"),
    (r"\bl4\b", "l4"),
    (r"\ba40\b", "a40"),
    (r"\bt4\b", "t4"),
    (r"\b4090\b", "rtx4090"),
    (r"\b3090\b", "rtx3090"),
    (r"\ba10\b", "a10"),
    (r"\bv100", "v100-32gb"),
)


def match_local(nvml_name: str, total_bytes: int) -> GPU:
    """The catalog entry for an NVML device name, with the device's own memory size."""
    n = nvml_name.lower()
    gib = total_bytes / 2**30
    if "a100" in n:  # one name, two memory sizes
        entry = ("a100-80gb" if gib > 50 else "a100-40gb") + ("-pcie" if "pcie" in n else "")
        return catalog.gpu(entry).model_copy(update={"memory_mib": total_bytes // MIB})
    for pattern, entry in NVML_NAMES:
        if re.search(pattern, n):
            return catalog.gpu(entry).model_copy(update={"memory_mib": total_bytes // MIB})
    raise BadInput(
        f"--gpu local: {nvml_name!r} is not in the GPU catalog; pass the closest of: "
        + ", ".join(g.name for g in catalog.gpus()),
        "gpu",
    )


def resolve(
    gpu: str,
    gpus_per_node: int | None,
    nodes: int,
    inter_node_gbps: float = DEFAULT_INTER_NODE_GBPS,
    host_ram_gib: float = DEFAULT_HOST_RAM_GIB,
) -> Hardware:
    for flag, v in (("--gpus-per-node", gpus_per_node), ("--nodes", nodes)):
        if v is not None and v < 1:
            raise BadInput(f"{flag} {v}: must be a positive integer", flag[2:].replace("-", "_"))
    if not inter_node_gbps >= MIN_INTER_NODE_GBPS:
        raise BadInput(
            f"--inter-node-gbps {inter_node_gbps}: must be at least {MIN_INTER_NODE_GBPS} (Gb/s)", "inter_node_gbps"
        )
    if not host_ram_gib > 0:
        raise BadInput(f"--host-ram-gb {host_ram_gib}: must be a positive number", "host_ram_gb")
    if gpu.strip().lower() == "local":
        kind, count = detect_local()
        gpus_per_node = gpus_per_node or count
    else:
        kind = catalog.gpu(gpu)
    return Hardware(
        gpu=kind,
        gpus_per_node=gpus_per_node or 1,
        nodes=nodes,
        inter_node_gbps=inter_node_gbps,
        host_ram_gib=host_ram_gib,
    )
