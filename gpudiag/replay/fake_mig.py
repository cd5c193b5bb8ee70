"""The fake NVML's answers for MIG's layout (``nvidia-smi mig -lgip/-lgi/-lci``), from a GPU's recorded
``mig_profiles`` and ``mig_instances``.

Loaded on the first such call. As in NVML, profiles are asked by index and answer with their id; GPU and
compute instances come back as opaque handles written into the caller's ctypes array: here a pointer
whose address encodes the GPU's position and the instance ids (never dereferenced).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import pynvml

from gpudiag.model import Gpu, MigComputeInstance, MigGpuInstance, MigProfile
from gpudiag.replay.fake_answers import FakeHandle, fail, recorded

_GPU, _GI, _CI = 1 << 32, 1 << 16, 1  # an instance handle's address: (gpu + 1, gi + 1, ci + 1)


def _address(handle: Any) -> int:
    return int(ctypes.cast(handle, ctypes.c_void_p).value or 0)


class FakeMig:
    """MIG calls of a FakeNvml, which keeps the machine, the call log and the init state: it hands
    over how a call is entered, how a handle becomes its GPU, and its full GPU (a MIG device's
    handle refused)."""

    def __init__(
        self,
        enter: Callable[[str], None],
        gpu: Callable[[FakeHandle], Gpu],
        full_gpu: Callable[[FakeHandle], Gpu],
    ) -> None:
        self._enter = enter
        self._any_gpu = gpu
        self._full_gpu = full_gpu

    def _gpu(self, name: str, handle: FakeHandle) -> Gpu:
        self._enter(name)
        gpu = self._full_gpu(handle)
        if not gpu.mig_mode_current.get(False):
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)  # MIG is off: no instance can be asked for
        return gpu

    def _profile(self, gpu: Gpu, **match: int) -> MigProfile:
        profiles: tuple[MigProfile, ...] = recorded(gpu.mig_profiles)
        for profile in profiles:
            if all(getattr(profile, k) == v for k, v in match.items()):
                return profile
        fail(pynvml.NVML_ERROR_NOT_SUPPORTED)  # this GPU does not offer it

    def _instance(self, name: str, handle: Any) -> tuple[Gpu, MigGpuInstance, MigComputeInstance | None]:
        """The GPU, GPU instance and (for a compute instance's handle) compute instance a handle names."""
        self._enter(name)
        address = _address(handle)
        position, gi_id, ci_id = address // _GPU - 1, address % _GPU // _GI - 1, address % _GI - 1
        gpu = self._any_gpu(FakeHandle(position))
        for gi in recorded(gpu.mig_instances):
            if gi.id == gi_id:
                ci = next((c for c in gi.compute_instances if c.id == ci_id), None)
                if ci_id >= 0 and ci is None:
                    break
                return gpu, gi, ci
        fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    # -- GPU instances ---------------------------------------------------------------

    def nvmlDeviceGetGpuInstanceProfileInfo(self, handle: FakeHandle, profile: int, version: int = 2) -> Any:
        found = self._profile(self._gpu("nvmlDeviceGetGpuInstanceProfileInfoV", handle), index=profile)
        info = pynvml.c_nvmlGpuInstanceProfileInfo_v2_t()
        info.version = pynvml.nvmlGpuInstanceProfileInfo_v2
        info.id, info.isP2pSupported, info.sliceCount = found.id, int(found.p2p), found.slices
        info.instanceCount, info.multiprocessorCount = found.instances, found.sms
        info.copyEngineCount, info.decoderCount, info.encoderCount = found.copy_engines, found.decoders, found.encoders
        info.jpegCount, info.ofaCount, info.memorySizeMB = found.jpeg, found.ofa, found.memory_mib
        info.name = found.name.encode()
        return info

    nvmlDeviceGetGpuInstanceProfileInfoV = nvmlDeviceGetGpuInstanceProfileInfo

    def nvmlDeviceGetGpuInstanceRemainingCapacity(self, handle: FakeHandle, profile_id: int) -> int:
        found = self._profile(self._gpu("nvmlDeviceGetGpuInstanceRemainingCapacity", handle), id=profile_id)
        return int(recorded(found.remaining))

    def nvmlDeviceGetGpuInstances(self, handle: FakeHandle, profile_id: int, array: Any, count: Any) -> int:
        gpu = self._gpu("nvmlDeviceGetGpuInstances", handle)
        self._profile(gpu, id=profile_id)
        found = [gi for gi in recorded(gpu.mig_instances) if gi.profile_id == profile_id]
        for slot, gi in enumerate(found[: len(array)]):
            array[slot] = ctypes.cast((handle.gpu + 1) * _GPU + (gi.id + 1) * _GI, type(array[slot]))
        count._obj.value = min(len(found), len(array))
        return int(pynvml.NVML_SUCCESS)

    def nvmlGpuInstanceGetInfo(self, gi_handle: Any) -> Any:
        _gpu, gi, _ci = self._instance("nvmlGpuInstanceGetInfo", gi_handle)
        info = pynvml.c_nvmlGpuInstanceInfo_t()
        info.id, info.profileId = gi.id, gi.profile_id
        info.placement.start, info.placement.size = gi.placement_start, gi.placement_size
        return info

    # -- compute instances -----------------------------------------------------------

    def nvmlGpuInstanceGetComputeInstanceProfileInfo(
        self, gi_handle: Any, profile: int, engine_profile: int, version: int = 2
    ) -> Any:
        """A compute instance profile is answered where one of the GPU instance's compute instances
        uses it (its id is its index, as NVML numbers them)."""
        _gpu, gi, _ci = self._instance("nvmlGpuInstanceGetComputeInstanceProfileInfoV", gi_handle)
        users = [ci for ci in gi.compute_instances if ci.profile_id == profile]
        if not users:
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        info = pynvml.c_nvmlComputeInstanceProfileInfo_v2_t()
        info.version = pynvml.nvmlComputeInstanceProfileInfo_v2
        info.id, info.sliceCount, info.instanceCount = profile, users[0].placement_size, len(users)
        info.name = users[0].name.encode()
        return info

    nvmlGpuInstanceGetComputeInstanceProfileInfoV = nvmlGpuInstanceGetComputeInstanceProfileInfo

    def nvmlGpuInstanceGetComputeInstances(self, gi_handle: Any, profile_id: int, array: Any, count: Any) -> int:
        _gpu, gi, _ci = self._instance("nvmlGpuInstanceGetComputeInstances", gi_handle)
        base = _address(gi_handle)
        found = [ci for ci in gi.compute_instances if ci.profile_id == profile_id]
        for slot, ci in enumerate(found[: len(array)]):
            array[slot] = ctypes.cast(base + ci.id + 1, type(array[slot]))
        count._obj.value = min(len(found), len(array))
        return int(pynvml.NVML_SUCCESS)

    def nvmlComputeInstanceGetInfo(self, ci_handle: Any) -> Any:
        _gpu, _gi, ci = self._instance("nvmlComputeInstanceGetInfo_v2", ci_handle)
        if ci is None:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        info = pynvml.c_nvmlComputeInstanceInfo_t()
        info.id, info.profileId = ci.id, ci.profile_id
        info.placement.start, info.placement.size = ci.placement_start, ci.placement_size
        return info

    nvmlComputeInstanceGetInfo_v2 = nvmlComputeInstanceGetInfo
