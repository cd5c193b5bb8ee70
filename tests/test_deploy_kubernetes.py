"""deploy/kubernetes/: what `kubectl apply` would get, checked offline.

- every rendered manifest is valid against the Kubernetes schemas (kubernetes-validate, strict);
- the rendered files are what kustomize renders from the kustomizations (where kustomize, or
  kubectl with it built in, is installed: `render.sh` wrote them);
- each kustomization states its Pod Security level, and that is the strictest level its pods
  meet under tests/pod_security.py (the Pod Security Standards' baseline and restricted rules);
- prometheus-operator's PodMonitor and ServiceMonitor are not in kubernetes-validate's schemas:
  their shape is checked against a small schema of the CRD fields they use (below), and their
  selectors and ports against the exporter's;
- the DaemonSets run what the Dockerfile builds, with arguments the exporter takes, and the NPD
  plugin's command speaks the plugin protocol on example machines;
- docs/kubernetes.md's table of privileges says what the manifests do.
"""

from __future__ import annotations

import copy
import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests import pod_security
from tests.conftest import Cli

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy" / "kubernetes"
yaml = pytest.importorskip("yaml")
kubernetes_validate = pytest.importorskip("kubernetes_validate")

# Rendered file -> the kustomization it is rendered from (render.sh).
RENDERED = {
    "gpudiag-exporter.yaml": "overlays/full",
    "gpudiag-exporter-minimal.yaml": "overlays/minimal",
    "gpudiag-node-problem-detector.yaml": "node-problem-detector",
}
MONITORS = ("prometheus-operator/podmonitor.yaml", "prometheus-operator/servicemonitor.yaml")


def documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


def one(name: str, kind: str) -> dict[str, Any]:
    (found,) = [d for d in documents(name) if d["kind"] == kind]
    return found


def pod_of(name: str) -> dict[str, Any]:
    return dict(one(name, "DaemonSet")["spec"]["template"]["spec"])


def container_of(name: str) -> dict[str, Any]:
    (container,) = pod_of(name)["containers"]
    return dict(container)


def arg(container: dict[str, Any], option: str) -> str:
    return next(a.split("=", 1)[1] for a in container["args"] if a.startswith(option + "="))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(RENDERED))
def test_rendered_manifests_validate_against_the_kubernetes_schema(name: str) -> None:
    for doc in documents(name):
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)


