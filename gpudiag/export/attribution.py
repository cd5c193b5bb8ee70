"""Who a GPU process belongs to: Kubernetes pod/namespace/container, or Slurm job.

Two sources, joined per process (not per device, so time-sliced and MIG-shared GPUs
attribute each process to its own owner):

* the kubelet's pod-resources API (:mod:`gpudiag.export.kubelet`): which container holds
  which GPU or MIG device, by the ids device plugins hand out (UUIDs from NVIDIA's plugin;
  ``nvidia<minor>``, ``nvidia<minor>/gi<id>`` from GKE's; plain NVML indices) or by the device
  names of NVIDIA's DRA driver (``gpu-<minor>``) in a container's dynamic resources;
* the process's own ``/proc/<pid>/cgroup`` (containerd, CRI-O, Docker, Slurm) and, where
  readable, its environment (``SLURM_JOB_ID``, ``HOSTNAME``, which Kubernetes sets to the pod
  name) and service-account namespace file.

Everything here is pure over its inputs or reads files under a configurable ``/proc`` root,
so tests run it on fake trees; an unreadable file is "unknown", never an error.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from gpudiag.model import Gpu, MigDevice

# Pod UIDs appear with dashes (cgroupfs driver) or underscores (systemd driver).
_POD = re.compile(
    r"(?:^|[/-])pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})(?:\.slice)?(?:/|$)"
)
_RUNTIMES = (
    ("containerd", re.compile(r"cri-containerd-([0-9a-f]{64})\.scope")),
    ("cri-o", re.compile(r"crio-(?:conmon-)?([0-9a-f]{64})\.scope")),
    ("docker", re.compile(r"docker-([0-9a-f]{64})\.scope|/docker/([0-9a-f]{64})")),
    ("cgroupfs", re.compile(r"/kubepods/(?:[a-z]+/)?pod[0-9a-f-]+/([0-9a-f]{64})")),
)
_SLURM_JOB = re.compile(r"/job_(\d+)(?:/|$)")
# A device id that names a GPU or MIG device by UUID (GPU-…, MIG-…, MIG-GPU-…/gi/ci), lower case.
_UUID_KEY = re.compile(r"^(?:mig-)?(?:gpu-)?[0-9a-f]{8}-[0-9a-f]{4}-")
# NVIDIA's DRA driver names a GPU gpu-<minor> and a MIG device gpu-<minor>-mig-<profile>-<id>-<start>.
NVIDIA_DRA_DRIVER = "gpu.nvidia.com"
_NVIDIA_DRA_DEVICE = re.compile(r"^gpu-(\d+)(?:-mig-.+)?$")
_SA_NAMESPACE = "var/run/secrets/kubernetes.io/serviceaccount/namespace"


@dataclass(frozen=True)
class Owner:
    """The labels a process's series carry; "" where unknown."""

    pod: str = ""
    namespace: str = ""
    container: str = ""
    slurm_job: str = ""


NOBODY = Owner()


@dataclass(frozen=True)
class CgroupFacts:
    """What a process's cgroup path says about it."""

    runtime: str = ""  # containerd, cri-o, docker, cgroupfs; "" outside a container
    container_id: str = ""
    pod_uid: str = ""  # with dashes
    slurm_job: str = ""


def parse_cgroup(text: str) -> CgroupFacts:
    """Facts from the contents of /proc/<pid>/cgroup (v1 or v2)."""
    runtime = container_id = pod_uid = slurm_job = ""
    for line in text.splitlines():
        path = line.split(":", 2)[-1]
        if not pod_uid and (m := _POD.search(path)):
            pod_uid = m.group(1).replace("_", "-")
        if not container_id:
            for name, pattern in _RUNTIMES:
                if m := pattern.search(path):
                    runtime, container_id = name, next(g for g in m.groups() if g)
                    break
        if not slurm_job and (m := _SLURM_JOB.search(path)):
            slurm_job = m.group(1)
    return CgroupFacts(runtime, container_id, pod_uid, slurm_job)


@dataclass(frozen=True)
class Allocation:
    """One container's devices, as the kubelet reports them."""

    namespace: str
    pod: str
    container: str
    resource: str  # e.g. nvidia.com/gpu, nvidia.com/mig-1g.10gb; a DRA driver's name (gpu.nvidia.com)
    device_ids: tuple[str, ...]  # a DRA claim's device names
    dra: bool = False  # from the container's dynamic resources (a DRA claim), not a device plugin


def device_key(device_id: str) -> str:
    """The GPU or MIG device an id names, in one spelling.

    The NVIDIA device plugin hands out ``GPU-<uuid>`` or ``MIG-<uuid>``, with ``::N`` appended
    for time-slicing replicas, and older plugins ``MIG-GPU-<uuid>/<gi>/<ci>`` for MIG devices;
    GKE's plugin ``nvidia<minor>``, ``nvidia<minor>/gi<id>`` and ``/vgpu<N>`` for time-sharing.
    """
    key = device_id.strip().split("::", 1)[0].lower()
    head, sep, tail = key.rpartition("/vgpu")
    return head if sep and tail.isdigit() else key


def dra_device_key(driver: str, device: str) -> str | None:
    """The key of a device a DRA claim names, or None for a driver whose names gpudiag cannot read.

    NVIDIA's DRA driver names devices after the GPU's minor number; a MIG device's name says its
    parent GPU (and its profile and placement, which NVML's MIG facts here do not), so it is
    attributed to that GPU, and a process's own pod name picks among several claimants.
    """
    if driver != NVIDIA_DRA_DRIVER or not (m := _NVIDIA_DRA_DEVICE.match(device.strip().lower())):
        return None
    return f"{NVIDIA_DRA_DRIVER}/gpu-{int(m.group(1))}"


