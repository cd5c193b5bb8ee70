"""MIG's layout through an open NVML session: the GPU instance profiles with the room left for each
(`nvidia-smi mig -lgip`), the GPU instances (`-lgi`) and the compute instances in each (`-lci`).

Imported by the session's composite readers (``mig_profiles``, ``mig_instances``) only for a GPU whose
MIG mode is on. NVML answers by profile *index* (``NVML_GPU_INSTANCE_PROFILE_1_SLICE`` is 0) with the
profile's *id* (19 for the A100's 1g.5gb); an index the GPU does not offer answers NOT_SUPPORTED (or
INVALID_ARGUMENT on older drivers), which is not an error here. Instances come back as opaque handles in
arrays the caller passes (``nvmlDeviceGetGpuInstances(device, profileId, array, count)``). Calls are
made by the name of the C entry point pynvml reaches (``…ProfileInfoV``, ``nvmlComputeInstanceGetInfo_v2``),
so a failure or a driver that lacks one names the function NVML was really asked for.
"""

from __future__ import annotations

import ctypes
from typing import Any, Protocol

from gpudiag.model import MigComputeInstance, MigGpuInstance, MigProfile, Reading, Reason
from gpudiag.readings import text


class Session(Protocol):
    """What this needs of probe.nvml.NvmlSession: a call's errors as reasons, a lost GPU ends the read."""

    @property
    def lib(self) -> Any: ...

    def read(self, function: str, *args: Any, convert: Any = None) -> Reading[Any]: ...


def _offered(answer: Reading[Any]) -> bool | None:
    """True: the profile is there; False: the GPU does not offer it; None: the call failed (why: answer)."""
    if answer.value is not None:
        return True
    if answer.reason is Reason.NOT_SUPPORTED or "Invalid Argument" in answer.detail:
        return False
    return None


def _gpu_profile(info: Any) -> dict[str, Any]:
    """nvmlGpuInstanceProfileInfo_v2_t, decoded (inside the call's guard)."""
    return {
        "id": int(info.id),
        "name": text(info.name),
        "slices": int(info.sliceCount),
        "instances": int(info.instanceCount),
        "memory_mib": int(info.memorySizeMB),
        "p2p": bool(info.isP2pSupported),
        "sms": int(info.multiprocessorCount),
        "copy_engines": int(info.copyEngineCount),
        "decoders": int(info.decoderCount),
        "encoders": int(info.encoderCount),
        "jpeg": int(info.jpegCount),
        "ofa": int(info.ofaCount),
    }


def _placement(info: Any) -> tuple[int, int, int, int]:
    """A GPU or compute instance's info: (id, profile id, placement start, placement size)."""
    return int(info.id), int(info.profileId), int(info.placement.start), int(info.placement.size)


def _profile_infos(session: Session, h: Any) -> Reading[list[tuple[int, dict[str, Any]]]]:
    lib = session.lib
    found: list[tuple[int, dict[str, Any]]] = []
    for index in range(int(lib.NVML_GPU_INSTANCE_PROFILE_COUNT)):
        answer = session.read("nvmlDeviceGetGpuInstanceProfileInfoV", h, index, convert=_gpu_profile)
        offered = _offered(answer)
        if offered is None:
            return Reading.missing_like(answer)
        info: dict[str, Any] | None = answer.value
        if offered and info is not None and info["instances"] > 0:
            found.append((index, info))
    return Reading.of(found)


def profiles(session: Session, h: Any) -> Reading[tuple[MigProfile, ...]]:
    """Every GPU instance profile the GPU offers, in NVML's index order (as `mig -lgip` lists them)."""
    infos = _profile_infos(session, h)
    if infos.value is None:
        return Reading.missing_like(infos)
    out = []
    for index, info in infos.value:
        remaining = session.read("nvmlDeviceGetGpuInstanceRemainingCapacity", h, info["id"], convert=int)
        out.append(MigProfile(index=index, remaining=remaining, **info))
    return Reading.of(tuple(out))


def instances(session: Session, h: Any) -> Reading[tuple[MigGpuInstance, ...]]:
    """The GPU instances created, each with its compute instances, in GPU instance id order."""
    lib = session.lib
    infos = _profile_infos(session, h)
    if infos.value is None:
        return Reading.missing_like(infos)
    out = []
    for _index, profile in infos.value:
        handles = _instances(
            session,
            "nvmlDeviceGetGpuInstances",
            lib.c_nvmlGpuInstance_t,
            h,
            profile["id"],
            profile["instances"],
        )
        if handles.value is None:
            return Reading.missing_like(handles)
        for gi in handles.value:
            info = session.read("nvmlGpuInstanceGetInfo", gi, convert=_placement)
            if info.value is None:
                return Reading.missing_like(info)
            cis = _compute_instances(session, gi)
            if cis.value is None:
                return Reading.missing_like(cis)
            gi_id, profile_id, start, size = info.value
            out.append(
                MigGpuInstance(
                    id=gi_id,
                    profile_id=profile_id,
                    placement_start=start,
                    placement_size=size,
                    compute_instances=cis.value,
                )
            )
    return Reading.of(tuple(sorted(out, key=lambda gi: gi.id)))


def _instances(
    session: Session, function: str, kind: Any, owner: Any, profile_id: int, most: int
) -> Reading[list[Any]]:
    """The instance handles of one profile: NVML fills an array of ``most`` and says how many it wrote."""
    array = (kind * max(1, most))()
    count = ctypes.c_uint(0)
    answer = session.read(function, owner, profile_id, array, ctypes.byref(count))
    if answer.value is None and answer.reason is not Reason.NOT_FOUND:
        return Reading.missing_like(answer)
    return Reading.of([array[i] for i in range(min(count.value, len(array)))])


def _compute_instances(session: Session, gi: Any) -> Reading[tuple[MigComputeInstance, ...]]:
    lib = session.lib
    out = []
    for index in range(int(lib.NVML_COMPUTE_INSTANCE_PROFILE_COUNT)):
        answer = session.read(
            "nvmlGpuInstanceGetComputeInstanceProfileInfoV",
            gi,
            index,
            lib.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
            convert=lambda p: (int(p.id), int(p.instanceCount), text(p.name)),
        )
        offered = _offered(answer)
        if offered is None:
            return Reading.missing_like(answer)
        shape: tuple[int, int, str] | None = answer.value
        if not offered or shape is None or shape[1] == 0:
            continue
        profile_id, count, name = shape
        handles = _instances(
            session, "nvmlGpuInstanceGetComputeInstances", lib.c_nvmlComputeInstance_t, gi, profile_id, count
        )
        if handles.value is None:
            return Reading.missing_like(handles)
        for ci in handles.value:
            info = session.read("nvmlComputeInstanceGetInfo_v2", ci, convert=_placement)
            if info.value is None:
                return Reading.missing_like(info)
            ci_id, ci_profile, start, size = info.value
            out.append(
                MigComputeInstance(
                    id=ci_id, profile_id=ci_profile, name=name, placement_start=start, placement_size=size
                )
            )
    return Reading.of(tuple(sorted(out, key=lambda ci: ci.id)))
