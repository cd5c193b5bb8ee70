"""What the deep diagnostics found: plain, typed data that the rules judge and `check --json` shows.

Every phase's result is ``None`` with a reason when it was not run. GPU indices are NVML's
(``gpu_index``, None when a torch device could not be matched to an NVML GPU); ``torch_index`` is the
child's ``cuda:N``.
"""

from __future__ import annotations

import msgspec

# Phases, in the order they run; XIDs and NVML samples are tagged with the phase they happened in.
MEMTEST, LINKS, ALLREDUCE, STRESS = "memtest", "links", "allreduce", "stress"


class MemoryCounters(msgspec.Struct, frozen=True):
    """NVML's memory error counters of one GPU at one moment (None: not supported or not read)."""

    ecc_corrected: int | None = None  # volatile: since the driver loaded
    ecc_uncorrected: int | None = None
    remapped_correctable: int | None = None
    remapped_uncorrectable: int | None = None
    remap_pending: bool | None = None
    retired_pages: int | None = None
    retirement_pending: bool | None = None

    def increases(self, after: MemoryCounters) -> list[str]:
        """What went up between this reading and ``after``, e.g. ``volatile uncorrected ECC 0 → 2``."""
        out = []
        for name, label in _COUNTERS:
            old, new = getattr(self, name), getattr(after, name)
            if old is not None and new is not None and new > old:
                out.append(f"{label} {int(old)} → {int(new)}")
        return out


_COUNTERS = (
    ("ecc_uncorrected", "volatile uncorrected ECC"),
    ("ecc_corrected", "volatile corrected ECC"),
    ("remapped_uncorrectable", "uncorrectable row remaps"),
    ("remapped_correctable", "correctable row remaps"),
    ("remap_pending", "row remap pending"),
    ("retired_pages", "retired pages"),
    ("retirement_pending", "page retirement pending"),
)


class Xid(msgspec.Struct, frozen=True):
    gpu_index: int
    xid: int
    phase: str


class PatternResult(msgspec.Struct, frozen=True):
    """One pattern on one GPU: how many words read back wrong, where, and which bits differed."""

    name: str
    mismatches: int
    first_address: int | None = None  # the GPU virtual address of the lowest / highest bad word
    last_address: int | None = None
    samples: tuple[tuple[int, int, int], ...] = ()  # (address, expected, read) of the first few
    bits: int = 0  # every bit that differed in the samples (expected XOR read, OR-ed)


class MemtestGpu(msgspec.Struct, frozen=True):
    gpu_index: int | None
    torch_index: int
    ok: bool  # the child finished this GPU without an exception
    error: str
    free_bytes: int = 0  # free when the test began (CUDA's view)
    total_bytes: int = 0
    tested_bytes: int = 0  # allocated and tested
    passes: int = 0
    seconds: float = 0.0
    bytes_moved: int = 0  # written and read, for the throughput figure
    patterns: tuple[PatternResult, ...] = ()
    before: MemoryCounters | None = None  # NVML, before and after the test
    after: MemoryCounters | None = None

    @property
    def mismatches(self) -> int:
        return sum(p.mismatches for p in self.patterns)

    @property
    def gbps(self) -> float | None:
        return self.bytes_moved / self.seconds / 1e9 if self.seconds > 0 and self.bytes_moved else None


class Memtest(msgspec.Struct, frozen=True):
    mode: str  # "short" (level 2) or "long" (level 4)
    patterns: tuple[str, ...]
    gpus: tuple[MemtestGpu, ...]
    cut_short: str = ""  # the run's budget ended the test: the GPUs not in ``gpus`` were not finished


class HostCopy(msgspec.Struct, frozen=True):
    """A pinned copy between host and one GPU, judged as `bench-transfer` judges it."""

    direction: str  # "h2d" or "d2h"
    nbytes: int
    gbps: float | None
    verdict: str  # bench's: "healthy", "below_expected", "not_judged"
    floor_gbps: float | None = None  # below this: below expected
    link_max: str | None = None  # "Gen5 x16": the lower of GPU and slot
    link_loaded: str | None = None  # what NVML said while the copy ran
    behaves_like: str | None = None
    cause: str = ""
    verified: bool | None = None
    error: str = ""


class PcieGpu(msgspec.Struct, frozen=True):
    gpu_index: int | None
    torch_index: int
    copies: tuple[HostCopy, ...]
    latency_us: dict[str, float] = msgspec.field(default_factory=dict)  # per direction, 4-byte copies


