"""Attribution of GPU processes: cgroup trees of containerd, CRI-O, Docker and Slurm, and a fake
kubelet serving the official pod-resources API over a unix socket."""

from __future__ import annotations

import builtins
import sys
import tempfile
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import pytest

from gpudiag.export.attribution import (
    Allocation,
    Owner,
    ProcReader,
    device_key,
    index_allocations,
    owner,
    parse_cgroup,
)
from gpudiag.export.exporter import Attributor, Exporter
from gpudiag.memory.build import build
from gpudiag.replay.fixtures import load
from gpudiag.sources import open_source

POD_UID = "6f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f"
CID = "a" * 63 + "1"
CGROUPS = {
    "containerd-systemd": (
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{POD_UID.replace('-', '_')}.slice/"
        f"cri-containerd-{CID}.scope\n"
    ),
    "crio-systemd": (
        f"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{POD_UID.replace('-', '_')}.slice/"
        f"crio-{CID}.scope\n"
    ),
    "cgroupfs-v1": (
        f"12:memory:/kubepods/burstable/pod{POD_UID}/{CID}\n11:devices:/kubepods/burstable/pod{POD_UID}/{CID}\n"
    ),
    "docker": f"0::/system.slice/docker-{CID}.scope\n",
    "slurm-v2": "0::/system.slice/slurmstepd.scope/job_48213/step_0/user/task_0\n",
    "slurm-v1": (
        "7:devices:/slurm/uid_1000/job_48213/step_batch/task_0\n4:memory:/slurm/uid_1000/job_48213/step_batch\n"
    ),
    "host": "0::/user.slice/user-1000.slice/session-4.scope\n",
}


@pytest.mark.parametrize(
    ("tree", "runtime", "pod_uid", "job"),
    [
        ("containerd-systemd", "containerd", POD_UID, ""),
        ("crio-systemd", "cri-o", POD_UID, ""),
        ("cgroupfs-v1", "cgroupfs", POD_UID, ""),
        ("docker", "docker", "", ""),
        ("slurm-v2", "", "", "48213"),
        ("slurm-v1", "", "", "48213"),
        ("host", "", "", ""),
    ],
)
def test_cgroup_paths_name_runtime_pod_and_job(tree: str, runtime: str, pod_uid: str, job: str) -> None:
    facts = parse_cgroup(CGROUPS[tree])
    assert (facts.runtime, facts.pod_uid, facts.slurm_job) == (runtime, pod_uid, job)
    assert facts.container_id == (CID if runtime else "")


def fake_proc(root: Path, pid: int, cgroup: str, env: dict[str, str] | None = None, namespace: str = "") -> None:
    d = root / str(pid)
    d.mkdir(parents=True)
    (d / "cgroup").write_text(cgroup)
    if env is not None:
        (d / "environ").write_bytes(b"\0".join(f"{k}={v}".encode() for k, v in env.items()) + b"\0")
    if namespace:
        sa = d / "root/var/run/secrets/kubernetes.io/serviceaccount"
        sa.mkdir(parents=True)
        (sa / "namespace").write_text(namespace + "\n")


def test_device_ids_of_the_nvidia_device_plugin_share_one_key() -> None:
    assert device_key("GPU-8E1F2A6C-aaaa") == device_key("GPU-8e1f2a6c-AAAA::3") == "gpu-8e1f2a6c-aaaa"
    assert device_key("MIG-2e3f::0") == "mig-2e3f"


def test_slurm_job_from_cgroup_or_environment(tmp_path: Path) -> None:
    fake_proc(tmp_path, 10, CGROUPS["slurm-v2"])
    fake_proc(tmp_path, 11, CGROUPS["host"], env={"SLURM_JOB_ID": "777", "PATH": "/bin"})
    proc = ProcReader(tmp_path)
    assert owner(10, ("gpu-x",), {}, proc) == Owner(slurm_job="48213")
    assert owner(11, ("gpu-x",), {}, proc) == Owner(slurm_job="777")
    assert owner(12, ("gpu-x",), {}, proc) == Owner()  # vanished: no files, no labels, no error


def test_cgroup_fallback_without_kubelet_gives_pod_and_namespace(tmp_path: Path) -> None:
    fake_proc(tmp_path, 20, CGROUPS["containerd-systemd"], env={"HOSTNAME": "trainer-0"}, namespace="ml")
    fake_proc(tmp_path, 21, CGROUPS["crio-systemd"])  # environ unreadable: pod name unknown
    proc = ProcReader(tmp_path)
    assert owner(20, ("gpu-x",), {}, proc) == Owner(pod="trainer-0", namespace="ml")
    assert owner(21, ("gpu-x",), {}, proc) == Owner()