def mig_legacy_key(parent_uuid: str, gpu_instance: int | None, compute_instance: int | None) -> str:
    """The old device plugin's id of a MIG device, ``MIG-GPU-<uuid>/<gi>/<ci>``, as a key."""
    return f"mig-{parent_uuid.lower()}/{gpu_instance}/{compute_instance}"


def gpu_keys(gpu: Gpu) -> tuple[str, ...]:
    """Every key a whole GPU may be allocated under, UUID first."""
    keys = []
    if uuid := gpu.uuid.get(""):
        keys.append(device_key(uuid))
    if (minor := gpu.minor_number.value) is not None:
        keys.append(f"nvidia{minor}")
    keys.append(str(gpu.index))
    if minor is not None:
        keys.append(f"{NVIDIA_DRA_DRIVER}/gpu-{minor}")
    return tuple(keys)


def mig_keys(gpu: Gpu, mig: MigDevice, compute_instance: int | None = None) -> tuple[str, ...]:
    """Every key a MIG device may be allocated under, UUID first (its parent GPU's not included)."""
    keys = []
    if uuid := mig.uuid.get(""):
        keys.append(device_key(uuid))
    gi = mig.gpu_instance_id.value
    ci = mig.compute_instance_id.value if compute_instance is None else compute_instance
    if (parent := gpu.uuid.get("")) and gi is not None:
        keys.append(mig_legacy_key(parent, gi, ci))
    if (minor := gpu.minor_number.value) is not None and gi is not None:
        keys.append(f"nvidia{minor}/gi{gi}")
    keys.append(f"{gpu.index}:{mig.index}")
    return tuple(keys)


def index_allocations(allocations: Iterable[Allocation]) -> dict[str, tuple[Allocation, ...]]:
    """Containers by device key; several for a time-sliced or shared device.

    A UUID is a UUID whatever the resource; an index or a device-node name is read as an NVIDIA
    GPU's only from a resource of the ``nvidia.com/`` domain (another plugin's device ``0`` is
    not GPU 0), and a DRA device name only from NVIDIA's DRA driver.
    """
    out: dict[str, list[Allocation]] = {}
    for alloc in allocations:
        nvidia = alloc.resource.startswith("nvidia.com/")
        for device_id in alloc.device_ids:
            if alloc.dra:
                found = dra_device_key(alloc.resource, device_id)
                if found is None:
                    continue
                key = found
            else:
                key = device_key(device_id)
                if not (nvidia or _UUID_KEY.match(key)):
                    continue
            holders = out.setdefault(key, [])
            if alloc not in holders:
                holders.append(alloc)
    return {key: tuple(holders) for key, holders in out.items()}


class ProcReader:
    """Reads what attribution needs about a PID under a /proc root (the host's, or a test tree)."""

    def __init__(self, root: Path = Path("/proc")) -> None:
        self.root = root

    def _read(self, pid: int, name: str, limit: int = 1 << 16) -> str | None:
        try:
            with open(self.root / str(pid) / name, "rb") as f:
                return f.read(limit).decode(errors="replace")
        except OSError:  # exited, or not ours to read
            return None

    def cgroup(self, pid: int) -> CgroupFacts | None:
        text = self._read(pid, "cgroup")
        return None if text is None else parse_cgroup(text)

    def environ(self, pid: int, names: tuple[str, ...]) -> dict[str, str]:
        text = self._read(pid, "environ", 1 << 20)
        if not text:
            return {}
        out = {}
        for item in text.split("\0"):
            key, sep, value = item.partition("=")
            if sep and key in names:
                out[key] = value
        return out

    def namespace(self, pid: int) -> str:
        """The pod's namespace from its service-account mount, seen through /proc/<pid>/root."""
        text = self._read(pid, f"root/{_SA_NAMESPACE}", 256)
        return text.strip() if text else ""


def owner(
    pid: int,
    device_keys: tuple[str, ...],
    allocations: Mapping[str, tuple[Allocation, ...]],
    proc: ProcReader | None,
) -> Owner:
    """The owner of one process running on the device named by ``device_keys`` (MIG keys first).

    The kubelet decides when one container holds the device. When several do (time slicing,
    MPS), the process's own pod name (``HOSTNAME``) picks among them. Without the kubelet
    the cgroup and the process's files give the pod and namespace (the container name is
    known only to the kubelet). A Slurm job comes from the cgroup path, else ``SLURM_JOB_ID``.
    """
    holders: tuple[Allocation, ...] = ()
    for key in device_keys:
        if key in allocations:
            holders = allocations[key]
            break
    facts = proc.cgroup(pid) if proc is not None else None
    env = proc.environ(pid, ("SLURM_JOB_ID", "HOSTNAME")) if proc is not None else {}
    slurm = (facts.slurm_job if facts else "") or env.get("SLURM_JOB_ID", "")
    if len(holders) == 1:
        a = holders[0]
        return Owner(a.pod, a.namespace, a.container, slurm)
    if len(holders) > 1:
        pod = env.get("HOSTNAME", "")
        mine = [a for a in holders if a.pod == pod]
        if len(mine) == 1:
            return Owner(mine[0].pod, mine[0].namespace, mine[0].container, slurm)
        if mine:
            return Owner(pod, mine[0].namespace, "", slurm)
        return Owner(slurm_job=slurm)  # shared, and the process does not say whose it is
    if facts is not None and facts.pod_uid and proc is not None:
        return Owner(env.get("HOSTNAME", ""), proc.namespace(pid), "", slurm)
    return Owner(slurm_job=slurm)