def test_the_schema_check_can_fail() -> None:
    daemonset = one("gpudiag-exporter.yaml", "DaemonSet")
    daemonset["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["readOnly"] = "yes"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(daemonset, kubernetes_validate.latest_version(), strict=True)


def kustomize() -> list[str] | None:
    if shutil.which("kustomize"):
        return ["kustomize", "build"]
    if shutil.which("kubectl"):
        return ["kubectl", "kustomize"]
    return None


@pytest.mark.slow
@pytest.mark.parametrize(("name", "source"), sorted(RENDERED.items()))
def test_rendered_files_are_what_kustomize_renders(name: str, source: str) -> None:
    command = kustomize()
    if command is None:
        pytest.skip("neither kustomize nor kubectl is installed: the rendered files are checked as they are")
    done = subprocess.run([*command, str(DEPLOY / source)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert [d for d in yaml.safe_load_all(done.stdout) if d] == documents(name), "run deploy/kubernetes/render.sh"


def stated_level(source: str) -> tuple[str, str]:
    """The Pod Security level a kustomization's header states, and the sentence that says it."""
    text = (DEPLOY / source / "kustomization.yaml").read_text()
    comment = " ".join(line.lstrip("# ") for line in text.splitlines() if line.startswith("#"))
    match = re.search(r"Pod Security level: (\w+)(.*?)(?:\.|$)", comment)
    assert match, f"{source}/kustomization.yaml does not state its Pod Security level"
    return match.group(1), match.group(0)


@pytest.mark.parametrize(("name", "source"), sorted(RENDERED.items()))
def test_each_kustomization_states_the_pod_security_level_its_pods_meet(name: str, source: str) -> None:
    level, sentence = stated_level(source)
    for daemonset in (d for d in documents(name) if d["kind"] == "DaemonSet"):
        template = daemonset["spec"]["template"]
        met = pod_security.level(template["spec"], template["metadata"].get("annotations"))
        assert met == level, (source, met, pod_security.violations(template["spec"], "restricted"))
    if level == "privileged":  # it must say why
        assert "because" in sentence, sentence
    namespaces = [d for d in documents(name) if d["kind"] == "Namespace"]
    for namespace in namespaces:  # the namespace enforces what the kustomization states
        assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == level


def test_the_overlays_are_the_least_and_the_most_privileged() -> None:
    assert stated_level("overlays/minimal")[0] == "restricted"
    assert stated_level("overlays/full")[0] == "privileged"
    assert stated_level("node-problem-detector")[0] == "restricted"
    # The base itself (the minimal overlay adds only the namespace's label) meets restricted.
    assert pod_security.level(pod_of("gpudiag-exporter-minimal.yaml")) == "restricted"


def test_every_pod_security_rule_can_fail() -> None:
    """One change per rule to the restricted pod, each caught at the level the standard puts it."""
    pod = pod_of("gpudiag-exporter-minimal.yaml")
    assert pod_security.level(pod) == "restricted"

    def changed(edit: Any) -> dict[str, Any]:
        other = copy.deepcopy(pod)
        edit(other, other["containers"][0].setdefault("securityContext", {}))
        return other

    baseline_breaks = {
        "hostNetwork": lambda p, c: p.update(hostNetwork=True),
        "hostPID": lambda p, c: p.update(hostPID=True),
        "hostIPC": lambda p, c: p.update(hostIPC=True),
        "privileged": lambda p, c: c.update(privileged=True),
        "SYS_ADMIN": lambda p, c: c.update(capabilities={"drop": ["ALL"], "add": ["SYS_ADMIN"]}),
        "hostPath": lambda p, c: p.update(volumes=[{"name": "h", "hostPath": {"path": "/"}}]),
        "hostPort": lambda p, c: p["containers"][0]["ports"][0].update(hostPort=9401),
        "hostProcess": lambda p, c: c.update(windowsOptions={"hostProcess": True}),
        "appArmor": lambda p, c: c.update(appArmorProfile={"type": "Unconfined"}),
        "seLinux": lambda p, c: c.update(seLinuxOptions={"type": "spc_t"}),
        "procMount": lambda p, c: c.update(procMount="Unmasked"),
        "seccomp": lambda p, c: c.update(seccompProfile={"type": "Unconfined"}),
        "sysctl": lambda p, c: p["securityContext"].update(sysctls=[{"name": "kernel.msgmax", "value": "1"}]),
    }
    for name, edit in baseline_breaks.items():
        assert pod_security.level(changed(edit)) == "privileged", name
    restricted_breaks = {
        "volume": lambda p, c: p.update(volumes=[{"name": "n", "nfs": {"server": "x", "path": "/"}}]),
        "escalation": lambda p, c: c.pop("allowPrivilegeEscalation"),
        "runAsNonRoot": lambda p, c: p["securityContext"].pop("runAsNonRoot"),
        "runAsUser 0": lambda p, c: c.update(runAsUser=0),
        "seccomp unset": lambda p, c: p["securityContext"].pop("seccompProfile"),
        "drop ALL": lambda p, c: c.update(capabilities={"drop": ["NET_RAW"]}),
        "add CHOWN": lambda p, c: c.update(capabilities={"drop": ["ALL"], "add": ["CHOWN"]}),
    }
    for name, edit in restricted_breaks.items():
        assert pod_security.level(changed(edit)) == "baseline", name
    annotated = pod_security.level(pod, {"container.apparmor.security.beta.kubernetes.io/exporter": "unconfined"})
    assert annotated == "privileged"


def dockerfile_entrypoint(stage: str) -> list[str]:
    from tests.test_dockerfile import stage as dockerfile_stage

    return list(json.loads(dict(dockerfile_stage(stage))["ENTRYPOINT"]))


@pytest.mark.parametrize("name", ["gpudiag-exporter.yaml", "gpudiag-exporter-minimal.yaml"])
def test_the_exporter_runs_the_image_on_gpu_nodes_only_within_limits(name: str) -> None:
    from gpudiag import __version__
    from gpudiag.cli.exporter_cmd import DEFAULT_PORT

    pod, container = pod_of(name), container_of(name)
    assert container["image"] == f"gpudiag:{__version__}"
    assert container["command"] == dockerfile_entrypoint("exporter") and container["args"][0] == "exporter"
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    keys = {e["key"]: e["values"] for term in terms for e in term["matchExpressions"]}
    assert keys == {"nvidia.com/gpu.present": ["true"], "feature.node.kubernetes.io/pci-10de.present": ["true"]}
    assert pod["runtimeClassName"] == "nvidia" and pod["automountServiceAccountToken"] is False
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert env["NVIDIA_DRIVER_CAPABILITIES"]["value"] == "utility"
    assert "nvidia.com/gpu" not in container["resources"]["limits"]  # it must not take a GPU away
    assert {"cpu", "memory"} <= set(container["resources"]["limits"]) <= set(container["resources"]) | {"cpu", "memory"}
    assert container["ports"] == [{"name": "metrics", "containerPort": DEFAULT_PORT, "protocol": "TCP"}]
    assert arg(container, "--port") == str(DEFAULT_PORT) and arg(container, "--bind") == "$(POD_IP)"
    # Ready whenever the exporter answers (a broken GPU stays a target); restarted only when it hangs.
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "metrics"}
    security = container["securityContext"]
    assert security["privileged"] is False and security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True and security["capabilities"]["drop"] == ["ALL"]
    assert all(m["readOnly"] is True for m in container.get("volumeMounts", []))


def test_full_attribution_asks_the_kubelet_through_its_mounted_socket() -> None:
    pod, container = pod_of("gpudiag-exporter.yaml"), container_of("gpudiag-exporter.yaml")
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["pod-resources"]["hostPath"]["path"] == "/var/lib/kubelet/pod-resources"
    assert arg(container, "--kubelet-socket") == mounts["pod-resources"] + "/kubelet.sock"
    assert pod["hostPID"] is True and container["securityContext"]["capabilities"]["add"] == ["SYS_PTRACE"]
    assert pod["securityContext"]["runAsUser"] == 0
    assert "--no-kubelet" in container_of("gpudiag-exporter-minimal.yaml")["args"]


@pytest.mark.parametrize("name", ["gpudiag-exporter.yaml", "gpudiag-exporter-minimal.yaml"])
def test_exporter_args_parse(cli: Cli, name: str) -> None:
    """The DaemonSet's arguments are options the exporter has (run once on a replay)."""
    args = [a.replace("$(POD_IP)", "127.0.0.1") for a in container_of(name)["args"]]
    args = [a for a in args if not a.startswith("--kubelet-socket")]  # no kubelet here
    if "--no-kubelet" not in args:
        args.append("--no-kubelet")
    code, out, err = cli.replay("h100x8-healthy", *args, "--once", env={"NODE_NAME": "gpu-node-7"})
    assert code == 0, err
    assert "gpudiag_gpu_info" in out


# --- prometheus-operator -----------------------------------------------------------------------

_RELABEL = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "sourceLabels": {"type": "array", "items": {"type": "string"}},
        "targetLabel": {"type": "string"},
        "action": {"enum": ["replace", "keep", "drop", "labelmap", "labeldrop", "labelkeep", "hashmod"]},
        "regex": {"type": "string"},
        "replacement": {"type": "string"},
    },
}
_ENDPOINT = {
    "type": "object",
    "additionalProperties": False,
    "required": ["port"],
    "properties": {
        "port": {"type": "string"},
        "path": {"type": "string"},
        "interval": {"type": "string", "pattern": "^[0-9]+[smh]$"},
        "scrapeTimeout": {"type": "string", "pattern": "^[0-9]+[smh]$"},
        "relabelings": {"type": "array", "items": _RELABEL},
    },
}


