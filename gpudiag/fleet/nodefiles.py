"""Read one node's output file (`check --json`, `snapshot`, `bench-transfer --json`, `memory --json`).

Every file gets exactly one outcome: read (``kind`` set) or unreadable (``problem`` says why, ``cause``
names the kind of trouble for grouping). A file is read only when it is exactly one valid document:

- a regular file, not followed through a symbolic link, opened without blocking (a FIFO or a
  device is never opened for reading), at most :data:`MAX_BYTES`;
- one JSON document in valid UTF-8, nested no deeper than msgspec recurses, with nothing but
  white space after it (two appended runs, or stderr text that Slurm mixed in, are unreadable);
- of a schema gpudiag reads, every field it reads of the right type and in range;
- consistent with itself: a check file's verdict, exit code and summary are the ones its results
  give by `check`'s own rule (:func:`gpudiag.exitcodes.check_code`: nothing verified is UNKNOWN);
- no object with a key twice, at any depth (readers disagree on which one counts);
- named by exactly one valid node name (``slurm_node``, else ``host``, else the file's name):
  a name is data, never hostlist syntax.

Only what a fleet report compares is kept: the verdict and failures, versions, GPU models and a
few figures. Whatever the file holds is that node's problem, never ours: nothing here raises for it.
"""

from __future__ import annotations

import enum
import json
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec
from msgspec import UNSET

from gpudiag.exitcodes import CHECK_VERDICTS, ExitCode, check_code
from gpudiag.files import read_upto
from gpudiag.fleet.hostlists import is_node_name
from gpudiag.fleet.nodefile_figures import deep_figures, gpu_figures, has_deep
from gpudiag.fleet.nodefile_schema import (
    CHECK_OPTIONAL,
    CHECK_REQUIRED,
    CHECKS,
    DECODER,
    GPU_KEYS,
    ITEM_KEYS,
    OLDER,
    BenchFile,
    CheckFile,
    CheckGpu,
    CheckItem,
    Ecc,
    FullCheckGpu,
    FullCheckItem,
    Host,
    MemoryFile,
    MemoryFileV1,
    Named,
    OlderCheckFile,
    SnapshotFile,
)


class Kind(str, enum.Enum):
    CHECK = "check"
    SNAPSHOT = "snapshot"
    BENCH = "bench-transfer"
    MEMORY = "memory"


SCHEMAS = {
    "gpudiag.check/1": Kind.CHECK,
    "gpudiag.machine/1": Kind.SNAPSHOT,
    "gpudiag.bench-transfer/1": Kind.BENCH,
    "gpudiag.memory/2": Kind.MEMORY,
    "gpudiag.memory/1": Kind.MEMORY,  # before 0.2.0: a missing reading was null
}

# Version fields compared across the fleet, under the names `check --json` gives them.
VERSION_FIELDS = ("Driver", "CUDA (driver max)", "torch", "torch CUDA build", "cuDNN", "NCCL")

# Bandwidth figures: per direction, the modes to take, best first (the pinned blocking copy is
# the one every run measures by default).
_BANDWIDTH_MODES = {
    "h2d_gbps": ("h2d_pinned", "h2d_pinned_async", "h2d_pageable"),
    "d2h_gbps": ("d2h_pinned", "d2h_pinned_async", "d2h_pageable"),
    "d2d_gbps": ("d2d",),
}

MAX_BYTES = 64 * 1024 * 1024  # a node file larger than this is not one of ours (an 8-GPU check is ~30 KiB)
_EXCERPT = 60  # characters of a file's text quoted in a problem


class Cause(str, enum.Enum):
    """Why a file is unreadable, in a few words: the report groups unreadable nodes by it."""

    CANNOT_READ = "cannot read"
    SYMLINK = "symbolic link"
    NOT_REGULAR = "not a regular file"
    TOO_LARGE = "too large"
    EMPTY = "empty file"
    TRUNCATED = "truncated JSON"
    NOT_JSON = "not JSON"
    BAD_UTF8 = "invalid UTF-8"
    TOO_DEEP = "nested too deeply"
    SEVERAL = "several JSON documents"
    TRAILING_TEXT = "text after the JSON document"
    NOT_GPUDIAG = "not a gpudiag output"
    UNKNOWN_SCHEMA = "unknown schema"
    MALFORMED = "malformed output"
    CONTRADICTS = "contradicts itself"
    DUPLICATE_KEY = "duplicate key"
    BAD_NAME = "invalid node name"


