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

from gpudiag import memory
from gpudiag.fleet.attribution import (
    Allocation,
    Owner,
    ProcReader,
    device_key,
    index_allocations,
    owner,
    parse_cgroup,
)
from gpudiag.fleet.exporter import Attributor, Exporter
from gpudiag.probe.collect import open_source
from gpudiag.replay.fixtures import load

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


class FakeKubelet:
    """The kubelet's PodResourcesLister on a unix socket, from the generated servicer."""

    def __init__(self, socket: Path, pods: list[tuple[str, str, list[tuple[str, str, list[str]]]]]) -> None:
        import grpc

        from gpudiag.fleet.podresources import api_pb2, api_pb2_grpc

        self.pods = pods
        self.calls = 0
        fake = self

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
                                    devices=[api_pb2.ContainerDevices(resource_name=resource, device_ids=ids)],
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
    from gpudiag.fleet.kubelet import KubeletClient

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
        view = memory.build(machine, {})
        owners = Attributor(None, client).owners(view)
        assert owners[(0, 20817)] == Owner("resnet-7f9c", "vision", "train")
        assert owners[(0, 20990)] == Owner("bert-2", "nlp", "serve")
        device_owners = Attributor(None, client).device_owners()
        assert device_owners is not None and device_owners[MIG_3G.lower()] == Owner("resnet-7f9c", "vision", "train")
    finally:
        client.close()
        kubelet.stop()


def test_kubelet_answer_is_cached_and_survives_the_kubelet_going_away(kubelet_socket: Path) -> None:
    pytest.importorskip("grpc")
    from gpudiag.fleet.kubelet import KubeletClient

    gpu0 = "GPU-8e1f2a6c-4b7d-4c1e-9a3f-1d0c5e7b3000"
    kubelet = FakeKubelet(kubelet_socket, [("ml", "llm-0", [("trainer", "nvidia.com/gpu", [gpu0])])])
    now = [0.0]
    client = KubeletClient(kubelet_socket, cache_s=10, clock=lambda: now[0])
    try:
        first = client.allocations()
        assert [a.pod for a in first] == ["llm-0"]
        now[0] = 5
        assert client.allocations() is first and kubelet.calls == 1  # within the cache: not asked again
        kubelet.stop()
        now[0] = 20
        assert client.allocations() == first  # the last answer, while the kubelet restarts
        assert "kubelet pod-resources API" in client.last_error
        with open_source("h100x8-training-64procs") as source:
            from tests.test_fleet_exporter import pick, scrape

            exporter = Exporter(source, attributor=Attributor(None, client))
            assert pick(scrape(exporter), "gpudiag_kubelet_up") == [0]  # said, not hidden
        kubelet = FakeKubelet(kubelet_socket, [("ml", "llm-1", [("trainer", "nvidia.com/gpu", [gpu0])])])
        now[0] = 40
        assert [a.pod for a in client.allocations()] == ["llm-1"]  # dialled again
        assert client.last_error == ""
    finally:
        client.close()
        kubelet.stop()


def test_without_grpc_the_kubelet_is_skipped_with_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpudiag.fleet import kubelet

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