def test_time_sliced_gpu_attributes_each_process_to_its_own_pod(tmp_path: Path) -> None:
    shared = "GPU-8e1f2a6c-4b7d-4c1e-9a3f-1d0c5e7b3000"
    allocations = index_allocations(
        [
            Allocation("team-a", "notebook-a", "jupyter", "nvidia.com/gpu", (f"{shared}::0",)),
            Allocation("team-b", "notebook-b", "jupyter", "nvidia.com/gpu", (f"{shared}::1",)),
        ]
    )
    fake_proc(tmp_path, 30, CGROUPS["containerd-systemd"], env={"HOSTNAME": "notebook-b"})
    fake_proc(tmp_path, 31, CGROUPS["containerd-systemd"])  # cannot tell: no owner rather than a wrong one
    proc = ProcReader(tmp_path)
    key = (device_key(shared),)
    assert owner(30, key, allocations, proc) == Owner("notebook-b", "team-b", "jupyter")
    assert owner(31, key, allocations, proc) == Owner()


# --- the fake kubelet ------------------------------------------------------------------


# A DRA claim as the kubelet lists it in a container's dynamic resources: (driver, pool, device names).
Claim = tuple[str, str, list[str]]


class FakeKubelet:
    """The kubelet's PodResourcesLister on a unix socket, from the generated servicer.

    ``pods``: (namespace, name, [(container, resource, device ids)]); ``claims``: DRA claims by
    (namespace, pod, container).
    """

    def __init__(
        self,
        socket: Path,
        pods: list[tuple[str, str, list[tuple[str, str, list[str]]]]],
        claims: dict[tuple[str, str, str], list[Claim]] | None = None,
    ) -> None:
        import grpc

        from gpudiag.export.podresources import api_pb2, api_pb2_grpc

        self.pods = pods
        self.claims = claims or {}
        self.calls = 0
        fake = self

        def dynamic(namespace: str, pod: str, container: str) -> list[Any]:
            return [
                api_pb2.DynamicResource(
                    claim_name=f"{pod}-gpu",
                    claim_namespace=namespace,
                    claim_resources=[
                        api_pb2.ClaimResource(driver_name=driver, pool_name=pool, device_name=name) for name in names
                    ],
                )
                for driver, pool, names in fake.claims.get((namespace, pod, container), [])
            ]

        class Servicer(api_pb2_grpc.PodResourcesListerServicer):  # type: ignore[misc]
            def List(self, request: Any, context: Any) -> Any:
                fake.calls += 1
                return api_pb2.ListPodResourcesResponse(
                    pod_resources=[
                        api_pb2.PodResources(
                            name=name,
                            namespace=namespace,
                            containers=[
                                api_pb2.ContainerResources(
                                    name=container,
                                    devices=[api_pb2.ContainerDevices(resource_name=resource, device_ids=ids)]
                                    if ids
                                    else [],
                                    dynamic_resources=dynamic(namespace, name, container),
                                )
                                for container, resource, ids in containers
                            ],
                        )
                        for namespace, name, containers in fake.pods
                    ]
                )

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        api_pb2_grpc.add_PodResourcesListerServicer_to_server(Servicer(), self.server)
        self.server.add_insecure_port(f"unix:{socket}")
        self.server.start()

    def stop(self) -> None:
        self.server.stop(grace=None).wait()


@pytest.fixture
def kubelet_socket() -> Iterator[Path]:
    # A short path: unix socket paths are limited to about 100 bytes.
    with tempfile.TemporaryDirectory(prefix="kl") as tmp:
        yield Path(tmp) / "kubelet.sock"


A100 = "GPU-4d5e6f70-8192-a3b4-c5d6-e7f8091a2b3c"
MIG_3G = "MIG-8b5c2a1e-3f4d-5e6f-9a0b-1c2d3e4f5a6b"