@dataclass(frozen=True, slots=True)
class Failure:
    check: str  # check id, or "gpudiag.could_not_run" / "bench-transfer"
    target: str  # "GPU 3", "" for the node
    finding: str
    scope: str = "node"  # "node" or "job": only node-scope failures drain a node (see gpudiag.checks.Scope)
    action: str = ""  # what an operator does ("reset", "reboot", ...; see gpudiag.checks.Action); "" unknown
    uuid: str = ""  # the GPU's UUID when the failure is about one GPU and the file recorded it


@dataclass(frozen=True, slots=True)
class NodeFile:
    path: str
    host: str  # the node: Slurm's name when recorded, else the hostname, else the file's name
    kind: Kind | None  # None: unreadable
    problem: str = ""  # why the file could not be read ("" when it could)
    verdict: str | None = None  # `check`'s verdict: READY, NOT READY, UNKNOWN
    failures: tuple[Failure, ...] = ()
    versions: dict[str, str] = field(default_factory=dict)
    gpus: tuple[str, ...] = ()  # GPU model per GPU, in index order
    metrics: dict[str, float] = field(default_factory=dict)
    remedy: str = ""  # "GPU reset needed" etc. (see gpudiag.fleet.faults)
    checks: tuple[tuple[str, str], ...] = ()  # (check id, status) of every result, only when asked (JUnit)
    cause: Cause | None = None  # set exactly when kind is None
    name_ok: bool = True  # False: no valid node name at all, ``host`` is the file's name as found
    figure_gpus: dict[str, int] = field(default_factory=dict)  # the GPU a deep figure is from (its slowest)
    # A check file in which node-scope checks ran and passed (or warned) and none failed: what may
    # resume a node (a snapshot, a memory record or a check of the job alone verifies nothing of it).
    node_verified: bool = False


def file_host(path: str) -> str:
    """The node a file is named after: ``nodes/gpu017.json`` and ``gpu017.check.json`` are gpu017."""
    return os.path.basename(path).split(".", 1)[0] or path


def unreadable(path: str, cause: Cause, problem: str, host: str | None = None) -> NodeFile:
    """A file that is not one valid document, attributed to ``host`` if valid, else to its file's name."""
    if host is None or not is_node_name(host):
        host = file_host(path)
    return NodeFile(path, host, None, problem, cause=cause, name_ok=is_node_name(host))


# --- reading: regular files only, never blocking ----------------------------------------------

_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_FILE_TYPES = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


def read(path: str, keep_checks: bool = False) -> NodeFile:
    """One node file, never raising and never blocking, whatever the path is."""
    try:
        # lstat first: a device or FIFO is never opened (opening some devices does something);
        # O_NOFOLLOW and O_NONBLOCK then cover a file swapped in between.
        mode = os.lstat(path).st_mode
        if not stat.S_ISREG(mode):
            return _not_regular(path, mode)
        fd = os.open(path, _OPEN_FLAGS)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return _not_regular(path, info.st_mode)
            if info.st_size > MAX_BYTES:
                return _too_large(path)
            raw = _read_all(fd, info.st_size + 1)  # + 1: notice a file that grew
        finally:
            os.close(fd)
    except OSError as exc:
        if exc.errno == getattr(os, "ELOOP", None):
            return _not_regular(path, stat.S_IFLNK)
        return unreadable(path, Cause.CANNOT_READ, f"cannot read: {exc.strerror or exc}")
    return parse(raw, path, keep_checks)


