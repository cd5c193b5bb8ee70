"""Whole-machine fixture files: loading, validation and the shipped examples.

A fixture is a machine snapshot (``gpudiag snapshot`` output) that may also use two
conveniences for hand-written files: ``gpu_defaults``, merged under every GPU entry, and
a lost/failed GPU written as just ``{"index", "state", "state_detail"}``.
"""

from __future__ import annotations

import functools
import math
import os
import stat
from typing import TYPE_CHECKING, Any, NoReturn

import msgspec
from msgspec.structs import replace

from gpudiag.errors import UsageError
from gpudiag.files import read_upto
from gpudiag.model import MACHINE_SCHEMA, Gpu, GpuState, Machine, Memory, Reading, Reason, failed_gpu
from gpudiag.parsing import shorten
from gpudiag.serialize import SchemaError, from_data, to_data

if TYPE_CHECKING:
    from pathlib import Path

# The shipped examples, as a plain path: an example's replay needs no pathlib (~5 ms of start-up with
# the urllib.parse and ipaddress it imports, a third of what a `list --query` may add to its floor).
EXAMPLES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "machines")
_FIXTURE_ONLY_KEYS = {"description", "gpu_defaults"}
UINT64_MAX = 2**64 - 1  # NVML's widest integer (unsigned long long)
MAX_GPU_INDEX = 4095  # far above any node's GPU count; keeps a typo from passing as an index


class FixtureError(UsageError):
    """A fixture or snapshot file cannot be used; the message says which and why."""


def example_names() -> list[str]:
    return sorted(name.removesuffix(".json") for name in os.listdir(EXAMPLES_DIR) if name.endswith(".json"))


# Linux's limits on a path and on one name in it: longer is no file, and no example's name.
PATH_MAX, NAME_MAX = 4096, 255


def resolve(spec: str) -> str:
    """A shipped example's name, or a path to a snapshot file: the file's path, as messages show it."""
    if (
        "\0" in spec
        or len(spec.encode(errors="surrogateescape")) >= PATH_MAX
        or any(len(part.encode(errors="surrogateescape")) > NAME_MAX for part in spec.split("/"))
    ):
        raise FixtureError(
            f"replay {shorten(spec)!r}: too long to be a file name or an example name (see `gpudiag examples`)"
        )
    if not spec or "/" in spec or spec.startswith("~") or spec.endswith(".json") or _exists(spec):
        # Maybe a file: read as pathlib reads (and shows) it, ``~`` expanded, ``a//b/./c`` as ``a/b/c``.
        from pathlib import Path

        candidate = Path(spec).expanduser()
        if candidate.suffix == ".json" or "/" in spec or _exists(candidate):
            _require_regular_file(candidate, spec)
            return str(candidate)
    example = os.path.join(EXAMPLES_DIR, f"{spec}.json")
    if not os.path.isfile(example):
        raise FixtureError(f"no example machine named {shorten(spec)!r}; examples: {', '.join(example_names())}")
    return example


def _exists(path: str | Path) -> bool:
    try:
        os.stat(path)
    except OSError:  # not there, or not reachable: then it is read as an example's name
        return False
    return True