def _monitor(kind: str, endpoints: str) -> dict[str, Any]:
    """The fields of monitoring.coreos.com/v1 PodMonitor/ServiceMonitor these manifests use, as the
    prometheus-operator CRDs define them (anything else is refused, so a misspelt field fails)."""
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": "monitoring.coreos.com/v1"},
            "kind": {"const": kind},
            "metadata": {
                "type": "object",
                "required": ["name", "namespace"],
                "properties": {
                    "name": {"type": "string"},
                    "namespace": {"type": "string"},
                    "labels": {"type": "object"},
                },
            },
            "spec": {
                "type": "object",
                "additionalProperties": False,
                "required": ["selector", endpoints],
                "properties": {
                    "selector": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {"matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}},
                    },
                    "namespaceSelector": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {"matchNames": {"type": "array", "items": {"type": "string"}}},
                    },
                    endpoints: {"type": "array", "minItems": 1, "items": _ENDPOINT},
                },
            },
        },
    }


MONITOR_SCHEMAS = {
    "PodMonitor": _monitor("PodMonitor", "podMetricsEndpoints"),
    "ServiceMonitor": _monitor("ServiceMonitor", "endpoints"),
}


@pytest.mark.parametrize("name", MONITORS)
def test_monitors_have_the_shape_of_prometheus_operators_crds_and_select_the_exporter(name: str) -> None:
    import jsonschema

    (monitor,) = documents(name)
    jsonschema.validate(monitor, MONITOR_SCHEMAS[monitor["kind"]])
    broken = copy.deepcopy(monitor)
    endpoints = "podMetricsEndpoints" if monitor["kind"] == "PodMonitor" else "endpoints"
    broken["spec"][endpoints][0]["scrapeInterval"] = "30s"  # not a field of the CRD: the check can fail
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, MONITOR_SCHEMAS[monitor["kind"]])

    exporter = "gpudiag-exporter.yaml"
    daemonset, service = one(exporter, "DaemonSet"), one(exporter, "Service")
    spec = monitor["spec"]
    assert spec["namespaceSelector"]["matchNames"] == [daemonset["metadata"]["namespace"]]
    assert monitor["metadata"]["namespace"] == daemonset["metadata"]["namespace"]
    if monitor["kind"] == "PodMonitor":
        labels, ports = daemonset["spec"]["template"]["metadata"]["labels"], container_of(exporter)["ports"]
    else:
        labels, ports = service["metadata"]["labels"], service["spec"]["ports"]
        assert service["spec"]["selector"].items() <= daemonset["spec"]["template"]["metadata"]["labels"].items()
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    assert {e["port"] for e in spec[endpoints]} <= {p["name"] for p in ports}