def regular_text(path: str) -> tuple[bytes, float] | None:
    """A regular file's bytes and modification time, read as :func:`read` reads (never through a
    link, never a FIFO or a device, never blocking, at most MAX_BYTES); None for anything else."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_BYTES:
                return None
            raw = _read_all(fd, info.st_size + 1)
        finally:
            os.close(fd)
    except OSError:
        return None
    return (raw, info.st_mtime) if len(raw) <= MAX_BYTES else None


def _not_regular(path: str, mode: int) -> NodeFile:
    if stat.S_ISLNK(mode):
        return unreadable(path, Cause.SYMLINK, "a symbolic link: report reads node files as regular files, never links")
    what = _FILE_TYPES.get(stat.S_IFMT(mode), "not a regular file")
    return unreadable(path, Cause.NOT_REGULAR, f"{what}, not a regular file")


def _too_large(path: str) -> NodeFile:
    return unreadable(path, Cause.TOO_LARGE, f"larger than {MAX_BYTES // 2**20} MiB: not a gpudiag output")


def _too_deep(path: str) -> NodeFile:
    return unreadable(path, Cause.TOO_DEEP, "JSON nested too deeply to be a gpudiag output")


def _read_all(fd: int, limit: int) -> bytes:
    """Up to ``limit`` bytes, and at most one byte more than MAX_BYTES."""
    return read_upto(fd, min(limit, MAX_BYTES + 1))


# --- parsing: exactly one valid document --------------------------------------------------


def parse(raw: bytes, path: str, keep_checks: bool = False) -> NodeFile:
    """The node file ``raw``, read from ``path``; whatever it holds, a NodeFile."""
    if len(raw) > MAX_BYTES:
        return _too_large(path)
    if not raw or raw.isspace():
        return unreadable(path, Cause.EMPTY, "empty file (the node wrote nothing: crashed, killed or timed out?)")
    if not raw.isascii():  # msgspec checks only the strings it keeps; JSON is UTF-8 throughout
        try:
            raw.decode()
        except UnicodeDecodeError as exc:
            return unreadable(path, Cause.BAD_UTF8, f"not valid UTF-8 (byte {exc.start})")
    try:
        doc = _decode(raw)
    except msgspec.ValidationError as exc:  # JSON, but not a document of ours
        return _explain(raw, path, str(exc))
    except msgspec.DecodeError as exc:
        if "surrogate" in str(exc) and (printable := _lone_surrogates_escaped(raw, path)) is not None:
            return printable if isinstance(printable, NodeFile) else parse(printable, path, keep_checks)
        return _not_one_document(raw, path, str(exc))
    except UnicodeDecodeError as exc:
        return unreadable(path, Cause.BAD_UTF8, f"not valid UTF-8 (byte {exc.start})")
    except RecursionError:
        return _too_deep(path)
    try:
        read: tuple[NodeFile, _Colons | None] = _READERS[type(doc)](doc, path, keep_checks)
    except msgspec.ValidationError as exc:  # in the list of checks
        return _explain(raw, path, f"{exc} in `checks`")
    except RecursionError:
        return _too_deep(path)
    except _InvalidContentError as exc:
        # A key given twice is the likelier story behind a contradiction: say that.
        return _duplicated(raw, path, _name(doc)[0]) or unreadable(path, exc.cause, exc.problem, _name(doc)[0])
    node, colons = read
    if not _colons_ruled_out(raw, colons):  # the exact check only where counting cannot rule it out
        return _duplicated(raw, path, node.host) or node
    return node


# --- a key twice in one object -------------------------------------------------------------------
#
# msgspec (as most readers) keeps the last of two equal keys without a word, so a file with two
# "checks" would read as its second while a person reads its first. The exact check below runs the
# standard library's parser over every object's pairs: three times the cost of reading the file. So
# it runs only where counting cannot rule a duplicate out. Every ':' of a JSON text follows one key
# or lies inside a string; the reader knows how many keys it decoded and how many colons the strings
# it decoded hold (when no string writes a colon as an escape, each of those is a ':' of the text).
# A text with exactly that many colons has no key twice: one given twice is a colon more.


# The colons a document's text has when no key is there twice, and whether some of them were counted
# in decoded text (where \\u003a would be a colon too).
_Colons = tuple[int, bool]


def _colons_ruled_out(raw: bytes, colons: _Colons | None) -> bool:
    """Whether counting rules out a key twice: ``colons`` (None: the reader could not count) is every
    ':' of ``raw``."""
    return colons is not None and raw.count(b":") == colons[0] and not (colons[1] and _escaped_colon(raw))


def _escaped_colon(raw: bytes) -> bool:
    """Whether ``raw`` may write a ':' as ``\\u003a`` (a decoded colon that is no ':' of the text)."""
    at = raw.find(b"\\")  # a few escapes (°, …) in a file of ours: memchr beats a search for the 5 bytes
    for _ in range(64):
        if at < 0:
            return False
        if raw[at + 1 : at + 5] == b"u003":
            return True
        at = raw.find(b"\\", at + 2)  # past an escaped backslash too: "\\\\u003a" is no escape
    return b"\\u003" in raw


class _DuplicateKeyError(Exception):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> None:
    if len(pairs) > 1 and len({key for key, _ in pairs}) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKeyError(key)
            seen.add(key)


def _duplicated(raw: bytes, path: str, host: str | None) -> NodeFile | None:
    """The file unreadable for a key given twice in one object, or None when it has none."""
    try:
        json.loads(raw, object_pairs_hook=_no_duplicates)
    except _DuplicateKeyError as exc:
        key = exc.args[0]
        return unreadable(
            path,
            Cause.DUPLICATE_KEY,
            f"key {key[:60]!r} twice in one object: readers disagree on which one counts (edited or corrupted?)",
            host,
        )
    except RecursionError:
        return _too_deep(path)
    except ValueError as exc:  # read by msgspec, refused by the standard library (a 5,000-digit number)
        return unreadable(path, Cause.MALFORMED, f"malformed JSON: {str(exc)[:200]}", host)
    return None


def _lone_surrogates_escaped(raw: bytes, path: str) -> bytes | NodeFile | None:
    """gpudiag writes a byte of a process name that is not UTF-8 as a lone surrogate (``\\udcff``,
    psutil's surrogateescape): valid JSON that msgspec refuses. The same document with each such
    character written as its visible escape, the file unreadable for a key twice, or None when the
    standard library refuses the text too."""
    if duplicated := _duplicated(raw, path, None):
        return duplicated
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return msgspec.json.encode(_escaped(data))


def _escaped(data: Any) -> Any:
    if isinstance(data, str):
        return data if data.isascii() else data.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(data, dict):
        return {_escaped(key): _escaped(value) for key, value in data.items()}
    if isinstance(data, list):
        return [_escaped(item) for item in data]
    return data


def _decode(raw: bytes) -> Any:
    """The document, in the shape that counts its keys, else (an older check file) in the shape that
    reads it; the errors are the latter's."""
    try:
        return DECODER.decode(raw)
    except msgspec.ValidationError:
        return OLDER.decode(raw)


_TRAILING = re.compile(r"trailing characters \(byte (\d+)\)")


def _not_one_document(raw: bytes, path: str, error: str) -> NodeFile:
    """Why ``raw`` is not one JSON document: text after it, a second one, cut short, or no JSON."""
    if found := _TRAILING.search(error):
        end = int(found.group(1)) - 1  # msgspec counts the offending byte in
        rest, host = raw[end:].lstrip(), _name_of(raw[:end])
        if rest[:1] in (b"{", b"["):
            return unreadable(
                path,
                Cause.SEVERAL,
                "more than one JSON document (runs appended to one file with >>?): give each run a file of its own",
                host,
            )
        return unreadable(
            path,
            Cause.TRAILING_TEXT,
            f"text after the JSON document: {_excerpt(rest)} (stderr mixed in? give srun --error a file of its own)",
            host,
        )
    text = raw.decode("utf-8", "replace").strip()
    if "truncated" in error or text.startswith(("{", "[")):
        return unreadable(path, Cause.TRUNCATED, "truncated or malformed JSON (the node was killed while writing?)")
    return unreadable(path, Cause.NOT_JSON, f"not JSON: {_excerpt(text.encode())}")


def _excerpt(raw: bytes) -> str:
    """The first line of ``raw``, short and quoted with escapes (it is shown on terminals)."""
    line = raw[: _EXCERPT * 4].decode("utf-8", "replace").strip().split("\n", 1)[0]
    return repr(line[:_EXCERPT] + ("…" if len(line) > _EXCERPT else ""))


def _name_of(raw: bytes) -> str | None:
    """The node a document names (to attribute a file that cannot be read); None when it names none."""
    try:
        return _name(msgspec.json.decode(raw, type=Named))[0]
    except (ValueError, RecursionError):  # msgspec's errors are ValueErrors
        return None


def _explain(raw: bytes, path: str, error: str) -> NodeFile:
    """Why a JSON document is not one we read (the error path only: parsed again, plainly)."""
    try:
        data = msgspec.json.decode(raw)
    except UnicodeDecodeError as exc:
        return unreadable(path, Cause.BAD_UTF8, f"not valid UTF-8 (byte {exc.start})")
    except RecursionError:
        return _too_deep(path)
    except ValueError:
        return unreadable(path, Cause.MALFORMED, f"malformed JSON: {error[:200]}")
    if not isinstance(data, dict):
        return unreadable(path, Cause.NOT_GPUDIAG, "not a gpudiag output (JSON, but not an object)")
    schema = data.get("schema")
    host = _name_of(raw)
    if isinstance(schema, str) and schema in SCHEMAS:  # a list or an object is not a schema name
        return unreadable(path, Cause.MALFORMED, f"malformed {schema} output: {error[:200]}", host)
    if isinstance(schema, str) and schema.startswith("gpudiag."):
        known = ", ".join(SCHEMAS)
        return unreadable(
            path, Cause.UNKNOWN_SCHEMA, f"schema {schema[:60]!r} is not one this gpudiag reads ({known})", host
        )
    return unreadable(path, Cause.NOT_GPUDIAG, "not a gpudiag output (no gpudiag schema field)", host)


class _InvalidContentError(Exception):
    """A document of the right shape whose content cannot be taken (a bad name, a contradiction)."""

    def __init__(self, cause: Cause, problem: str) -> None:
        super().__init__(problem)
        self.cause, self.problem = cause, problem


# A check id: what gpudiag's ids look like (``health.ecc``); anything else is not one of its results.
_CHECK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}")
_valid_ids: set[str] = set()  # ids already matched: a fleet has few distinct ones


