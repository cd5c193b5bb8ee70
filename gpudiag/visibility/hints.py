"""What the indices in users' PyTorch code refer to under a resolution."""

from __future__ import annotations

import shlex

from gpudiag.visibility.result import ORDER_VAR, VISIBLE_VAR, Resolution, VisibleDevice


def code_hints(resolution: Resolution) -> tuple[str, ...]:
    """What the indices in users' PyTorch code refer to under this setting."""
    devs = resolution.devices
    if not devs:
        return (
            "no device is visible: torch.cuda.is_available() is False and any cuda:N fails ('no CUDA GPUs are "
            "available')",
            f"{VISIBLE_VAR} is read once per process, when CUDA initialises: fix it before the process starts",
        )

    def name(d: VisibleDevice) -> str:
        return f"GPU {d.gpu_index}" + (f" MIG {d.mig.index}" if d.mig is not None else "")

    n = len(devs)
    mapping = ", ".join(f"cuda:{d.ordinal} = {name(d)}" for d in devs[:8]) + (" …" if n > 8 else "")
    hints = [f"inside the program the devices are numbered from 0: {mapping} (GPU = nvidia-smi's number)"]
    if devs[0].mig is not None:
        hints.append(
            "a MIG instance is the process's only device (cuda:0): DataParallel and DDP cannot span MIG instances in "
            "one process; run one process per instance, each with its own MIG-<uuid>"
        )
    else:
        physical = [d.gpu_index for d in devs]
        logical = list(range(n))
        example = ""
        numbers = f"0..{n - 1}" if n > 1 else "only 0 here"
        if physical != logical:
            example = f"; e.g. device_ids={logical[:4]}{'…' if n > 4 else ''}, not {physical[:4]}{'…' if n > 4 else ''}"
        hints += [
            f"DataParallel(device_ids=[…]) takes these numbers, {numbers}{example}; a larger id fails with "
            "'invalid device ordinal'; the module must be on device_ids[0] before wrapping",
            f"output_device defaults to device_ids[0] (here {name(devs[0])}): outputs are gathered there, so that GPU "
            "holds more memory than the others",
            "DDP / torchrun: one process per device, torch.cuda.set_device(local_rank): "
            + ", ".join(f"rank {d.ordinal} → {name(d)}" for d in devs[:4])
            + (" …" if n > 4 else "")
            + f"; more ranks than {n} fail; if each process gets its own {VISIBLE_VAR}=<one GPU>, use cuda:0 there",
        ]
    hints.append(
        f"{VISIBLE_VAR} (and {ORDER_VAR}) are read once per process, when CUDA initialises: set them before the "
        "process starts; changing os.environ after the first CUDA call does nothing"
    )
    uuids = ",".join(d.uuid for d in devs)
    ids = devs[0].uuid if devs[0].mig is not None else ",".join(str(d.gpu_index) for d in devs)
    hints.append(
        f"to pin exactly this set regardless of ordering, name it by UUID (`gpudiag visible --select {ids}` prints "
        f"the line): export {VISIBLE_VAR}={shlex.quote(uuids)}"
    )
    return tuple(hints)