# --- node-problem-detector ---------------------------------------------------------------------

NPD = "gpudiag-node-problem-detector.yaml"


def npd_config() -> dict[str, Any]:
    (text,) = one(NPD, "ConfigMap")["data"].values()
    return dict(json.loads(text))


def test_npd_config_keeps_a_permanent_gpudiag_problem_condition_with_a_current_message() -> None:
    config = npd_config()
    assert config["plugin"] == "custom"
    assert config["pluginConfig"]["max_output_length"] == 80
    assert config["pluginConfig"]["enable_message_change_based_condition_update"] is True
    assert [c["type"] for c in config["conditions"]] == ["GPUDiagProblem"]
    (rule,) = config["rules"]
    assert rule["type"] == "permanent" and rule["condition"] == "GPUDiagProblem"
    assert rule["args"][:2] == ["check", "--npd"]


def test_npd_finds_the_plugin_and_its_config_where_they_are() -> None:
    from gpudiag import __version__
    from tests.test_dockerfile import stage as dockerfile_stage

    (rule,) = npd_config()["rules"]
    links = [rest for kw, rest in dockerfile_stage("npd") if kw == "RUN" and "ln -s" in rest]
    assert links and f"/opt/gpudiag/bin/gpudiag {rule['path']}" in links[0]  # the npd image puts gpudiag there
    pod, container = pod_of(NPD), container_of(NPD)
    assert container["image"] == f"gpudiag-npd:{__version__}" and container["command"] == ["/node-problem-detector"]
    config_path = arg(container, "--config.custom-plugin-monitor")
    (mount,) = container["volumeMounts"]
    (volume,) = pod["volumes"]
    assert volume["name"] == mount["name"] and volume["configMap"]["name"] == one(NPD, "ConfigMap")["metadata"]["name"]
    assert config_path == f"{mount['mountPath']}/{next(iter(one(NPD, 'ConfigMap')['data']))}"
    assert {e["name"] for e in container["env"]} >= {"NODE_NAME", "NVIDIA_VISIBLE_DEVICES"}
    assert pod["runtimeClassName"] == "nvidia"
    account = one(NPD, "ServiceAccount")["metadata"]["name"]
    assert pod["serviceAccountName"] == account
    assert one(NPD, "ClusterRoleBinding")["subjects"][0]["name"] == account
    rules = {(r, v) for rule in one(NPD, "ClusterRole")["rules"] for r in rule["resources"] for v in rule["verbs"]}
    assert {("nodes", "get"), ("nodes/status", "patch"), ("events", "create")} <= rules