def _name(data: Named | None) -> tuple[str | None, str]:
    """Slurm's name for the node when recorded, else its hostname (None: neither), and the field it
    came from. A field that is there but empty is a name too (an invalid one): never a default."""
    if data is None:
        return None, ""
    if isinstance(data.slurm_node, str):
        return data.slurm_node, "slurm_node"
    host = data.host.hostname if isinstance(data.host, Host) else data.host
    return (host, "host") if isinstance(host, str) else (None, "")


def _node_name(doc: Named, path: str) -> str:
    """The node a read document is about; a name that is not exactly one node name makes it unreadable."""
    name, source = _name(doc)
    if name is None:
        name, source = file_host(path), "the file's name"
    if not is_node_name(name):
        raise _InvalidContentError(
            Cause.BAD_NAME,
            f"invalid node name {name[:100]!r} in {source}: a node name is one name (letters, digits, '.', '_', '-'),"
            " never a hostlist nor a keyword (ALL, DEFAULT)",
        )
    return name


def _known(value: Any) -> Any:
    """A snapshot's reading: its value, or None when it is {"unavailable": ...}."""
    return None if isinstance(value, dict) else value


# Values that repeat across a fleet (version maps, GPU model lists, check lists, failures) are kept
# once: 50,000 nodes of the same 8 GPUs share one tuple. Cleared when it grows past what a fleet
# has distinct values for, so that adversarial files cannot grow it without bound.
_SHARED: dict[Any, Any] = {}


