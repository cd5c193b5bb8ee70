"""The Kubernetes Pod Security Standards, ``baseline`` and ``restricted``, as checks over a pod spec.

Written from the Pod Security Standards page (kubernetes.io/docs/concepts/security/
pod-security-standards/, policies as of v1.30+): each rule is one function that returns the
violations it finds. ``level`` says the strictest level a pod meets, as the API server's
admission would judge it; ``tests/test_deploy_kubernetes.py`` holds every manifest to the level
its overlay states, and proves each rule can fail.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

Spec = dict[str, Any]

BASELINE_CAPABILITIES = {
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
    "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}  # fmt: skip
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}  # fmt: skip
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
RESTRICTED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret",
}  # fmt: skip


def containers(pod: Spec) -> Iterator[Spec]:
    for kind in ("initContainers", "containers", "ephemeralContainers"):
        yield from pod.get(kind) or []


def _context(c: Spec) -> Spec:
    return dict(c.get("securityContext") or {})


def _pod_context(pod: Spec) -> Spec:
    return dict(pod.get("securityContext") or {})


# --- baseline -----------------------------------------------------------------------------------


def host_process(pod: Spec, annotations: Spec) -> list[str]:
    found = []
    if (_pod_context(pod).get("windowsOptions") or {}).get("hostProcess"):
        found.append("pod windowsOptions.hostProcess")
    found += [f"{c['name']}: windowsOptions.hostProcess" for c in containers(pod)
              if (_context(c).get("windowsOptions") or {}).get("hostProcess")]  # fmt: skip
    return found


def host_namespaces(pod: Spec, annotations: Spec) -> list[str]:
    return [f"{field}: true" for field in ("hostNetwork", "hostPID", "hostIPC") if pod.get(field)]


def privileged(pod: Spec, annotations: Spec) -> list[str]:
    return [f"{c['name']}: privileged" for c in containers(pod) if _context(c).get("privileged")]


def baseline_capabilities(pod: Spec, annotations: Spec) -> list[str]:
    return [
        f"{c['name']}: adds {cap}"
        for c in containers(pod)
        for cap in (_context(c).get("capabilities") or {}).get("add") or []
        if cap not in BASELINE_CAPABILITIES
    ]


def host_path_volumes(pod: Spec, annotations: Spec) -> list[str]:
    return [f"volume {v['name']}: hostPath" for v in pod.get("volumes") or [] if "hostPath" in v]


def host_ports(pod: Spec, annotations: Spec) -> list[str]:
    return [
        f"{c['name']}: hostPort {p['hostPort']}"
        for c in containers(pod)
        for p in c.get("ports") or []
        if p.get("hostPort")
    ]


def app_armor(pod: Spec, annotations: Spec) -> list[str]:
    found = []
    profiles = [("pod", (_pod_context(pod).get("appArmorProfile") or {}))]
    profiles += [(c["name"], _context(c).get("appArmorProfile") or {}) for c in containers(pod)]
    allowed = (None, "RuntimeDefault", "Localhost")
    found += [f"{who}: appArmorProfile {p['type']}" for who, p in profiles if p.get("type") not in allowed]
    for key, value in annotations.items():
        confined = value == "runtime/default" or str(value).startswith("localhost/")
        if key.startswith("container.apparmor.security.beta.kubernetes.io/") and not confined:
            found.append(f"annotation {key}: {value}")
    return found


def se_linux(pod: Spec, annotations: Spec) -> list[str]:
    found = []
    options = [("pod", _pod_context(pod).get("seLinuxOptions") or {})]
    options += [(c["name"], _context(c).get("seLinuxOptions") or {}) for c in containers(pod)]
    for who, o in options:
        if o.get("type", "") not in SELINUX_TYPES:
            found.append(f"{who}: seLinuxOptions.type {o['type']}")
        found += [f"{who}: seLinuxOptions.{field}" for field in ("user", "role") if o.get(field)]
    return found


def proc_mount(pod: Spec, annotations: Spec) -> list[str]:
    return [f"{c['name']}: procMount {_context(c)['procMount']}" for c in containers(pod)
            if _context(c).get("procMount") not in (None, "Default")]  # fmt: skip


def seccomp_not_unconfined(pod: Spec, annotations: Spec) -> list[str]:
    profiles = [("pod", _pod_context(pod).get("seccompProfile") or {})]
    profiles += [(c["name"], _context(c).get("seccompProfile") or {}) for c in containers(pod)]
    return [f"{who}: seccompProfile Unconfined" for who, p in profiles if p.get("type") == "Unconfined"]


def sysctls(pod: Spec, annotations: Spec) -> list[str]:
    return [f"sysctl {s['name']}" for s in _pod_context(pod).get("sysctls") or [] if s["name"] not in SAFE_SYSCTLS]


# --- restricted -----------------------------------------------------------------------------------


def volume_types(pod: Spec, annotations: Spec) -> list[str]:
    found = []
    for volume in pod.get("volumes") or []:
        kinds = set(volume) - {"name"}
        found += [f"volume {volume['name']}: {kind}" for kind in kinds if kind not in RESTRICTED_VOLUMES]
    return found


def privilege_escalation(pod: Spec, annotations: Spec) -> list[str]:
    return [f"{c['name']}: allowPrivilegeEscalation not false" for c in containers(pod)
            if _context(c).get("allowPrivilegeEscalation") is not False]  # fmt: skip


def run_as_non_root(pod: Spec, annotations: Spec) -> list[str]:
    pod_says = _pod_context(pod).get("runAsNonRoot")
    found = []
    for c in containers(pod):
        own = _context(c).get("runAsNonRoot")
        if own is False or (own is None and pod_says is not True):
            found.append(f"{c['name']}: runAsNonRoot not true")
    if pod_says is False:
        found.append("pod: runAsNonRoot false")
    return found


def run_as_user(pod: Spec, annotations: Spec) -> list[str]:
    found = ["pod: runAsUser 0"] if _pod_context(pod).get("runAsUser") == 0 else []
    return found + [f"{c['name']}: runAsUser 0" for c in containers(pod) if _context(c).get("runAsUser") == 0]


def seccomp_set(pod: Spec, annotations: Spec) -> list[str]:
    allowed = ("RuntimeDefault", "Localhost")
    pod_type = (_pod_context(pod).get("seccompProfile") or {}).get("type")
    found = []
    for c in containers(pod):
        own = (_context(c).get("seccompProfile") or {}).get("type")
        effective = own if own is not None else pod_type
        if effective not in allowed:
            found.append(f"{c['name']}: seccompProfile {effective}")
    return found


def restricted_capabilities(pod: Spec, annotations: Spec) -> list[str]:
    found = []
    for c in containers(pod):
        capabilities = _context(c).get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            found.append(f"{c['name']}: does not drop ALL")
        found += [f"{c['name']}: adds {cap}" for cap in capabilities.get("add") or [] if cap != "NET_BIND_SERVICE"]
    return found


Rule = Callable[[Spec, Spec], list[str]]
BASELINE: tuple[Rule, ...] = (
    host_process, host_namespaces, privileged, baseline_capabilities, host_path_volumes, host_ports, app_armor,
    se_linux, proc_mount, seccomp_not_unconfined, sysctls,
)  # fmt: skip
RESTRICTED: tuple[Rule, ...] = (
    *BASELINE, volume_types, privilege_escalation, run_as_non_root, run_as_user, seccomp_set, restricted_capabilities,
)  # fmt: skip
LEVELS = ("restricted", "baseline", "privileged")  # strictest first


def violations(pod: Spec, level: str, annotations: Spec | None = None) -> list[str]:
    rules = {"restricted": RESTRICTED, "baseline": BASELINE, "privileged": ()}[level]
    return [found for rule in rules for found in rule(pod, annotations or {})]


def level(pod: Spec, annotations: Spec | None = None) -> str:
    """The strictest Pod Security level the pod meets."""
    return next(name for name in LEVELS if not violations(pod, name, annotations))