@pytest.mark.parametrize(("example", "code"), [("h100x8-training-64procs", 0), ("a100-ecc-errors", 1)])
def test_npd_rule_runs_as_written(cli: Cli, example: str, code: int) -> None:
    """The rule's arguments, on a busy healthy node (running processes are no problem) and a broken one."""
    (rule,) = npd_config()["rules"]
    got, out, err = cli.replay(example, *rule["args"])
    assert got == code, shlex.join(rule["args"]) + err
    assert len(out.splitlines()) == 1 and len(out.strip()) <= 80


# --- the docs' table of privileges ---------------------------------------------------------------

GUIDE = ROOT / "docs" / "kubernetes.md"
OVERLAYS = {"minimal": "gpudiag-exporter-minimal.yaml", "full": "gpudiag-exporter.yaml"}


def _added_caps(pod: dict[str, Any]) -> set[str]:
    return {
        cap
        for c in pod["containers"]
        for cap in (c.get("securityContext") or {}).get("capabilities", {}).get("add", [])
    }


PRIVILEGES = {
    "runtimeClassName: nvidia": lambda pod: pod.get("runtimeClassName") == "nvidia",
    "hostPath: /var/lib/kubelet/pod-resources": lambda pod: any(
        v.get("hostPath", {}).get("path") == "/var/lib/kubelet/pod-resources" for v in pod.get("volumes", [])
    ),
    "runAsUser: 0": lambda pod: pod.get("securityContext", {}).get("runAsUser") == 0,
    "hostPID: true": lambda pod: pod.get("hostPID") is True,
    "capabilities.add: SYS_PTRACE": lambda pod: "SYS_PTRACE" in _added_caps(pod),
}


def privilege_table() -> dict[str, dict[str, str]]:
    """docs/kubernetes.md's table: privilege (the first column's code) -> overlay -> yes/no (or the level)."""
    lines = GUIDE.read_text().split("<!-- privileges -->", 1)[1].strip().splitlines()
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    table = {}
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        key = cells[0].strip("`") if cells[0].startswith("`") else cells[0]
        table[key] = {overlay: cells[header.index(overlay)] for overlay in OVERLAYS}
    return table


def test_the_guides_table_of_privileges_says_what_the_manifests_do() -> None:
    table = privilege_table()
    assert set(table) == {*PRIVILEGES, "Pod Security level"}  # a row the test cannot check is a row that can lie
    for overlay, name in OVERLAYS.items():
        pod = pod_of(name)
        for privilege, has in PRIVILEGES.items():
            assert table[privilege][overlay] == ("yes" if has(pod) else "no"), (privilege, overlay)
        assert table["Pod Security level"][overlay] == pod_security.level(pod)
    # Whatever the full overlay adds to the minimal one that the Pod Security Standards care about is a row.
    full, minimal = pod_of(OVERLAYS["full"]), pod_of(OVERLAYS["minimal"])
    assert _added_caps(full) - _added_caps(minimal) == {"SYS_PTRACE"}
    assert {v["hostPath"]["path"] for v in full["volumes"] if "hostPath" in v} == {"/var/lib/kubelet/pod-resources"}
    assert set(pod_security.violations(full, "baseline")) == {
        "hostPID: true",
        "exporter: adds SYS_PTRACE",
        "volume pod-resources: hostPath",
    }