def _shared(kind: str, value: Any, key: Any = None) -> Any:
    """The one kept copy of ``value`` (of its ``kind``: values of different kinds may be equal)."""
    if len(_SHARED) > 200_000:
        _SHARED.clear()
    return _SHARED.setdefault((kind, value if key is None else key), value)


# --- per schema ----------------------------------------------------------------------


def _check(doc: CheckFile | OlderCheckFile, path: str, keep_checks: bool) -> tuple[NodeFile, _Colons | None]:
    host = _node_name(doc, path)
    # The keys decoded, then the colons in the strings decoded (see _colons_ruled_out); None: not counted.
    keys: int | None = None
    checks: list[FullCheckItem] | list[CheckItem]
    findings = b""
    if isinstance(doc, CheckFile):
        checks = doc.checks
        # Each finding's JSON text, NUL apart (no NUL is in JSON text): every one must be a string.
        findings = b"\0".join([c.finding for c in checks])
        if checks and (findings[:1] != b'"' or findings.count(b'\0"') != len(checks) - 1):
            raise _InvalidContentError(Cause.MALFORMED, "malformed gpudiag.check/1 output: a finding that is not text")
        keys = CHECK_REQUIRED + sum(getattr(doc, f) is not UNSET for f in CHECK_OPTIONAL)
        keys += ITEM_KEYS * len(checks)
        if doc.gpus is not UNSET:
            keys += GPU_KEYS * len(doc.gpus)
        if doc.diagnostics is not UNSET:
            keys = None
    else:
        checks = CHECKS.decode(doc.checks)
    ids = {c.id for c in checks}
    if not ids <= _valid_ids:
        for cid in ids - _valid_ids:
            if not _CHECK_ID.fullmatch(cid):
                raise _InvalidContentError(
                    Cause.MALFORMED, f"malformed gpudiag.check/1 output: {cid[:60]!r} is not a check id"
                )
        if len(_valid_ids) < 10_000:  # bounded, whatever the files hold
            _valid_ids.update(ids)
    statuses = [c.status for c in checks]
    counts = (statuses.count("PASS"), statuses.count("WARN"), statuses.count("FAIL"), statuses.count("SKIP"))
    strict = doc.strict is True
    failing = ("FAIL", "WARN") if strict else ("FAIL",)
    code = check_code(bool(counts[2] or (strict and counts[1])), bool(doc.could_not_run), counts[3] < len(statuses))
    _consistent(doc, code, counts)
    failed = [c for c in checks if c.status in failing] if code is ExitCode.FAILED else []
    gpus: list[FullCheckGpu] | list[CheckGpu] = [] if doc.gpus is UNSET else doc.gpus
    if keys is not None:
        keys += len(doc.versions) + 4 * (doc.summary is not UNSET)
    colons: tuple[int, bool] | None = None
    if keys is not None and isinstance(doc, CheckFile):  # and the colons of the strings decoded
        keys += findings.count(b":")  # as written
        decoded = sum(s.count(":") for s in doc.could_not_run)
        decoded += sum(key.count(":") + value.count(":") for key, value in doc.versions.items())
        decoded += sum(v.count(":") for v in (doc.source, doc.host, doc.slurm_node) if isinstance(v, str))
        colons = (keys + decoded, decoded > 0)
    failures = [_failure(c, gpus) for c in failed]
    # What could not run (the torch probe, the functional test's child) or a run in which every check
    # was skipped leaves the verdict UNKNOWN: not ready for the job, but no proof against the node,
    # so not drained for it, and never a reason to resume it either.
    failures += [Failure("gpudiag.could_not_run", "", note, "job") for note in doc.could_not_run]
    if code is ExitCode.NOTHING_CHECKED:
        failures.append(_NOTHING_CHECKED)
    verified = code is ExitCode.OK and any(c.status != "SKIP" and _scope(c) == "node" for c in checks)
    versions = {
        key: value.split("  (", 1)[0]  # "2.5.1+cu124  (files only: ...)"
        for key, value in doc.versions.items()
        if key in VERSION_FIELDS and value != "N/A"
    }
    names, metrics, rem = gpu_figures(gpus)
    names = _shared("gpus", names)
    deep: dict[str, int] = {}
    if gpus and has_deep(gpus[0]):  # check --level 2-4
        deep = deep_figures(gpus, metrics)
    kept = _shared("checks", worst_statuses((c.id, c.status) for c in checks)) if keep_checks else ()
    node = NodeFile(
        path,
        host,
        Kind.CHECK,
        "",
        doc.verdict,
        tuple(_shared("failure", f) for f in failures),
        _shared("versions", versions, tuple(versions.items())),
        names,
        metrics,
        rem,
        kept,
        node_verified=verified,
    )
    return (replace(node, figure_gpus=deep) if deep else node), colons


