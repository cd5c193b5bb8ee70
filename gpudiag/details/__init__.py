"""The detail facts of a GPU that `nvidia-smi -q` shows beyond its summary table, and their readings.

One module per section of ``-q`` (:mod:`~gpudiag.details.clocks`, :mod:`~gpudiag.details.power`,
:mod:`~gpudiag.details.temperatures`, :mod:`~gpudiag.details.identity`,
:mod:`~gpudiag.details.memory_health`, :mod:`~gpudiag.details.pcie`, :mod:`~gpudiag.details.encoders`,
:mod:`~gpudiag.details.links`): each holds its Structs and its rows, so a reading is its field and its
row in one module. This one holds :class:`GpuDetails` with the rows of its own fields, and assembles
:data:`DETAIL_READINGS`.

Kept apart from :mod:`gpudiag.model` so that plain `gpudiag list` never pays for creating these
classes and rows: they load only when a command reads, shows or replays details. Frozen msgspec
Structs like the model's (a frozen dataclass costs ~1 ms at import). Every value is a
:class:`~gpudiag.values.Reading`, so a GPU that lacks one says why.
"""

from __future__ import annotations

import msgspec

from gpudiag.details import clocks, encoders, identity, memory_health, pcie, power, temperatures
from gpudiag.details.clocks import Clocks as Clocks
from gpudiag.details.clocks import ClockSet as ClockSet
from gpudiag.details.encoders import Codecs as Codecs
from gpudiag.details.identity import Fabric as Fabric
from gpudiag.details.identity import Identity as Identity
from gpudiag.details.identity import PlatformInfo as PlatformInfo
from gpudiag.details.links import PEERS_READ_UP_TO as PEERS_READ_UP_TO
from gpudiag.details.links import Affinity as Affinity
from gpudiag.details.links import NvLink as NvLink
from gpudiag.details.links import PeerLink as PeerLink
from gpudiag.details.memory_health import ECC_LOCATIONS as ECC_LOCATIONS
from gpudiag.details.memory_health import EccLocation as EccLocation
from gpudiag.details.memory_health import MemoryHealth as MemoryHealth
from gpudiag.details.memory_health import RowRemapHistogram as RowRemapHistogram
from gpudiag.details.memory_health import SramErrors as SramErrors
from gpudiag.details.pcie import PcieDetail as PcieDetail
from gpudiag.details.power import PowerDetail as PowerDetail
from gpudiag.details.row import detail
from gpudiag.details.temperatures import Temperatures as Temperatures
from gpudiag.spec import Codec, Spec
from gpudiag.values import Bar1, Reading


class ProcessLoad(msgspec.Struct, frozen=True):
    """One process's share of the GPU (nvmlDeviceGetProcessUtilization) and its host view."""

    pid: int
    sm_percent: int
    memory_percent: int
    encoder_percent: int
    decoder_percent: int
    sampled_at_us: int  # NVML's timestamp of the sample (µs; the cursor for the next read)
    cpu_percent: Reading[float]
    rss_bytes: Reading[int]
    started_at: Reading[float]  # unix time


class GpuDetails(msgspec.Struct, frozen=True):
    clocks: Clocks
    power: PowerDetail
    temperatures: Temperatures
    identity: Identity
    memory_health: MemoryHealth
    bar1: Reading[Bar1]
    pcie: PcieDetail
    codecs: Codecs
    nvlinks: Reading[tuple[NvLink, ...]]  # missing when the GPU has no NVLink (or links were not read)
    affinity: Reading[Affinity]
    # Per-process load; NOT_FOUND when no process ran since the last sample (NVML's answer).
    process_load: Reading[tuple[ProcessLoad, ...]]


BAR1 = Codec(
    lambda b: Bar1(int(b.bar1Total), int(b.bar1Used), int(b.bar1Free)),
    lambda b: {"bar1Total": b.total_bytes, "bar1Used": b.used_bytes, "bar1Free": b.free_bytes},
)

# The fields values of every row with a ``field`` are read first, in one nvmlDeviceGetFieldValues call;
# then the calls, section by section.
DETAIL_READINGS: tuple[Spec, ...] = (
    *temperatures.ROWS,
    *power.ROWS,
    *clocks.ROWS,
    *memory_health.ROWS,
    *identity.ROWS,
    detail("bar1", call="nvmlDeviceGetBAR1MemoryInfo", codec=BAR1),
    *pcie.ROWS,
    *encoders.ROWS,
    detail("nvlinks", call="nvmlDeviceGetNvLinkState", custom=True),  # each link, with FactGroup.LINKS
    detail("affinity", call="nvmlDeviceGetCpuAffinity", custom=True),  # topology to each peer, with LINKS
    detail("process_load", call="nvmlDeviceGetProcessUtilization", custom=True),
)
