"""`list -q` grows linearly with the GPUs: how each GPU reaches each other one (N² NVML calls and
lines) is read and listed up to gpudiag.details.PEERS_READ_UP_TO GPUs; beyond, each GPU says how
many peers it has and `gpudiag topo` shows them. (nvidia-smi's own -q has no topology at all: the
H100 and H200 captures in docs/hardware/.) A 1,000-GPU snapshot printed 1.27 million lines."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpudiag.details import PEERS_READ_UP_TO
from gpudiag.replay import fixtures
from tests.conftest import Cli


def many_gpus(tmp_path: Path, n: int) -> Path:
    """The NVSwitch node's first GPU, details and all, ``n`` times (its recorded peers left out:
    the replay answers for every pair)."""
    data = json.loads(Path(fixtures.EXAMPLES_DIR, "h100x8-nvswitch.json").read_text())
    details = data["gpus"][0]["details"]
    details["affinity"]["peers"] = []
    data["gpus"] = [
        {
            "uuid": f"GPU-8e1f2a6c-4b7d-4c1e-9a3f-{i:012x}",
            "pci_bus_id": f"0000{i // 256:04X}:{i % 256:02X}:00.0",
            "minor_number": i,
            "details": details,
        }
        for i in range(n)
    ]
    path = tmp_path / f"gpus{n}.json"
    path.write_text(json.dumps(data))
    return path


def per_gpu_blocks(out: str) -> list[list[str]]:
    return [block.splitlines() for block in out.split("\nGPU 0000")[1:]]


@pytest.mark.slow
def test_each_gpu_prints_as_many_lines_however_many_gpus_there_are(cli: Cli, tmp_path: Path) -> None:
    outputs = {}
    for n in (PEERS_READ_UP_TO + 1, PEERS_READ_UP_TO + 4):
        code, out, err = cli.replay(str(many_gpus(tmp_path, n)), "list", "-q")
        assert (code, err) == (0, "")
        outputs[n] = out
    small, large = (per_gpu_blocks(out) for out in outputs.values())
    assert len(small) == PEERS_READ_UP_TO + 1 and len(large) == PEERS_READ_UP_TO + 4
    assert {len(b) for b in small[:-1]} == {len(b) for b in large[:-1]}  # the last block ends with the machine's
    first = large[0]
    topology = first.index("        Topology")
    assert [line.split(":")[0].strip() for line in first[topology + 1 : topology + 5]] == [
        "CPU Affinity",
        "NUMA Affinity",
        "GPU NUMA ID",
        "Peers",
    ]
    assert first[topology + 4].endswith(f": {PEERS_READ_UP_TO + 3} GPUs, not listed here: see gpudiag topo")
    assert outputs[PEERS_READ_UP_TO + 4].endswith(
        f"\nTopology\n{PEERS_READ_UP_TO + 4} GPUs: how each reaches each other one is `gpudiag topo`'s to show\n"
    )


@pytest.mark.slow
def test_up_to_the_limit_each_peer_is_listed_and_the_matrix_follows(cli: Cli, tmp_path: Path) -> None:
    code, out, _ = cli.replay(str(many_gpus(tmp_path, PEERS_READ_UP_TO)), "list", "-q")
    assert code == 0
    first = per_gpu_blocks(out)[0]
    assert sum(bool(re.match(r" +GPU \d+ +: ", line)) for line in first) == PEERS_READ_UP_TO - 1
    assert "\nTopology\n       GPU0  GPU1" in out and "Legend:" in out


@pytest.mark.slow
def test_beyond_the_limit_no_peer_is_read_and_allreduce_judges_no_path(tmp_path: Path) -> None:
    """What reads the details' topology (the deep checks' allreduce) takes peers not read for an
    unknown path, never for "no NVLink between them"."""
    import os

    from gpudiag.checks.deep.allreduce import expectation
    from gpudiag.sources import collect
    from gpudiag.values import FactGroup

    facts = frozenset({FactGroup.DETAILS, FactGroup.LINKS, FactGroup.PCIE})
    small = collect(os.path.join(fixtures.EXAMPLES_DIR, "h100x8-nvswitch.json"), os.environ, facts)
    path, gbps = expectation(small.gpus, [0, 1])
    assert path == "NVSwitch" and gbps  # up to the limit, the peers are read and judged
    large = collect(str(many_gpus(tmp_path, PEERS_READ_UP_TO + 1)), os.environ, facts)
    affinities = [g.details.value.affinity.value for g in large.gpus if g.details.value is not None]
    assert len(affinities) == PEERS_READ_UP_TO + 1 and all(a is not None and a.peers == () for a in affinities)
    assert expectation(large.gpus, [0, 1]) == ("", None)