def _require_regular_file(path: Path, spec: str) -> None:
    """Say what a replay path is when it is not a file to read. ``stat`` never opens it, so a
    FIFO cannot block and /dev/zero cannot be read without end."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise FixtureError(f"replay file not found: {shorten(spec, 200)}") from None
    except OSError as exc:
        raise FixtureError(f"cannot read replay file {shorten(spec, 200)}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        _refuse(spec, f"is {_kind(mode)}")


def _kind(mode: int) -> str:
    return (
        "a directory"
        if stat.S_ISDIR(mode)
        else "a named pipe (FIFO)"
        if stat.S_ISFIFO(mode)
        else "a character device"
        if stat.S_ISCHR(mode)
        else "a block device"
        if stat.S_ISBLK(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "not a regular file"
    )


def _refuse(spec: object, what: str) -> NoReturn:
    raise FixtureError(f"replay file {spec} {what}: give a snapshot file (gpudiag snapshot > FILE) or an example name")


# A snapshot of an 8-GPU node is ~30 KiB; 64 MiB holds thousands of GPUs and is the node files' limit
# too (gpudiag.fleet.nodefiles). Larger is not a snapshot, and is refused before it is read.
MAX_BYTES = 64 * 2**20
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def read_file(path: str | Path) -> bytes:
    """A replay file's bytes, never blocking and at most :data:`MAX_BYTES`. A file that is not
    regular once opened (swapped in after :func:`resolve`) is refused, and so is an empty one
    before it is read: a kernel file such as /proc/kmsg is regular and empty to ``stat``, and
    reading it blocks and consumes the kernel's messages."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise FixtureError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            _refuse(path, f"is {_kind(info.st_mode)}")
        if info.st_size == 0:
            _refuse(path, "has no size (empty, or a kernel file in /proc): not read")
        if info.st_size > MAX_BYTES:
            _refuse(path, f"is larger than {MAX_BYTES // 2**20} MiB, far more than any machine's snapshot")
        raw = read_upto(fd, info.st_size + 1)  # + 1: notice a file that grew
    except OSError as exc:
        raise FixtureError(f"cannot read {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(raw) > MAX_BYTES:
        _refuse(path, f"grew beyond {MAX_BYTES // 2**20} MiB while it was read")
    return raw


def load(spec: str) -> tuple[Machine, str]:
    """Load a machine from an example name or a file; also return its description."""
    path = resolve(spec)
    return _load_example(path) if os.path.dirname(path) == EXAMPLES_DIR else _load_file(path)


@functools.cache
def _load_example(path: str) -> tuple[Machine, str]:
    """A shipped example is read and validated once per process (a replayed watch or exporter reads
    it at every sample): it is package data, and the machine it gives is immutable. Its keys and
    its numbers are checked once, by the tests (tests/test_fixtures.py), not at every start."""
    return _load_file(path, checked=True)


def _load_file(path: str, checked: bool = False) -> tuple[Machine, str]:
    """``checked``: the file's keys and numbers are known good (a shipped example)."""
    raw = read_file(path)
    data = decode(raw, path)
    if not checked:
        duplicate_keys(raw, path)
    machine = machine_from_data(data, path, numbers_checked=checked)
    return machine, str(data.get("description", "")) if isinstance(data, dict) else ""


def decode(raw: bytes, path: str | Path) -> Any:
    """The JSON document in a replay file's bytes, or a FixtureError that says why not."""
    try:
        # msgspec's decoder, not the json module: it is loaded already, and importing json is
        # ~1.5 ms of a replayed `list --query`'s start-up.
        data = msgspec.json.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as exc:  # bad JSON or UTF-8, 65-bit int
        data = _with_lone_surrogates(raw)
        if data is None:
            if isinstance(exc, UnicodeDecodeError):  # Latin-1 text in a string, say: msgspec checks UTF-8
                raise FixtureError(f"{path} is not UTF-8 ({_first_bad_byte(raw)}): a snapshot is UTF-8 JSON") from None
            raise FixtureError(f"{path} is not valid JSON: {exc}") from None
    except RecursionError:
        raise FixtureError(f"{path}: JSON nested too deeply to be a machine snapshot") from None
    return data


class _DuplicateKeyError(Exception):
    pass


def _unique(pairs: list[tuple[str, Any]]) -> None:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise _DuplicateKeyError(next(key for n, key in enumerate(keys) if key in keys[:n]))


def duplicate_keys(raw: bytes, path: str | Path) -> None:
    """Refuse a document with a key twice in one object: JSON decoders keep the last and drop the
    first without a word, so a file with two ``"gpus"`` would replay a machine nobody wrote."""
    import json

    try:
        json.loads(raw, object_pairs_hook=_unique)
    except _DuplicateKeyError as exc:
        raise FixtureError(
            f"{path}: key {shorten(str(exc.args[0]))!r} appears twice in one object (edited or corrupted?)"
        ) from None
    except (ValueError, RecursionError):  # pragma: no cover - decode() refused it first
        return


def _first_bad_byte(raw: bytes) -> str:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"byte 0x{raw[exc.start]:02x} at offset {exc.start}"
    return "invalid text"  # pragma: no cover - msgspec found what the codec does not


def _with_lone_surrogates(raw: bytes) -> Any:
    """A snapshot of a process whose command line is not UTF-8 holds it as ``\\udcff`` escapes
    (psutil decodes with surrogateescape, ``json.dumps`` writes them): valid to Python's json
    module, refused by msgspec's. None when the file is not JSON to either."""
    if b"\\ud" not in raw and b"\\uD" not in raw:
        return None
    import json

    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


def machine_from_data(data: Any, where: str = "fixture", *, numbers_checked: bool = False) -> Machine:
    """The machine a snapshot's data describes, or a FixtureError naming what is wrong and where.
    ``numbers_checked``: every number is known to be one NVML can return (a shipped example's,
    held by the tests): not walked again (~1.5 ms of a replay's start)."""
    if not isinstance(data, dict):
        raise FixtureError(f"{where}: expected a JSON object")
    schema = data.get("schema")
    if schema != MACHINE_SCHEMA:
        raise FixtureError(f"{where}: schema is {schema!r}, this gpudiag reads {MACHINE_SCHEMA!r}")
    body = {k: v for k, v in data.items() if k not in _FIXTURE_ONLY_KEYS}
    defaults = data.get("gpu_defaults", {})
    if not isinstance(defaults, dict):
        raise FixtureError(f"{where}: $.gpu_defaults: expected an object")
    body.setdefault("source", "fixture")
    body.setdefault("collected_at", 0.0)
    if "gpus" not in body:
        raise FixtureError(f"{where}: $: missing key 'gpus'")  # never read a typo as a GPU-less machine
    if not isinstance(body["gpus"], list):
        raise FixtureError(f"{where}: $.gpus: expected a list")
    gpus = []
    seen: dict[int, int] = {}
    for position, entry in enumerate(body["gpus"]):
        if not isinstance(entry, dict):
            raise FixtureError(f"{where}: $.gpus[{position}]: expected an object")
        # A snapshot of some GPUs (`list --json --id 3,1`) keeps their real NVML indices, in
        # the order asked; replayed, they are enumerated in NVML order.
        index = entry.get("index", position)
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index <= MAX_GPU_INDEX:
            raise FixtureError(f"{where}: $.gpus[{position}].index: expected a GPU index (0..{MAX_GPU_INDEX})")
        if index in seen:
            raise FixtureError(f"{where}: $.gpus[{position}].index: {index} is also $.gpus[{seen[index]}]'s")
        seen[index] = position
        state = entry.get("state", "ok")
        if state != "ok" and set(entry) <= {"index", "state", "state_detail"}:
            try:
                failed_state = GpuState(state)
            except ValueError:
                raise FixtureError(f"{where}: $.gpus[{position}].state: unknown state {state!r}") from None
            gpus.append(to_data(failed_gpu(index, failed_state, str(entry.get("state_detail", "")))))
            continue
        merged = _deep_merge(defaults, entry)
        merged.setdefault("index", index)
        gpus.append(merged)
    body["gpus"] = gpus
    problem = None if numbers_checked else _impossible_number(body)
    if problem is None:
        try:
            machine = from_data(Machine, body)
        except SchemaError as exc:
            raise FixtureError(f"{where}: {exc}") from None
        except RecursionError:
            raise FixtureError(f"{where}: nested too deeply to be a machine snapshot") from None
        problem = _impossible_reading(machine)
    if problem is not None:
        raise FixtureError(f"{where}: {problem} (real NVML cannot return this)")
    return replace(machine, gpus=tuple(sorted((_mig_layout_of(g) for g in machine.gpus), key=lambda g: g.index)))


_MIG_OFF = "MIG is not enabled on this GPU"


def _mig_layout_of(gpu: Gpu) -> Gpu:
    """A GPU whose MIG mode is off has no MIG layout, which the file need not spell out: the probe
    answers the same (without asking NVML) from the same recorded mode, so a file and its replay agree."""
    if gpu.mig_mode_current.value or gpu.mig_profiles.reason is not Reason.NOT_RECORDED:
        return gpu
    off: Reading[Any] = Reading.missing(Reason.NOT_SUPPORTED, _MIG_OFF)
    instances = off if gpu.mig_instances.reason is Reason.NOT_RECORDED else gpu.mig_instances
    return replace(gpu, mig_profiles=off, mig_instances=instances)


# Readings NVML gives as signed integers (nvmlValueType_t 5): a threshold relative to the T.Limit.
SIGNED_KEYS = ("_tlimit_c",)
# NVML reports power in milliwatts as an unsigned int: no reading in watts is larger than this.
MAX_WATTS = (2**32 - 1) / 1000


def _impossible_number(data: Any) -> str | None:
    """Every number NVML reports is an unsigned integer of at most 64 bits (or a finite,
    non-negative float: watts, seconds; watts within NVML's 32-bit milliwatts); anything else
    in a snapshot is a corrupt file."""
    stack: list[tuple[str, Any]] = [("$", data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((f"{path}.{key}", item) for key, item in value.items())
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", item) for i, item in enumerate(value))
        elif isinstance(value, bool) or value is None or isinstance(value, str):
            continue
        elif isinstance(value, int) and path.endswith(SIGNED_KEYS) and -(2**31) <= value < 2**31:
            continue  # NVML's signed field values: degrees beyond a T.Limit
        elif isinstance(value, int) and not 0 <= value <= UINT64_MAX:
            return f"{path}: {shorten(str(value))} is outside 0..2**64-1"
        elif isinstance(value, float) and not (math.isfinite(value) and value >= 0):
            return f"{path}: {value} is not a finite non-negative number"
        elif path.endswith("_w") and value > MAX_WATTS:
            return f"{path}: {value:.10g} W is beyond NVML's power readings (at most {MAX_WATTS:.3f} W)"
    return None


def _impossible_reading(machine: Machine) -> str | None:
    """Readings that contradict each other or their unit: used beyond total, 120 %."""
    for position, gpu in enumerate(machine.gpus):
        at = f"$.gpus[{position}]"
        memory = gpu.memory.value
        if memory is not None:
            problem = _impossible_memory(memory, f"{at}.memory")
            if problem:
                return problem
            for i, process in enumerate(gpu.processes.get(())):
                used = process.used_memory_bytes.value
                if used is not None and used > memory.total_bytes:
                    return f"{at}.processes[{i}].used_memory_bytes: {used} exceeds the GPU's total {memory.total_bytes}"
        for i, mig in enumerate(gpu.mig_devices):
            if mig.memory.value is not None:
                problem = _impossible_memory(mig.memory.value, f"{at}.mig_devices[{i}].memory")
                if problem:
                    return problem
        utilization = gpu.utilization.value
        if utilization is not None:
            for name in ("gpu_percent", "memory_percent"):
                if getattr(utilization, name) > 100:
                    return f"{at}.utilization.{name}: {getattr(utilization, name)} is above 100"
        pstate = gpu.pstate.value
        if pstate is not None and pstate > 15 and pstate != 32:  # P0..P15; 32 is NVML's "unknown"
            return f"{at}.pstate: {pstate} is not a performance state (0..15, or 32 for unknown)"
    return None


def _impossible_memory(memory: Memory, at: str) -> str | None:
    if memory.total_bytes == 0:
        return f"{at}.total_bytes: a GPU with 0 bytes of memory"
    for name in ("used_bytes", "free_bytes"):
        if getattr(memory, name) > memory.total_bytes:
            return f"{at}.{name}: {getattr(memory, name)} exceeds total_bytes {memory.total_bytes}"
    if memory.used_bytes + memory.free_bytes > memory.total_bytes:
        return f"{at}: used_bytes + free_bytes exceed total_bytes {memory.total_bytes}"
    reserved = memory.reserved_bytes.value
    if reserved is not None and reserved > memory.total_bytes:
        return f"{at}.reserved_bytes: {reserved} exceeds total_bytes {memory.total_bytes}"
    # NVML's v2 struct: used excludes the reserved memory, used + free + reserved = total; without
    # a reserved figure (drivers before R510, MIG devices) the v1 struct: used + free = total.
    reserved = memory.reserved_bytes.get(0)
    if memory.used_bytes + memory.free_bytes + reserved != memory.total_bytes:
        return (
            f"{at}: used ({memory.used_bytes}) + free ({memory.free_bytes}) + reserved ({reserved}) != total"
            f" ({memory.total_bytes}); NVML's used excludes the reserved memory"
        )
    return None


def _deep_merge(base: Any, override: Any) -> Any:
    # A missing-reading marker on either side is replaced whole, never merged with a value.
    if isinstance(base, dict) and isinstance(override, dict) and "unavailable" not in override | base:
        out = dict(base)
        for key, value in override.items():
            out[key] = _deep_merge(base[key], value) if key in base else value
        return out
    return override


def dump(machine: Machine, description: str = "") -> str:
    data = to_data(machine)
    if description:
        data = {"description": description, **data}
    import json

    return json.dumps(data, indent=2) + "\n"
