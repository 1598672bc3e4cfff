"""Resolve `--gpu` to a catalog GPU, or detect the local GPUs through NVML (nvidia-ml-py)."""

from __future__ import annotations

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


def match_local(nvml_name: str, total_bytes: int) -> GPU:
    """The catalog entry for an NVML device name, with the device's own memory size."""
    n = nvml_name.lower()
    gib = total_bytes / 2**30
    keys = [
        ("b200", "b200"),
        ("gh200", "gh200"),
        ("h200", "h200"),
        ("h20", "h20"),
        ("h100 nvl", "h100-nvl"),
        ("h100 pcie", "h100-80gb-pcie"),
        ("h100", "h100-80gb"),
        ("a10g", "a10g"),
        ("rtx a6000", "rtx-a6000"),
        ("5090", "rtx5090"),
        ("l40s", "l40s"),
        ("l4", "l4"),
        ("a100-pcie", "a100-80gb-pcie" if gib > 50 else "a100-40gb-pcie"),
        ("a100", "a100-80gb" if gib > 50 else "a100-40gb"),
        ("4090", "rtx4090"),
        ("3090", "rtx3090"),
        ("a10", "a10"),
        ("v100", "v100-32gb"),
    ]
    for key, entry in keys:
        if key in n:
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