_NOTHING_CHECKED = Failure("gpudiag.nothing_checked", "", "nothing was checked: every check was skipped", "job")


def _consistent(doc: CheckFile | OlderCheckFile, code: ExitCode, counts: tuple[int, int, int, int]) -> None:
    """The file's verdict, exit code and summary are the ones its results give, or it is unreadable."""
    given = CHECK_VERDICTS[code]
    if doc.verdict != given:
        raise _InvalidContentError(
            Cause.CONTRADICTS,
            f"verdict {doc.verdict} contradicts its own results, which give {given} (edited or corrupted?)",
        )
    if doc.exit_code is not UNSET and doc.exit_code != code:
        raise _InvalidContentError(
            Cause.CONTRADICTS,
            f"exit_code {doc.exit_code} contradicts its verdict {given}, which is exit {int(code)}"
            " (edited or corrupted?)",
        )
    summary = doc.summary
    if summary is not UNSET and (summary.passed, summary.warned, summary.failed, summary.skipped) != counts:
        raise _InvalidContentError(
            Cause.CONTRADICTS,
            "summary {} contradicts its own results, which are {} (edited or corrupted?)".format(
                *(
                    ", ".join(f"{n} {word}" for n, word in zip(c, ("pass", "warn", "fail", "skip"), strict=True))
                    for c in ((summary.passed, summary.warned, summary.failed, summary.skipped), counts)
                )
            ),
        )


