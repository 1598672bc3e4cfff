"""--gpu resolution: catalog names, NVML device names, and refusals."""

import pytest

from planner.errors import BadInput
from planner.model import hardware


@pytest.mark.parametrize(
    "nvml_name,gib,expected",
    [
        ("NVIDIA A100-SXM4-80GB", 80, "a100-80gb"),
        ("NVIDIA A100-SXM4-40GB", 40, "a100-40gb"),
        ("NVIDIA A100-PCIE-40GB", 40, "a100-40gb-pcie"),
        ("NVIDIA H100 80GB HBM3", 79.6, "h100-80gb"),
        ("NVIDIA H100 PCIe", 79.6, "h100-80gb-pcie"),
        ("NVIDIA H200", 140, "h200"),
        ("NVIDIA H20", 95.6, "h20"),
        ("NVIDIA GeForce RTX 4090", 24, "rtx4090"),
        ("NVIDIA L40S", 45, "l40s"),
        ("Tesla V100-SXM2-32GB", 32, "v100-32gb"),
        ("NVIDIA B200", 179, "b200"),
        ("NVIDIA GH200 480GB", 95.6, "gh200"),
        ("NVIDIA H100 NVL", 93.6, "h100-nvl"),
        ("NVIDIA L4", 22.5, "l4"),
        ("NVIDIA A10G", 22.5, "a10g"),
        ("NVIDIA RTX A6000", 48, "rtx-a6000"),
        ("NVIDIA GeForce RTX 5090", 31.8, "rtx5090"),
        ("NVIDIA A10", 22.5, "a10"),
        ("NVIDIA A100 80GB PCIe", 80, "a100-80gb-pcie"),
        ("NVIDIA A800-SXM4-80GB", 80, "a800-80gb"),
        ("NVIDIA A800 80GB PCIe", 80, "a800-80gb-pcie"),
        ("NVIDIA H800", 79.6, "h800"),
        ("NVIDIA H800 PCIe", 79.6, "h800-pcie"),
        ("NVIDIA H20-3e", 140.4, "h20-141gb"),
        ("NVIDIA L20", 45, "l20"),
        ("NVIDIA L40", 45, "l40"),
        ("NVIDIA A40", 45, "a40"),
        ("Tesla T4", 15, "t4"),
        ("NVIDIA RTX 6000 Ada Generation", 48, "rtx-6000-ada"),
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", 95.6, "rtx-pro-6000"),
        ("NVIDIA B300 SXM6 AC", 268.6, "b300"),
        ("NVIDIA GB200", 185, "gb200"),
    ],
)
def test_nvml_names_map_to_catalog_with_measured_memory(nvml_name, gib, expected):
    total = int(gib * 2**30)
    g = hardware.match_local(nvml_name, total)
    assert g.name == expected and g.capacity_bytes == total // 2**20 * 2**20


def test_unknown_local_gpu_is_refused_with_the_catalog():
    with pytest.raises(BadInput, match="not in the GPU catalog; pass the closest of: a100-40gb"):
        hardware.match_local("Tesla P100-PCIE-16GB", 16 * 2**30)


def test_local_gpus_through_nvml(monkeypatch):
    """A catalog kind resolves with the device's own memory; a kind outside the catalog still counts as a
    local GPU (probe slots, cuda probes) but cannot be planned for without naming a catalog GPU."""
    from tests.conftest import fake_nvml

    fake_nvml(monkeypatch, [("NVIDIA H100 80GB HBM3", 85_520_809_984)] * 4)
    gpu, count = hardware.detect_local()
    assert (gpu.name, count, gpu.capacity_bytes) == ("h100-80gb", 4, 85_520_809_984 // 2**20 * 2**20)
    assert hardware.resolve("local", None, 1).gpus_per_node == 4
    fake_nvml(monkeypatch, [("Tesla P100-PCIE-16GB", 17_071_734_784)] * 8)
    assert hardware.local_gpu_count() == 8
    with pytest.raises(BadInput, match="'Tesla P100-PCIE-16GB' is not in the GPU catalog"):
        hardware.detect_local()
    fake_nvml(monkeypatch, [])
    assert hardware.local_gpu_count() == 0
    with pytest.raises(BadInput, match="NVML sees no GPU"):
        hardware.detect_local()


def test_world_size_and_bad_counts():
    assert hardware.resolve("h20", 6, 2).world_size == 12
    with pytest.raises(BadInput, match="--host-ram-gb -1"):
        hardware.resolve("h20", 1, 1, host_ram_gib=-1)


def test_inter_node_bandwidth_has_a_floor():
    """A denormal bandwidth (5e-324 Gb/s, found by schemathesis) underflowed to zero in the step-time
    model and crashed the planner: it is refused as bad input instead."""
    import pytest

    from planner.config.spec import MIN_INTER_NODE_GBPS
    from planner.errors import BadInput
    from planner.model.hardware import resolve

    with pytest.raises(BadInput, match="--inter-node-gbps 5e-324: must be at least 0.001"):
        resolve("h100", 8, 2, inter_node_gbps=5e-324)
    assert resolve("h100", 8, 2, inter_node_gbps=MIN_INTER_NODE_GBPS).inter_node_gbps == MIN_INTER_NODE_GBPS


def test_an_ambiguous_gpu_name_is_one_line_exit_2_not_a_guess(capsys):
    """Issue 30: `--gpu a100` silently planned for the 40 GB card; the full names still resolve."""
    from planner.cli import main

    base = ["check", "--model", "gpt2", "--micro-batch", "1", "--seq-len", "128", "--evidence", "analytic"]
    assert main([*base, "--gpu", "a100"]) == 2
    assert capsys.readouterr().err == (
        "planner: error: --gpu 'a100' is ambiguous: a100-40gb (40 GiB) or a100-80gb (80 GiB)\n"
    )
    assert main([*base, "--gpu", "h100-sxm-80gb"]) == 2
    assert "did you mean h100-80gb (80 GiB)?" in capsys.readouterr().err
    assert hardware.resolve("a100-80gb", 8, 1).gpu.memory_mib == 81920
    assert hardware.resolve("h100", 8, 1).gpu.name == "h100-80gb"  # h100 is one kind: the SXM card


@pytest.mark.parametrize("nvml_name", ["NVIDIA RTX A4000", "NVIDIA RTX 4000 Ada Generation"])
def test_a_name_inside_another_is_not_matched(nvml_name):
    """a40 is in 'rtx a4000', t4 and l4 in nothing else: each catalog key matches whole words only."""
    with pytest.raises(BadInput, match="not in the GPU catalog"):
        hardware.match_local(nvml_name, 16 * 2**30)