def test_kubelet_attributes_mig_processes_by_mig_device(kubelet_socket: Path) -> None:
    pytest.importorskip("grpc")
    from gpudiag.export.kubelet import KubeletClient

    kubelet = FakeKubelet(
        kubelet_socket,
        [
            ("vision", "resnet-7f9c", [("train", "nvidia.com/mig-3g.20gb", [MIG_3G])]),
            # The old device plugin's spelling of a MIG device: MIG-GPU-<uuid>/<gi>/<ci>.
            ("nlp", "bert-2", [("serve", "nvidia.com/mig-2g.10gb", [f"MIG-{A100}/5/0"])]),
            ("idle", "no-gpu", [("app", "example.com/fpga", [])]),
        ],
    )
    client = KubeletClient(kubelet_socket)
    try:
        machine = load("a100-mig")[0]
        view = build(machine, {})
        owners = Attributor(None, client).owners(view)
        assert owners[(0, 20817)] == Owner("resnet-7f9c", "vision", "train")
        assert owners[(0, 20990)] == Owner("bert-2", "nlp", "serve")
        device_owners = Attributor(None, client).device_owners(machine)
        assert device_owners is not None and device_owners[MIG_3G.lower()] == Owner("resnet-7f9c", "vision", "train")
    finally:
        client.close()
        kubelet.stop()


def test_kubelet_answer_is_cached_and_its_owners_dropped_while_the_kubelet_is_away(kubelet_socket: Path) -> None:
    pytest.importorskip("grpc")
    from gpudiag.export.kubelet import KubeletClient

    gpu0 = "GPU-8e1f2a6c-4b7d-4c1e-9a3f-1d0c5e7b3000"
    kubelet = FakeKubelet(kubelet_socket, [("ml", "llm-0", [("trainer", "nvidia.com/gpu", [gpu0])])])
    now = [0.0]
    client = KubeletClient(kubelet_socket, cache_s=10, clock=lambda: now[0])
    try:
        first = client.allocations()
        assert [a.pod for a in first] == ["llm-0"]
        now[0] = 5
        assert client.allocations() is first and kubelet.calls == 1  # within the cache: not asked again
        with open_source("h100x8-training-64procs") as source:
            from tests.test_export_exporter import labels_of, pick, scrape

            for compat, series in (("native", "gpudiag_process_gpu_memory_bytes"), ("dcgm", "DCGM_FI_DEV_FB_USED")):
                now[0] += 20
                exporter = Exporter(source, compat=compat, attributor=Attributor(None, client))
                samples = scrape(exporter)
                assert pick(samples, "gpudiag_kubelet_up") == [1]
                assert {ls.get("pod", "") for ls in labels_of(samples, series) if ls["gpu"] == "0"} == {"llm-0"}
            kubelet.stop()
            now[0] += 20
            assert client.allocations() == []  # no answer: no owner, rather than the owner of before
            assert "kubelet pod-resources API" in client.last_error
            for compat, series in (("native", "gpudiag_process_gpu_memory_bytes"), ("dcgm", "DCGM_FI_DEV_FB_USED")):
                now[0] += 20
                exporter = Exporter(source, compat=compat, attributor=Attributor(None, client))
                samples = scrape(exporter)
                assert pick(samples, "gpudiag_kubelet_up") == [0]  # said, not hidden
                assert {ls.get("pod", "") for ls in labels_of(samples, series)} == {""}  # and the labels dropped
        kubelet = FakeKubelet(kubelet_socket, [("ml", "llm-1", [("trainer", "nvidia.com/gpu", [gpu0])])])
        now[0] += 20
        assert [a.pod for a in client.allocations()] == ["llm-1"]  # dialled again
        assert client.last_error == ""
    finally:
        client.close()
        kubelet.stop()


def test_without_grpc_the_kubelet_is_skipped_with_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpudiag.export import kubelet

    real_import = builtins.__import__

    def no_grpc(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "grpc" or name.startswith("grpc."):
            raise ImportError("No module named 'grpc'", name="grpc")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "grpc", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_grpc)
    with pytest.raises(kubelet.KubeletUnavailableError) as info:
        kubelet.KubeletClient(Path("/nonexistent.sock"))
    message = str(info.value)
    assert "\n" not in message
    assert "gpudiag[kubernetes]" in message and "cgroups" in message


