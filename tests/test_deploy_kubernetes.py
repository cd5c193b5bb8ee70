"""deploy/kubernetes/: valid against the Kubernetes schema (offline), least privilege, and an NPD
plugin config whose command speaks the plugin protocol."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli

DEPLOY = Path(__file__).resolve().parents[1] / "deploy" / "kubernetes"
yaml = pytest.importorskip("yaml")
kubernetes_validate = pytest.importorskip("kubernetes_validate")


def documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


@pytest.mark.parametrize("name", sorted(p.name for p in DEPLOY.glob("*.yaml")))
def test_manifests_validate_against_the_kubernetes_schema(name: str) -> None:
    for doc in documents(name):
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)


def test_the_schema_check_can_fail() -> None:
    (daemonset,) = [d for d in documents("gpudiag-exporter.yaml") if d["kind"] == "DaemonSet"]
    daemonset["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["readOnly"] = "yes"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(daemonset, kubernetes_validate.latest_version(), strict=True)


def test_exporter_daemonset_is_least_privilege() -> None:
    (ds,) = [d for d in documents("gpudiag-exporter.yaml") if d["kind"] == "DaemonSet"]
    pod = ds["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["privileged"] is False and security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True and security["capabilities"]["drop"] == ["ALL"]
    assert "add" not in security["capabilities"]
    assert pod["automountServiceAccountToken"] is False
    assert not pod.get("hostNetwork") and not pod.get("hostPID")
    assert "nvidia.com/gpu" not in container["resources"].get("limits", {})  # it must not take a GPU away
    assert {"cpu", "memory"} <= set(container["resources"]["limits"])
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert all(m["readOnly"] is True for m in mounts.values())
    assert volumes["pod-resources"]["hostPath"]["path"] == "/var/lib/kubelet/pod-resources"
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    args = container["args"]
    assert args[0] == "exporter"
    socket = next(a.split("=", 1)[1] for a in args if a.startswith("--kubelet-socket="))
    assert socket.startswith(mounts["pod-resources"]["mountPath"])
    proc_root = next(a.split("=", 1)[1] for a in args if a.startswith("--proc-root="))
    assert proc_root == mounts["host-proc"]["mountPath"]
    port = next(a.split("=", 1)[1] for a in args if a.startswith("--port="))
    assert container["ports"][0]["containerPort"] == int(port)
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"


def test_exporter_args_parse(cli: Cli) -> None:
    """The DaemonSet's arguments are options the exporter has (run once on a replay)."""
    (ds,) = [d for d in documents("gpudiag-exporter.yaml") if d["kind"] == "DaemonSet"]
    args = [a.replace("$(POD_IP)", "127.0.0.1") for a in ds["spec"]["template"]["spec"]["containers"][0]["args"]]
    args = [a for a in args if not a.startswith("--kubelet-socket")]  # no kubelet here
    code, out, err = cli.replay("h100x8-healthy", *args, "--no-kubelet", "--once", env={"NODE_NAME": "gpu-node-7"})
    assert code == 0, err
    assert "gpudiag_gpu_info" in out


def npd_config() -> dict[str, Any]:
    (config_map,) = documents("npd-gpudiag-plugin.yaml")
    (text,) = config_map["data"].values()
    return dict(json.loads(text))


def test_npd_config_keeps_a_permanent_gpudiag_problem_condition() -> None:
    config = npd_config()
    assert config["plugin"] == "custom"
    assert config["pluginConfig"]["max_output_length"] == 80
    assert [c["type"] for c in config["conditions"]] == ["GPUDiagProblem"]
    (rule,) = config["rules"]
    assert rule["type"] == "permanent" and rule["condition"] == "GPUDiagProblem"
    assert rule["path"].endswith("/gpudiag") and rule["args"][:2] == ["check", "--npd"]


@pytest.mark.parametrize(("example", "code"), [("h100x8-training-64procs", 0), ("a100-ecc-errors", 1)])
def test_npd_rule_runs_as_written(cli: Cli, example: str, code: int) -> None:
    """The rule's arguments, on a busy healthy node (running processes are no problem) and a broken one."""
    (rule,) = npd_config()["rules"]
    got, out, err = cli.replay(example, *rule["args"])
    assert got == code, shlex.join(rule["args"]) + err
    assert len(out.splitlines()) == 1 and len(out.strip()) <= 80
