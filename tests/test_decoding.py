"""No NVML answer can end a command: every reading spec fed answers of the wrong type.

The H200 (nvidia-ml-py 13.615) answered a ``c_char`` member as ``str`` where the decoder expected
``bytes``, and every detail view ended in exit 70. Here each row of ``readings.GPU_READINGS`` and
``details.DETAIL_READINGS`` gets answers no decoder should take (None, a struct without members, a
string of garbage, an integer where a struct belongs); the read goes on and the reading says why.
The wrong answer is put in front of whatever NVML the session is given (the fake, or pynvml at its
C boundary), so the test holds whichever fake the replays use.
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from gpudiag.details import DETAIL_READINGS
from gpudiag.model import FactGroup, Gpu, Reading, Reason
from gpudiag.probe import nvml
from gpudiag.readings import GPU_READINGS, TEXT, Spec, reading_at
from gpudiag.sources import collect

IDLE = "h100-driver580-idle"  # the captured H100: details recorded
# Composite rows whose calls only a MIG GPU, or a GPU with GPM, makes.
EXAMPLE = {
    "mig_devices": "a100-mig",
    "mig_profiles": "a100-mig",
    "mig_instances": "a100-mig",
    "profiling": "h100x8-healthy",
}
# nvmlDeviceValidateInforom answers nothing: only its error is read, so no answer is wrong for it.
ANSWER_NOT_READ = {"inforom_valid"}
# Composites whose declared call fills what the caller passes (its answer is NVML_SUCCESS): the wrong
# answer goes to the call whose answer they read, or into the struct they pass.
READ_FROM = {
    "profiling": "nvmlGpmQueryDeviceSupport",
    "mig_instances": "nvmlGpuInstanceGetInfo",
}
STRUCT = {
    "nvmlDeviceGetPciInfoExt": "nvmlPciInfoExt_v1_t",
    "nvmlDeviceGetSramEccErrorStatus": "c_nvmlEccSramErrorStatus_v1_t",
}
# Composites whose call answers an integer: 7 is a right answer there.
INTEGER_ANSWER = {"details.memory_health.ecc_by_location", "details.nvlinks"}
GARBAGE = "\x00\udcff not what NVML gives"


class WrongAnswer:
    """``lib`` with ``calls`` answering ``answer`` (and a struct by reference made as ``answer``)."""

    def __init__(self, lib: Any, calls: frozenset[str], structs: frozenset[str], answer: Any) -> None:
        self._lib, self._calls, self._structs, self._answer = lib, calls, structs, answer

    def __getattr__(self, name: str) -> Any:
        if name in self._calls:
            return lambda *args: self._answer
        if name in self._structs:
            return lambda: self._answer
        return getattr(self._lib, name)


def _calls(spec: Spec) -> frozenset[str]:
    """The NVML names a row's answer comes from (a composite's versioned names too)."""
    if spec.field:
        return frozenset({"nvmlDeviceGetFieldValues"})
    if spec.key in READ_FROM:
        return frozenset({READ_FROM[spec.key]})
    names = {spec.call, spec.fallback} - {""}
    if spec.custom:
        names |= {f"{spec.call}{suffix}" for suffix in ("_v2", "_v3")}
    return frozenset(names)


@pytest.fixture
def answering(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Make every NvmlSession opened from now on answer ``calls`` with ``answer``."""
    original = nvml.NvmlSession.__init__
    wrong: dict[str, Any] = {}

    def init(self: nvml.NvmlSession, lib: Any, host: Any) -> None:
        if wrong:
            lib = WrongAnswer(lib, wrong["calls"], wrong["structs"], wrong["answer"])
        original(self, lib, host)

    monkeypatch.setattr(nvml.NvmlSession, "__init__", init)

    def set_answer(calls: frozenset[str], structs: frozenset[str], answer: Any) -> None:
        wrong.update(calls=calls, structs=structs, answer=answer)

    yield set_answer