class PeerPair(msgspec.Struct, frozen=True):
    """One ordered pair of GPUs: peer copy bandwidth and latency, against what the topology allows."""

    src_torch: int
    dst_torch: int
    src_gpu: int | None
    dst_gpu: int | None
    access: bool | None  # CUDA peer access (cudaDeviceCanAccessPeer)
    gbps: float | None  # one direction, 256 MiB copies
    latency_us: float | None  # 4-byte copies
    verified: bool | None
    error: str = ""
    nvlinks: int | None = None  # NVML: active NVLinks between the two (through NVSwitches too)
    path: str | None = None  # NVML's common ancestor: PIX, PXB, PHB, NODE, SYS
    p2p_nvml: str | None = None  # NVML's P2P read status: "OK" or why not
    verdict: str = "not_judged"  # "healthy", "below_expected", "not_judged"
    floor_gbps: float | None = None
    note: str = ""


class D2dGpu(msgspec.Struct, frozen=True):
    gpu_index: int | None
    torch_index: int
    nbytes: int
    gbps: float | None
    verdict: str
    floor_gbps: float | None = None
    peak_gbps: float | None = None  # the memory's datasheet peak, bytes counted once (half of it)
    note: str = ""
    verified: bool | None = None
    error: str = ""


class Links(msgspec.Struct, frozen=True):
    pcie: tuple[PcieGpu, ...] | None  # None: not asked for
    peers: tuple[PeerPair, ...] | None
    d2d: tuple[D2dGpu, ...] | None
    failure: str = ""  # the benchmark child hung, crashed or failed: what it measured before stays
    devices: int = 0  # devices torch saw


class AllreduceSize(msgspec.Struct, frozen=True):
    nbytes: int
    seconds: float  # per all-reduce, averaged over the ranks (nccl-tests' default)

    @property
    def algbw_gbps(self) -> float:
        return self.nbytes / self.seconds / 1e9

    def busbw_gbps(self, ranks: int) -> float:
        """nccl-tests' bus bandwidth for all-reduce: algbw × 2(n−1)/n."""
        return self.algbw_gbps * 2 * (ranks - 1) / ranks


class Allreduce(msgspec.Struct, frozen=True):
    ranks: int
    backend: str
    sizes: tuple[AllreduceSize, ...]
    correct: bool | None  # the sum came out right on every rank
    error: str = ""
    path: str = ""  # "NVSwitch", "NVLink", "PCIe" or "" (unknown): what the topology offers
    expected_gbps: float | None = None  # the link's per-direction figure busbw is judged against
    gpu_indices: tuple[int | None, ...] = ()

    @property
    def largest(self) -> AllreduceSize | None:
        return max(self.sizes, key=lambda s: s.nbytes) if self.sizes else None


class GpuSamples(msgspec.Struct, frozen=True):
    """NVML read every second while a phase ran, reduced per GPU."""

    samples: int
    temperature_max_c: int | None = None
    power_max_w: float | None = None
    power_median_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_min_mhz: int | None = None
    sm_clock_median_mhz: int | None = None
    sm_clock_max_mhz: int | None = None
    events: dict[int, int] = msgspec.field(default_factory=dict)  # clock event bit -> samples that had it


class StressGpu(msgspec.Struct, frozen=True):
    gpu_index: int | None
    torch_index: int
    ok: bool
    error: str
    seconds: float = 0.0
    windows: int = 0  # timed windows of about a second each
    tflops_sustained: float | None = None  # median of the windows after the first 10 % (boost, warm-up)
    tflops_min: float | None = None
    tflops_first: float | None = None  # median of the first and last tenth: a GPU that heats up slows down
    tflops_last: float | None = None
    result_errors: int = 0  # re-computed products that differed from the first one
    checks: int = 0
    samples: GpuSamples | None = None
    before: MemoryCounters | None = None
    after: MemoryCounters | None = None
    dtype: str = ""  # what it multiplied: bfloat16 (sm_80+), float16 (sm_7x), float32


class Stress(msgspec.Struct, frozen=True):
    seconds: float  # planned
    dtype: str  # asked for: "auto" picks per GPU (StressGpu.dtype)
    n: int
    gpus: tuple[StressGpu, ...]
    cut_short: str = ""  # the run's budget ended the test early


class DeepFacts(msgspec.Struct, frozen=True):
    """Every phase's result, or why it was not run ("" when it ran or was not asked for)."""

    level: int
    memtest: Memtest | None = None
    memtest_why: str = ""
    links: Links | None = None
    links_why: str = ""
    allreduce: Allreduce | None = None
    allreduce_why: str = ""
    stress: Stress | None = None
    stress_why: str = ""
    xids: tuple[Xid, ...] = ()
    xid_watch: str = ""  # why XIDs were not watched ("" when they were)