def _scope(c: FullCheckItem | CheckItem) -> str:
    """A result's scope: as the file gives it, else the check's declaration (an unknown check is the node's)."""
    if c.scope is not None:
        return c.scope
    from gpudiag.checks.rules import BY_ID

    declared = BY_ID.get(c.id)
    return declared.scope.value if declared else "node"


_SEVERITY = {"FAIL": 3, "WARN": 2, "PASS": 1, "SKIP": 0}


def worst_statuses(results: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """(check id, its worst status) per check, in order of first appearance."""
    worst: dict[str, str] = {}
    for cid, status in results:
        if cid not in worst or _SEVERITY.get(status, 0) > _SEVERITY.get(worst[cid], 0):
            worst[cid] = status
    return tuple(_shared("result", item) for item in worst.items())


def _failure(c: FullCheckItem | CheckItem, gpus: list[FullCheckGpu] | list[CheckGpu]) -> Failure:
    """A failed check result, with its scope and action (from the file, else from the check's
    declaration; an unknown check is node-scope) and the UUID of the GPU it is about."""
    from gpudiag.checks.rules import BY_ID

    declared = BY_ID.get(c.id)
    scope = c.scope or (declared.scope.value if declared else "node")
    action = c.action or (declared.action.value if declared else "")
    uuid = ""
    target = c.target or ""
    if target.startswith("GPU ") and target[4:].isdigit():
        index = int(target[4:])
        uuid = next((g.uuid for g in gpus if g.index == index and g.uuid), "")
    return Failure(_shared("id", c.id), target, _text(c.finding), scope, action, uuid)


_TEXT = msgspec.json.Decoder(str)


def _text(finding: str | msgspec.Raw) -> str:
    """A finding as text (a full result keeps its JSON until it is needed); one that is not a string
    makes the file malformed."""
    if isinstance(finding, str):
        return finding
    try:
        return _TEXT.decode(finding)
    except msgspec.ValidationError as exc:
        raise _InvalidContentError(Cause.MALFORMED, f"malformed gpudiag.check/1 output: {exc} in a finding") from None


def _snapshot(doc: SnapshotFile, path: str, keep_checks: bool) -> tuple[NodeFile, None]:
    host = _node_name(doc, path)
    versions = {}
    if driver := _known(doc.nvml.driver_version):
        versions["Driver"] = driver
    if cuda := _known(doc.nvml.cuda_driver_version):
        versions["CUDA (driver max)"] = f"{cuda // 1000}.{cuda % 1000 // 10}"
    for torch in (doc.torch_runtime, doc.torch_build):  # what ran, else what is installed
        if torch is not None and torch.unavailable is None and torch.version:
            versions["torch"] = torch.version
            if torch.cuda:
                versions["torch CUDA build"] = torch.cuda
            break
    gpus = []
    for g in doc.gpus:
        ecc = g.ecc_errors or Ecc()
        rows = g.remapped_rows if g.remapped_rows is not None and g.remapped_rows.unavailable is None else None
        pages = g.retired_pages if g.retired_pages is not None and g.retired_pages.unavailable is None else None
        name = _known(g.name)
        gpus.append(
            CheckGpu(
                name=name if isinstance(name, str) else None,
                temperature_c=_known(g.temperature_c),
                ecc_aggregate_corrected=_known(ecc.aggregate_corrected),
                ecc_aggregate_uncorrected=_known(ecc.aggregate_uncorrected),
                remapped_rows_correctable=rows.correctable if rows else None,
                remapped_rows_uncorrectable=rows.uncorrectable if rows else None,
                remap_pending=rows.pending if rows else None,
                retired_pages=pages.single_bit + pages.double_bit if pages else None,
                recovery_action=_known(g.recovery_action),
            )
        )
    names, metrics, rem = gpu_figures(gpus)
    names = _shared("gpus", names)
    shared = _shared("versions", versions, tuple(versions.items()))
    return NodeFile(path, host, Kind.SNAPSHOT, "", None, (), shared, names, metrics, rem), None


def _bench(doc: BenchFile, path: str, keep_checks: bool) -> tuple[NodeFile, None]:
    host = _node_name(doc, path)
    failures = [
        Failure("bench-transfer", f"cuda:{f.cuda_device}" if f.cuda_device is not None else "", f.message)
        for f in doc.findings
        if f.severity != "info"  # what makes bench-transfer exit 1: wrong data, below expected, cut short
    ]
    if not doc.complete:
        failures.append(Failure("bench-transfer", "", "the benchmark did not complete"))
    # Per mode and device, the rate at the largest size measured.
    best: dict[tuple[str, int], tuple[int, float]] = {}
    for r in doc.results:
        key = (r.mode, r.cuda_device)
        if r.median_bytes_per_s is not None and (key not in best or r.size_bytes > best[key][0]):
            best[key] = (r.size_bytes, r.median_bytes_per_s)
    metrics = {}
    for metric, modes in _BANDWIDTH_MODES.items():
        for mode in modes:
            rates = [rate for (m, _), (_, rate) in best.items() if m == mode]
            if rates:
                metrics[metric] = min(rates) / 1e9  # the slowest GPU, GB/s
                break
    names = _shared("gpus", tuple(d.name or "unknown GPU" for d in doc.devices))
    return NodeFile(path, host, Kind.BENCH, "", None, tuple(failures), {}, names, metrics), None


def _memory(doc: MemoryFile, path: str, keep_checks: bool) -> tuple[NodeFile, None]:
    host = _node_name(doc, path)
    names = _shared("gpus", tuple(n if isinstance(n := _known(g.name), str) else "unknown GPU" for g in doc.gpus))
    return NodeFile(path, host, Kind.MEMORY, gpus=names), None


_READERS: dict[type, Any] = {
    CheckFile: _check,
    OlderCheckFile: _check,
    SnapshotFile: _snapshot,
    BenchFile: _bench,
    MemoryFile: _memory,
    MemoryFileV1: _memory,
}