def unexpected(node: Any) -> list[Reading[Any]]:
    """Every reading in ``node`` (a reading, a Struct, a tuple) that says its answer was unexpected."""
    found: list[Reading[Any]] = []
    if isinstance(node, Reading):
        if node.reason is Reason.UNKNOWN_ERROR and "unexpected answer" in node.detail:
            found.append(node)
        elif node.value is not None:
            found += unexpected(node.value)
    elif isinstance(node, msgspec.Struct):
        for name in node.__struct_fields__:
            found += unexpected(getattr(node, name))
    elif isinstance(node, tuple | list):
        for item in node:
            found += unexpected(item)
    return found


def _wrong_answers(spec: Spec) -> list[Any]:
    answers: list[Any] = [None, SimpleNamespace(), GARBAGE]
    if spec.codec is TEXT and spec.pick is None:
        answers.remove(GARBAGE)  # a string is the right type for a string
    if isinstance(spec.pick, str) or spec.struct or (spec.custom and spec.key not in INTEGER_ANSWER):
        answers.append(7)  # an integer where a struct belongs
    return answers


SPECS = [s for s in (*GPU_READINGS, *DETAIL_READINGS) if s.key not in ANSWER_NOT_READ]


@pytest.mark.slow  # about 200 reads of a machine: 10 s on the shared 2-core machine
@pytest.mark.parametrize("spec", SPECS, ids=[s.key for s in SPECS])
def test_every_reading_fed_a_wrong_answer_says_why_and_the_read_goes_on(answering: Any, spec: Spec) -> None:
    example = EXAMPLE.get(spec.key, IDLE)
    group = spec.group
    facts = frozenset({group} if group is not None else set()) | (
        {FactGroup.LINKS} if group is FactGroup.DETAILS else set()
    )
    structs = frozenset({spec.struct, STRUCT.get(spec.call, "")} - {""})
    for answer in _wrong_answers(spec):
        answering(_calls(spec), structs, answer)
        machine = collect(example, facts=facts)  # raises on the old code
        gpu = machine.gpus[0]
        # mig_devices: each MIG device's own readings say why
        reading = Reading.of(gpu.mig_devices) if spec.key == "mig_devices" else reading_at(gpu, spec.key)
        errors = unexpected(reading)
        assert errors, f"{spec.key} answered {answer!r}: {reading}"
        if spec.key != "mig_devices":  # a MIG device's handle is asked by the calls after it
            assert any(name in e.detail for e in errors for name in (*_calls(spec), "field")), errors[0].detail


def test_the_platform_struct_reads_as_pynvml_13_and_older_bindings_give_it() -> None:
    """nvidia-ml-py 13's c_nvmlPlatformInfo_v2_t reads a c_char member as str ('\\x00'), a plain
    ctypes struct (older bindings) as bytes; both are the byte's number (the H200's exit 70)."""
    import pynvml

    from gpudiag.details.identity import PLATFORM

    class Plain(ctypes.Structure):
        _fields_ = pynvml.c_nvmlPlatformInfo_v2_t._fields_

    for struct in (pynvml.c_nvmlPlatformInfo_v2_t(), Plain()):
        struct.slotNumber, struct.hostId, struct.moduleId = b"\x03", b"\x01", b"\x02"
        struct.ibGuid = b"\x01" * 8
        info = PLATFORM.decode(struct)
        assert (info.slot_number, info.tray_index, info.host_id, info.peer_type, info.module_id) == (3, 0, 1, 0, 2)
        assert info.fabric_guid == "0x" + "01" * 8 + "00" * 8
    assert isinstance(pynvml.c_nvmlPlatformInfo_v2_t().slotNumber, str)  # what the H200's binding gave


