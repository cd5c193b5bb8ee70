"""PyTorch's own reading of CUDA_VISIBLE_DEVICES (torch.cuda's parser), reproduced without torch."""

from __future__ import annotations

from gpudiag.model import Machine
from gpudiag.visibility.result import ORDER_VAR, VISIBLE_VAR, PytorchView, Resolution, TorchNvmlIndex

TORCH_NVML_QUERIES = "torch.cuda.utilization / memory_usage / temperature / power_draw / clock_rate"


def _torch_strtoul(s: str) -> int:
    """torch.cuda._parse_visible_devices' ``_strtoul``: Python's isdigit/int, so it reads non-ASCII
    digits that C does not, and raises ValueError on '+', '-' or a digit int() refuses ('²')."""
    if not s:
        return -1
    idx = 0
    for idx, c in enumerate(s):
        if not (c.isdigit() or (idx == 0 and c in "+-")):
            break
        if idx + 1 == len(s):
            idx += 1
    return int(s[:idx]) if idx > 0 else -1


def _torch_parse(value: str | None) -> list[int] | list[str]:
    """torch.cuda._parse_visible_devices (torch 2.13, CUDA builds)."""
    if value is None:
        return list(range(64))
    for prefix in ("GPU-", "MIG-"):
        if value.startswith(prefix):
            found: dict[str, None] = {}  # PyTorch uses a list; a dict gives the same answer in linear time
            for elem in value.split(","):
                if elem in found:
                    return []
                if not elem.startswith(prefix):
                    break
                found[elem] = None
            return list(found)
    numbers: dict[int, None] = {}
    for elem in value.split(","):
        x = _torch_strtoul(elem.strip())
        if x in numbers:
            return []
        if x < 0:
            break
        numbers[x] = None
    return list(numbers)


def _torch_uuid_ordinals(candidates: list[str], uuids: list[str]) -> list[int]:
    """torch.cuda._transform_uuid_to_ordinals: unique prefixes of NVML's UUIDs, in NVML order."""
    ordinals: list[int] = []
    for candidate in candidates:
        hits = [i for i, u in enumerate(uuids) if u.startswith(candidate)]
        if len(hits) != 1:
            break
        if hits[0] in ordinals:
            return []
        ordinals.append(hits[0])
    return ordinals


def pytorch_view(machine: Machine, value: str | None, resolution: Resolution) -> PytorchView:
    """What torch.cuda makes of the variable before/around CUDA, reproduced from its source."""
    cuda_count = len(resolution.devices)
    nvml_uuids = [g.uuid.value for g in machine.gpus]
    uuids = [u for u in nvml_uuids if u is not None] if all(u is not None for u in nvml_uuids) else None
    try:
        parsed = _torch_parse(value)
    except ValueError as exc:
        error = f"ValueError: {exc}"
        failing = tuple(TorchNvmlIndex(d.ordinal, None, error) for d in resolution.devices)
        divergence = (
            f"torch.cuda.device_count() raises {error} until CUDA initialises (PyTorch reads the variable with its "
            "own parser, which cannot read this value; CUDA itself can)"
        )
        return PytorchView(None, error, False, failing, (divergence,))

    asks_cuda = False
    count: int
    ordinals: list[int] | None = None
    if not parsed:
        count = 0
        ordinals = []
    elif isinstance(parsed[0], str):
        strings = [str(p) for p in parsed]
        if strings[0].startswith("MIG-") or uuids is None:
            asks_cuda, count = True, cuda_count
        else:
            ordinals = _torch_uuid_ordinals(strings, uuids)
            count = len(ordinals)
    else:
        numbers = [int(p) for p in parsed]
        raw = len(machine.gpus)
        count = next((i for i, n in enumerate(numbers) if n >= raw), len(numbers))
        ordinals = numbers

    indices: list[TorchNvmlIndex] = []
    for d in resolution.devices:
        if not parsed:
            indices.append(TorchNvmlIndex(d.ordinal, None, "IndexError: list index out of range"))
        elif isinstance(parsed[0], str) and uuids is None:
            indices.append(TorchNvmlIndex(d.ordinal, None, "RuntimeError: Can't get device UUIDs"))
        elif ordinals is None or d.ordinal >= len(ordinals):
            seen = ordinals if ordinals is not None else []
            indices.append(
                TorchNvmlIndex(
                    d.ordinal, None, f"RuntimeError: device {d.ordinal} is not visible ({VISIBLE_VAR}={seen})"
                )
            )
        else:
            indices.append(TorchNvmlIndex(d.ordinal, ordinals[d.ordinal]))

    divergences: list[str] = []
    if count != cuda_count:
        divergences.append(
            f"torch.cuda.device_count() returns {count} until CUDA initialises (PyTorch reads the variable itself, "
            f"through NVML), then {cuda_count}: code that sizes anything from it early sees {count}"
        )
    wrong = [i for i, d in zip(indices, resolution.devices, strict=True) if i.nvml_index != d.gpu_index]
    if wrong:
        shown = ", ".join(
            f"cuda:{i.ordinal} → "
            + (f"GPU {i.nvml_index}" if i.nvml_index is not None else i.error.split(":")[0])
            + f" (CUDA: GPU {resolution.devices[i.ordinal].gpu_index})"
            for i in wrong[:4]
        )
        divergences.append(
            f"{TORCH_NVML_QUERIES} map cuda:N to an NVML GPU with PyTorch's own reading of the variable (which "
            f"ignores {ORDER_VAR} and MIG): "
            f"{shown}{' …' if len(wrong) > 4 else ''}"
        )
    return PytorchView(count, "", asks_cuda, tuple(indices), tuple(divergences))
