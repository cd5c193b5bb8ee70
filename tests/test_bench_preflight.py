"""Before torch starts: why CUDA cannot work, and how NVML's GPUs line up with torch's devices."""

from __future__ import annotations

from dataclasses import replace

from gpudiag.bench.preflight import match_gpu, numa_maps, nvml_reason, pci_key, torch_reason, uuid_key
from gpudiag.model import Reading, Reason, TorchBuild
from gpudiag.replay.fixtures import load


def test_torch_reasons() -> None:
    assert (
        torch_reason(Reading.missing(Reason.NOT_FOUND, "")) == "torch is not installed (pip install 'gpudiag[torch]')"
    )
    assert torch_reason(Reading.missing(Reason.UNKNOWN_ERROR, "unreadable version.py")) == ""  # the child will say
    assert (
        torch_reason(Reading.of(TorchBuild("2.13.0+cpu", None, None, "/x"))) == "torch 2.13.0+cpu is a CPU-only build"
    )
    assert torch_reason(Reading.of(TorchBuild("2.5.1+cu124", "12.4", None, "/x"))) == ""


def test_nvml_reasons_come_from_the_machine() -> None:
    assert nvml_reason(load("h100x8-healthy")[0]) == ""
    assert nvml_reason(load("zero-gpus")[0]) == "the NVIDIA driver sees no GPU"
    assert nvml_reason(load("no-permission")[0]) == load("no-permission")[0].nvml.detail != ""


def test_keys_and_matching() -> None:
    assert uuid_key(" GPU-ABC ") == "abc" and uuid_key("abc") == "abc"
    assert pci_key("00000000:B1:00.0") == pci_key("0000:b1:00.0") == "0000:b1:00.0"
    assert pci_key("b1:00.0") == "b1:00.0"  # not a full address: left as it is
    gpus = load("a100x2-pcie-one-at-x8")[0].gpus
    assert match_gpu("5A8C2D41-9E7B-4F3A-8C1D-6B0E2F4A9101", None, gpus) is gpus[1]
    assert match_gpu("", "0000:b1:00.0", gpus) is gpus[1]  # a torch without UUIDs: by PCI address
    assert match_gpu("unknown", None, gpus) is None


def test_numa_nodes_come_from_the_pci_device_not_nvml() -> None:
    """NVML's NUMA id is the GPU memory's own node (coherent systems only): never the pinning node."""
    gpus = load("a100x2-pcie-one-at-x8")[0].gpus
    sockets = {"00000000:17:00.0": 0, "00000000:B1:00.0": 1}
    by_uuid, by_pci = numa_maps(gpus, sockets.get)
    assert by_uuid == {"5a8c2d41-9e7b-4f3a-8c1d-6b0e2f4a9100": 0, "5a8c2d41-9e7b-4f3a-8c1d-6b0e2f4a9101": 1}
    assert by_pci == {"0000:17:00.0": 0, "0000:b1:00.0": 1}
    coherent = tuple(replace(g, numa_node=Reading.of(2 + g.index)) for g in gpus)  # GPU memory's own nodes
    assert numa_maps(coherent, sockets.get) == (by_uuid, by_pci)
    assert set(numa_maps(gpus, lambda bus: -1)[0].values()) == {None}  # sysfs: no NUMA information