def test_a_decoding_error_shows_its_traceback_only_under_debug(
    answering: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    answering(frozenset({"nvmlDeviceGetName"}), frozenset(), SimpleNamespace())
    collect(IDLE, facts=frozenset())
    assert "Traceback" not in capsys.readouterr().err
    monkeypatch.setenv("GPUDIAG_DEBUG", "1")
    gpu = collect(IDLE, facts=frozenset()).gpus[0]
    assert "Traceback" in capsys.readouterr().err
    assert gpu.name.reason is Reason.UNKNOWN_ERROR
    assert gpu.name.detail == "nvmlDeviceGetName: unexpected answer (TypeError: expected a string, got SimpleNamespace)"


def test_a_binding_that_raises_its_own_error_loses_that_reading_alone(answering: Any) -> None:
    """pynvml raises UnicodeDecodeError on a string that is not UTF-8, inside its own wrapper."""

    class Raises(WrongAnswer):
        def __getattr__(self, name: str) -> Any:
            if name == "nvmlDeviceGetSerial":

                def serial(*args: Any) -> Any:
                    raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")

                return serial
            return getattr(self._lib, name)

    original = nvml.NvmlSession.__init__
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            nvml.NvmlSession,
            "__init__",
            lambda self, lib, host: original(self, Raises(lib, frozenset(), frozenset(), None), host),
        )
        gpu = collect(IDLE, facts=frozenset({FactGroup.DETAILS})).gpus[0]
    assert gpu.details.value is not None
    serial = gpu.details.value.identity.serial
    assert serial.reason is Reason.UNKNOWN_ERROR and "UnicodeDecodeError" in serial.detail
    assert gpu.details.value.identity.vbios_version.value  # the rest read


def test_a_gpu_read_with_a_wrong_count_of_field_values_says_so_for_each_field(answering: Any) -> None:
    answering(frozenset({"nvmlDeviceGetFieldValues"}), frozenset(), [])
    gpu: Gpu = collect(IDLE, facts=frozenset({FactGroup.RECOVERY})).gpus[0]
    assert gpu.recovery_action.reason is Reason.UNKNOWN_ERROR
    assert "unexpected answer (0 values for 1 fields)" in gpu.recovery_action.detail


def _h200_platform_info(handle: Any, ref: Any) -> int:
    """nvmlDeviceGetPlatformInfo as the H200 answered it: the struct nvidia-ml-py 13 passes, zeroed
    but for its host id (its c_char members read back as str)."""
    ref._obj.hostId = b"\x01"
    return 0


COMMANDS = (
    ("list", "-q"),
    ("list", "-q", "-x"),
    ("list", "--json", "--details"),
    ("snapshot",),
)


def _every_field() -> str:
    from gpudiag.query import gpu_fields

    return ",".join(field.name for field in gpu_fields.fields())


PLATFORM_QUERY = ("list", "--query-gpu", "platform.host_id,platform.peer_type,platform.gpu_fabric_guid", "--format=csv")


@pytest.mark.parametrize("args", [*COMMANDS, ("list", "--query-gpu", "EVERY"), PLATFORM_QUERY], ids=" ".join)
def test_the_h200s_platform_answer_ends_no_command(monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...]) -> None:
    import pynvml

    from tests.test_list_cli import run

    original = nvml.NvmlSession.__init__

    class H200(WrongAnswer):
        def __getattr__(self, name: str) -> Any:
            if name == "nvmlDeviceGetPlatformInfo":
                return _h200_platform_info
            if name == "c_nvmlPlatformInfo_v2_t":
                return pynvml.c_nvmlPlatformInfo_v2_t
            return getattr(self._lib, name)

    monkeypatch.setattr(
        nvml.NvmlSession,
        "__init__",
        lambda self, lib, host: original(self, H200(lib, frozenset(), frozenset(), None), host),
    )
    if args[-1] == "EVERY":
        args = (*args[:-1], _every_field())
    code, out, err = run("--replay", IDLE, *args)  # exit 70 on the H200 before
    assert code == 0, err
    assert "internal error" not in err
    if args == PLATFORM_QUERY:  # the bytes pynvml 13 gives as str, read through the probe
        assert out.splitlines()[-1] == "1, Direct Connected, 0x0000000000000000"
    if args == ("list", "-q"):
        assert re.search(r"\n +Host ID +: N/A \(the platform reports no chassis", out)  # as nvidia-smi -q


