"""A fake `scontrol` on PATH for the drain rules: `show node` and `update`, state in a JSON file.

It answers in Slurm 22.05's format (checked against the real one in tests/test_slurm.py) and
logs every call, so tests see exactly what gpudiag ran.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

SCRIPT = """#!{python}
import json, sys
state_file, log_file = {state!r}, {log!r}
args = sys.argv[1:]
with open(log_file, "a") as log:
    log.write(" ".join(args) + "\\n")
nodes = json.load(open(state_file))
if args[:2] == ["show", "node"]:
    node = nodes.get(args[2])
    if node is None:
        print(f"Node {{args[2]}} not found")
        sys.exit(1)
    print(f"NodeName={{args[2]}} Arch=x86_64 CoresPerSocket=1")
    print(f"   State={{node['state']}} ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A")
    if node["reason"]:
        print(f"   Reason={{node['reason']}} [admin@2026-11-23T07:19:46]")
    sys.exit(0)
if args[:1] == ["update"]:
    fields = dict(a.split("=", 1) for a in args[1:])
    node = nodes.get(fields.get("NodeName", ""))
    if node is None or {fail!r}:
        print("slurm_update error: Invalid node name specified", file=sys.stderr)
        sys.exit(1)
    if fields.get("State") == "DRAIN":
        node["state"] = node["state"].split("+")[0] + "+DRAIN"
        node["reason"] = fields["Reason"]
    elif fields.get("State") == "RESUME":
        node["state"], node["reason"] = node["state"].split("+")[0], ""
    json.dump(nodes, open(state_file, "w"))
    sys.exit(0)
sys.exit(2)
"""


@dataclass
class FakeSlurm:
    bindir: Path
    state_file: Path
    log_file: Path

    def nodes(self) -> dict[str, dict[str, str]]:
        data: dict[str, dict[str, str]] = json.loads(self.state_file.read_text())
        return data

    def calls(self) -> list[str]:
        return self.log_file.read_text().splitlines() if self.log_file.exists() else []

    def updates(self) -> list[str]:
        return [c for c in self.calls() if c.startswith("update")]


def install(directory: Path, nodes: dict[str, tuple[str, str]], fail_updates: bool = False) -> FakeSlurm:
    """``nodes``: name -> (state, reason). Put ``result.bindir`` first on PATH."""
    bindir = directory / "fake-slurm-bin"
    bindir.mkdir()
    state_file, log_file = directory / "slurm-state.json", directory / "scontrol.log"
    state_file.write_text(json.dumps({n: {"state": s, "reason": r} for n, (s, r) in nodes.items()}))
    script = bindir / "scontrol"
    script.write_text(SCRIPT.format(python=sys.executable, state=str(state_file), log=str(log_file), fail=fail_updates))
    script.chmod(0o755)
    return FakeSlurm(bindir, state_file, log_file)
