"""The kubelet's pod-resources API (``v1.PodResourcesLister/List``): which container holds which device.

A container's devices come from device plugins (``devices``) and from DRA claims
(``dynamic_resources``: the claim's driver, pool and device name; the kubelet fills it when its
``KubeletPodResourcesDynamicResources`` feature gate is on, the default since Kubernetes 1.34).

grpcio and protobuf are an optional extra (``gpudiag[kubernetes]``), imported only when a
kubelet socket is used. The client keeps one channel and caches the answer for a few
seconds: pods come and go on a scale of seconds, scrapes come every few. When the kubelet does
not answer, the client answers with no allocations (and says why in ``last_error``): an owner
it can no longer confirm is no owner, never the one from before the outage.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpudiag.export.attribution import Allocation

DEFAULT_SOCKET = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
CACHE_SECONDS = 10.0
CALL_TIMEOUT_S = 2.0
MAX_MESSAGE_BYTES = 16 * 1024 * 1024  # the kubelet's own limit for this API


class KubeletUnavailableError(Exception):
    """The kubelet cannot be asked; the message is one line for the user."""


def _modules() -> tuple[Any, Any, Any]:
    try:
        import grpc

        from gpudiag.export.podresources import api_pb2, api_pb2_grpc
    except ImportError as exc:
        raise KubeletUnavailableError(
            f"kubelet pod-resources API not used: {exc.name or 'grpcio/protobuf'} is not installed "
            "(pip install 'gpudiag[kubernetes]'); attributing processes by their cgroups only"
        ) from None
    return grpc, api_pb2, api_pb2_grpc


def allocations_from(response: Any) -> list[Allocation]:
    """Containers holding devices, from a ``ListPodResourcesResponse``: device-plugin devices and
    DRA claims (one allocation per claim and driver, its device names as ids)."""
    out = []
    for pod in response.pod_resources:
        for container in pod.containers:
            for devices in container.devices:
                if devices.device_ids:
                    out.append(
                        Allocation(
                            namespace=pod.namespace,
                            pod=pod.name,
                            container=container.name,
                            resource=devices.resource_name,
                            device_ids=tuple(devices.device_ids),
                        )
                    )
            for claim in container.dynamic_resources:
                by_driver: dict[str, list[str]] = {}
                for resource in claim.claim_resources:
                    if resource.device_name:
                        by_driver.setdefault(resource.driver_name, []).append(resource.device_name)
                for driver, names in by_driver.items():
                    out.append(Allocation(pod.namespace, pod.name, container.name, driver, tuple(names), dra=True))
    return out


class KubeletClient:
    """Lists pod resources over the kubelet's unix socket, cached for ``cache_s`` seconds."""

    def __init__(
        self,
        socket: Path = DEFAULT_SOCKET,
        cache_s: float = CACHE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._grpc, self._pb2, self._pb2_grpc = _modules()
        self.socket = socket
        self._cache_s = cache_s
        self._clock = clock
        self._channel: Any = None
        self._stub: Any = None
        self._cached: list[Allocation] = []
        self._fetched_at: float | None = None
        self.last_error = ""

    def _connect(self) -> None:
        options = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]
        self._channel = self._grpc.insecure_channel(f"unix://{self.socket}", options=options)
        self._stub = self._pb2_grpc.PodResourcesListerStub(self._channel)

    def allocations(self) -> list[Allocation]:
        """The current allocations; none while the kubelet does not answer (``last_error`` says why)."""
        now = self._clock()
        if self._fetched_at is not None and now - self._fetched_at < self._cache_s:
            return self._cached
        self._fetched_at = now  # also after a failure: retry at the same pace, not every scrape
        if self._stub is None:
            self._connect()
        try:
            response = self._stub.List(self._pb2.ListPodResourcesRequest(), timeout=CALL_TIMEOUT_S)
        except self._grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            self.last_error = f"kubelet pod-resources API at {self.socket}: {getattr(code, 'name', code)}"
            self.close()  # a restarted kubelet makes a new socket: dial again next time
            self._cached = []  # stale owners would be wrong owners: drop them, gpudiag_kubelet_up says so
            return self._cached
        self.last_error = ""
        self._cached = allocations_from(response)
        return self._cached

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
        self._channel = self._stub = None