def test_gke_and_index_device_ids_name_gpus_and_mig_devices_of_nvidia_resources_only() -> None:
    """GKE's plugin advertises nvidia<minor> (MIG nvidia<minor>/gi<id>, time-sharing /vgpu<n>); other
    plugins plain NVML indices, or <index>:<mig index>. A foreign resource's "0" is not GPU 0."""
    machine = load("a100-mig")[0]
    view = build(machine, {})
    gpu = machine.gpus[0]
    assert gpu.minor_number.value is not None
    minor = gpu.minor_number.value
    mig_3g = next(m for m in gpu.mig_devices if m.uuid.value == MIG_3G)
    gi = mig_3g.gpu_instance_id.value

    class Fixed:
        def __init__(self, allocations: list[Allocation]) -> None:
            self._allocations = allocations
            self.last_error = ""

        def allocations(self) -> list[Allocation]:
            return self._allocations

    cases = [
        ([Allocation("vision", "resnet", "train", "nvidia.com/gpu", (f"nvidia{minor}/gi{gi}",))], True),
        ([Allocation("vision", "resnet", "train", "nvidia.com/gpu", (f"nvidia{minor}/gi{gi}/vgpu2",))], True),
        ([Allocation("vision", "resnet", "train", "nvidia.com/gpu", (f"0:{mig_3g.index}",))], True),
        ([Allocation("vision", "resnet", "train", "example.com/fpga", (f"0:{mig_3g.index}",))], False),
    ]
    for allocations, attributed in cases:
        owners = Attributor(None, Fixed(allocations)).owners(view)
        expected = Owner("resnet", "vision", "train") if attributed else Owner()
        assert owners[(0, 20817)] == expected, allocations

    whole = [Allocation("ml", "llm", "trainer", "nvidia.com/gpu", (device,)) for device in (f"nvidia{minor}", "0")]
    for allocation in whole:
        device_owners = Attributor(None, Fixed([allocation])).device_owners(machine)
        assert device_owners is not None
        assert device_owners[gpu.uuid.get("").lower()] == Owner("llm", "ml", "trainer"), allocation
    foreign = Allocation("ml", "fpga-job", "app", "example.com/fpga", ("0",))
    assert Attributor(None, Fixed([foreign])).device_owners(machine) == {}


def test_dra_claims_of_nvidias_driver_are_attributed(kubelet_socket: Path) -> None:
    """NVIDIA's DRA driver names devices gpu-<minor> (MIG: gpu-<minor>-mig-…, attributed to the GPU);
    the kubelet lists them in the container's dynamic resources. Other drivers' names are not read."""
    pytest.importorskip("grpc")
    from gpudiag.export.kubelet import KubeletClient

    machine = load("h100x8-training-64procs")[0]
    minor = {g.index: g.minor_number.value for g in machine.gpus}
    kubelet = FakeKubelet(
        kubelet_socket,
        [("ml", "llm-0", [("trainer", "", [])]), ("ml", "vllm", [("server", "", [])]), ("x", "y", [("z", "", [])])],
        claims={
            ("ml", "llm-0", "trainer"): [("gpu.nvidia.com", "node-7", [f"gpu-{minor[0]}", f"gpu-{minor[1]}"])],
            ("ml", "vllm", "server"): [("gpu.nvidia.com", "node-7", [f"gpu-{minor[2]}-mig-1g10gb-19-0"])],
            ("x", "y", "z"): [("example.com/dra", "node-7", [f"gpu-{minor[3]}"])],
        },
    )
    client = KubeletClient(kubelet_socket)
    try:
        attributor = Attributor(None, client)
        owners = attributor.owners(build(machine, {}))
        by_gpu = {gpu: who for (gpu, _), who in owners.items()}
        assert by_gpu[0] == by_gpu[1] == Owner("llm-0", "ml", "trainer")
        assert by_gpu[2] == Owner("vllm", "ml", "server")
        assert by_gpu[3] == Owner()  # another driver's device names mean nothing here
        device_owners = attributor.device_owners(machine)
        assert device_owners is not None
        assert device_owners[machine.gpus[0].uuid.get("").lower()] == Owner("llm-0", "ml", "trainer")
    finally:
        client.close()
        kubelet.stop()


def test_device_keys_spell_every_plugins_ids_one_way() -> None:
    from gpudiag.export.attribution import dra_device_key

    assert device_key("nvidia3/vgpu7") == "nvidia3" and device_key("nvidia3/gi5") == "nvidia3/gi5"
    assert device_key("nvidia3/vgpux") == "nvidia3/vgpux"  # not a replica suffix: kept as it is
    assert dra_device_key("gpu.nvidia.com", "gpu-12") == "gpu.nvidia.com/gpu-12"
    assert dra_device_key("gpu.nvidia.com", "gpu-0-mig-1g10gb-19-0") == "gpu.nvidia.com/gpu-0"
    assert dra_device_key("gpu.nvidia.com", "channel-0") is None
    assert dra_device_key("example.com/dra", "gpu-0") is None