@pytest.mark.parametrize("args", [*COMMANDS, ("list", "--query-gpu", "name,uuid,serial")], ids=" ".join)
def test_a_call_answering_an_unexpected_type_is_na_and_the_command_goes_on(
    answering: Any, args: tuple[str, ...]
) -> None:
    from tests.test_list_cli import run

    answering(frozenset({"nvmlDeviceGetSerial"}), frozenset(), SimpleNamespace())
    code, out, err = run("--replay", IDLE, *args)
    assert code == 0, err
    why = "nvmlDeviceGetSerial: unexpected answer (TypeError: expected a string, got SimpleNamespace)"
    if args == ("list", "-q"):
        assert re.search(rf"\n +Serial Number +: N/A \({re.escape(why)}\)\n", out)
    elif "-x" in args:
        assert "<serial>N/A</serial>" in out
    elif "--query-gpu" in args:
        assert out.splitlines()[-1].endswith(", [N/A]")
    else:
        assert why in out  # the reason in JSON


# --- a check rule that raises ------------------------------------------------------------


def _with_raising_rule(monkeypatch: pytest.MonkeyPatch, check_id: str) -> None:
    from gpudiag.checks import rules

    def rule(facts: Any, options: Any) -> Any:
        raise KeyError("a reading the rule did not expect")

    checks = tuple(msgspec.structs.replace(c, rule=rule) if c.id == check_id else c for c in rules.CHECKS)
    monkeypatch.setattr(rules, "CHECKS", checks)


def test_a_rule_that_raises_is_its_checks_could_not_run_result_and_the_others_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gpudiag.checks import Facts, Options, Status, rules

    machine = collect(IDLE)
    facts = Facts(machine=machine, torch=Reading.missing(Reason.UNAVAILABLE, "not asked"), devices=None)
    before = rules.run(facts, Options())
    _with_raising_rule(monkeypatch, "health.ecc")
    failed: list[str] = []
    results = rules.run(facts, Options(), failed=failed)  # raised KeyError before
    ecc = [r for r in results if r.id == "health.ecc"]
    assert len(ecc) == 1 and ecc[0].status is Status.SKIP
    assert ecc[0].finding == "could not run: KeyError: 'a reading the rule did not expect'"
    assert [r for r in results if r.id != "health.ecc"] == [r for r in before if r.id != "health.ecc"]
    assert failed == ["check health.ecc: KeyError: 'a reading the rule did not expect'"]


def test_check_with_a_raising_rule_is_incomplete_never_ready(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpudiag.exitcodes import ExitCode
    from tests.test_list_cli import run

    _with_raising_rule(monkeypatch, "health.temperature")
    code, out, err = run("--replay", IDLE, "check")
    assert code == ExitCode.CHECK_INCOMPLETE, (out, err)
    assert "could not run: KeyError" in out
    assert "PASS  health.ecc" in out  # every other check ran
    assert "READY" not in out


def test_a_check_whose_reading_came_back_garbled_is_incomplete_never_ready(answering: Any) -> None:
    """A GPU with uncorrected ECC errors, a pending remap and NVML asking for a reset, whose counters
    came back as answers gpudiag cannot decode: each check that could not judge it is SKIP, and the
    run read READY (exit 0); it is UNKNOWN (exit 5) with a line per check it could not judge."""
    from gpudiag.exitcodes import ExitCode
    from tests.test_list_cli import run

    keys = ("ecc_errors.volatile_uncorrected", "remapped_rows", "recovery_action", "retired_pages")
    specs = [s for s in GPU_READINGS if s.key in keys] + [s for s in GPU_READINGS if s.key == "clock_event_reasons"]
    answering(frozenset().union(*map(_calls, specs)), frozenset(), GARBAGE)
    code, out, err = run("--replay", "a100-ecc-errors", "check", "--no-torch")
    assert "SKIP  health.ecc              GPU 0  nvmlDeviceGetTotalEccErrors: unexpected answer" in out
    assert code == ExitCode.CHECK_INCOMPLETE, (out, err)
    assert "\nUNKNOWN: 13 pass, 1 warn, 0 fail, 13 skip; could not run: check health.ecc GPU 0" in out, out[-600:]
    for check in ("health.ecc", "health.row_remap", "health.recovery_action", "health.clock_events"):
        assert f"gpudiag: could not run: check {check} GPU 0: " in err, err
