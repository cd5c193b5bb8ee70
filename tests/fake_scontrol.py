"""A fake `scontrol` on PATH for `gpudiag drain` and the scheduler scripts: `show node`, `update`.

It answers in Slurm 22.05's format (checked against the real one in tests/test_slurm.py), keeps
the cluster in a JSON file, and logs every call's exact argv (one JSON list per line), so a test
sees what gpudiag ran. Like the real one it reads ``NodeName=`` as a hostlist: ``gpu[1-3]``
updates three nodes, so a test catches a node name passed as syntax. Installed as a small shell
script that runs this file.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

SHOW_NODE = """\
NodeName={name} Arch=x86_64 CoresPerSocket=1
   CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=0.01
   AvailableFeatures=(null)
   ActiveFeatures=(null)
   Gres=gpu:8
   NodeAddr={name} NodeHostName={name} Version=22.05.8
   RealMemory=1 AllocMem=0 FreeMem=20535 Sockets=2 Boards=1
   State={state} ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=debug
   CfgTRES=cpu=2,mem=1M,billing=2
   AllocTRES=
{reason}
"""


def main(state_file: str, log_file: str, fail_updates: bool, args: list[str], fail_show: bool = False) -> int:
    with open(log_file, "a") as log:
        log.write(json.dumps(args) + "\n")
    nodes = json.loads(Path(state_file).read_text())
    words = [a for a in args if a not in ("--all", "-a", "--oneliner", "-o")]
    if words[:2] == ["show", "node"]:
        if fail_show:  # Slurm 22.05's words when slurmctld does not answer
            print("slurm_load_node error: Unable to contact slurm controller (connect failure)", file=sys.stderr)
            return 1
        names = words[2:3] or list(nodes)
        if any(n not in nodes for n in names):
            print(f"Node {names[0]} not found")
            return 1
        out = []
        for name in names:
            node = nodes[name]
            reason = f"   Reason={node['reason']} [root@{node['since']}]" if node["reason"] else ""
            out.append(SHOW_NODE.format(name=name, state=node["state"], reason=reason).replace("\n\n", "\n"))
        sys.stdout.write("\n".join(out) + "\n")
        return 0
    if words[:1] == ["update"]:
        fields = dict(a.split("=", 1) for a in words[1:])
        targets = _expand(fields.get("NodeName", ""))
        if fail_updates or not targets or any(n not in nodes for n in targets):
            print("slurm_update error: Invalid node name specified", file=sys.stderr)
            return 1
        for name in targets:
            node = nodes[name]
            if fields.get("State") == "DRAIN":
                node["state"] = node["state"].split("+")[0] + "+DRAIN"
                node["reason"], node["since"] = fields["Reason"], time.strftime("%Y-%m-%dT%H:%M:%S")
            elif fields.get("State") == "RESUME":
                node["state"], node["reason"] = node["state"].split("+")[0], ""
        Path(state_file).write_text(json.dumps(nodes))
        return 0
    print(f"fake scontrol: not faked: {args}", file=sys.stderr)
    return 2


def _expand(expression: str) -> list[str]:
    import hostlist

    try:
        return list(hostlist.expand_hostlist(expression))
    except hostlist.BadHostlist:
        return []


@dataclass
class FakeSlurm:
    bindir: Path
    state_file: Path
    log_file: Path

    def nodes(self) -> dict[str, dict[str, str]]:
        data: dict[str, dict[str, str]] = json.loads(self.state_file.read_text())
        return data

    def calls(self) -> list[list[str]]:
        if not self.log_file.exists():
            return []
        return [json.loads(line) for line in self.log_file.read_text().splitlines()]

    def updates(self) -> list[list[str]]:
        return [c for c in self.calls() if c[:1] == ["update"]]

    def set(self, node: str, state: str, reason: str = "", since: str = "2026-11-23T07:19:25") -> None:
        nodes = self.nodes()
        nodes[node] = {"state": state, "reason": reason, "since": since}
        self.state_file.write_text(json.dumps(nodes))

    @property
    def path(self) -> str:
        """PATH with this fake first."""
        import os

        return f"{self.bindir}:{os.environ['PATH']}"


def install(
    directory: Path,
    nodes: dict[str, tuple[str, str]],
    fail_updates: bool = False,
    since: str = "2026-11-23T07:19:25",
    fail_show: bool = False,
) -> FakeSlurm:
    """``nodes``: name -> (state, reason), the reasons set at ``since`` (local time, as Slurm
    prints it); ``fail_show``: `show node` fails as when the controller is unreachable. Put
    ``result.bindir`` first on PATH."""
    bindir = directory / "fake-slurm-bin"
    bindir.mkdir(parents=True)
    state_file, log_file = directory / "slurm-state.json", directory / "scontrol.log"
    state_file.write_text(json.dumps({n: {"state": s, "reason": r, "since": since} for n, (s, r) in nodes.items()}))
    script = bindir / "scontrol"
    here = Path(__file__).resolve()
    flags = f"{int(fail_updates)}{'s' if fail_show else ''}"
    script.write_text(f'#!/bin/sh\nexec {sys.executable} {here} {state_file} {log_file} {flags} "$@"\n')
    script.chmod(0o755)
    return FakeSlurm(bindir, state_file, log_file)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3][0] == "1", sys.argv[4:], sys.argv[3].endswith("s")))
