"""The Dockerfile, kept honest without a registry (none is reachable here, so no image is built):
its pins and defaults are read from it, and its install steps are run for real.

``test_the_install_steps_give_a_working_exporter_and_npd_plugin`` runs every RUN of the wheel,
npd and exporter stages (the apt-get one excepted: system packages) as written, with the image's
paths mapped into a temporary directory, from a fresh virtual environment, then the images' commands.
The npd and exporter stages install gpudiag with the same commands (held by
``test_the_npd_stage_installs_gpudiag_as_the_exporter_stage_does``), and here with the same
interpreter, so that install runs once: the npd stage runs its own steps (the link its plugin
config names) on the exporter stage's environment. One setting is the test's own: PIP_COMPILE=0,
so that pip does not byte-compile what the stages install (2 of the 13 CPU-seconds the pinned
requirements take here). The same distributions and files are installed, less their .pyc caches,
which nothing here checks (pip ignores a file that fails to compile). The image's system Python
is a virtual environment given this interpreter's own pip (:func:`system_python`). What it cannot
prove: that the base images still exist under their tags, and that the image's Python (the same
minor version as the one running this test) behaves the same."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import venv
from collections.abc import Collection
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"
REQUIREMENTS = ROOT / "deploy" / "docker" / "requirements.txt"
BUILD_REQUIREMENTS = ROOT / "deploy" / "docker" / "build-requirements.txt"


def instructions(text: str) -> list[tuple[str, str, str]]:
    """(stage, KEYWORD, arguments) for every instruction, continuation lines joined."""
    out: list[tuple[str, str, str]] = []
    stage = ""
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        line, pending = pending + line, ""
        keyword, _, rest = line.partition(" ")
        if keyword.upper() == "FROM":
            stage = rest.split(" AS ")[-1].strip() if " AS " in rest else rest
        out.append((stage, keyword.upper(), rest.strip()))
    return out


def stage(name: str) -> list[tuple[str, str]]:
    return [(kw, rest) for st, kw, rest in instructions(DOCKERFILE.read_text()) if st == name]


def pins(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            requirement = Requirement(line)
            (spec,) = requirement.specifier
            assert spec.operator == "==", line  # exact pins only
            found[requirement.name.lower().replace("_", "-")] = spec.version
    return found


def test_bases_are_pinned_and_the_default_target_is_the_non_root_exporter() -> None:
    from gpudiag.cli.exporter_cmd import DEFAULT_PORT

    all_instructions = instructions(DOCKERFILE.read_text())
    images = [rest.split("=", 1)[1] for st, kw, rest in all_instructions if kw == "ARG" and "IMAGE=" in rest]
    assert images and all(":" in image and not image.endswith(":latest") for image in images)
    assert all(any(c.isdigit() for c in image.rsplit(":", 1)[1]) for image in images)  # a version, not a moving tag
    assert all_instructions[-1][0] == "exporter"  # the last stage: what a plain `docker build` makes
    exporter = dict(stage("exporter"))
    assert exporter["USER"] == "65532:65532"
    assert json.loads(exporter["ENTRYPOINT"]) == ["/opt/gpudiag/bin/gpudiag"]
    command = json.loads(exporter["CMD"])
    assert command[0] == "exporter" and f"--port={DEFAULT_PORT}" in command and "--bind=0.0.0.0" in command
    assert exporter["EXPOSE"] == str(DEFAULT_PORT)
    assert dict(stage("npd"))["USER"] == "65532:65532"


def test_the_pinned_runtime_satisfies_the_package_and_its_kubernetes_extra() -> None:
    """Every dependency of gpudiag[kubernetes] is pinned, at a version the package accepts."""
    from importlib.metadata import requires

    pinned = pins(REQUIREMENTS)
    wanted = [Requirement(line) for line in requires("gpudiag") or []]
    runtime = [r for r in wanted if r.marker is None or r.marker.evaluate({"extra": "kubernetes"})]
    assert {r.name for r in runtime} >= {"typer", "grpcio", "protobuf"}
    for requirement in runtime:
        name = requirement.name.lower().replace("_", "-")
        assert name in pinned, f"{name} is not pinned in {REQUIREMENTS.name}"
        assert requirement.specifier.contains(pinned[name]), (name, pinned[name], str(requirement.specifier))
    assert "hatchling" in pins(BUILD_REQUIREMENTS)


def mapped(command: str, paths: dict[str, Path]) -> str:
    """The command with the image's paths replaced by this test's (longest first)."""
    for image_path in sorted(paths, key=len, reverse=True):
        command = command.replace(image_path, str(paths[image_path]))
    return command


def steps(command: str) -> list[str]:
    """A RUN's commands, one per ``&&``."""
    return [step.strip() for step in command.split(" && ")]


def install_steps(name: str) -> list[str]:
    """The steps of the stage's one RUN that installs gpudiag (its virtual environment's)."""
    (install,) = [rest for keyword, rest in stage(name) if keyword == "RUN" and "-m venv /opt/gpudiag" in rest]
    return steps(install)


def installed_as_the_exporter_is() -> list[str]:
    """The npd stage's steps that are the exporter stage's: all but the link its plugin config names
    (its virtual environment made by ``python3``, Debian's name for the interpreter in that image)."""
    return [step for step in install_steps("npd") if not step.startswith("ln -s ")]


def test_the_npd_stage_installs_gpudiag_as_the_exporter_stage_does() -> None:
    npd, exporter = install_steps("npd"), install_steps("exporter")
    assert npd[0] == "python3 -m venv /opt/gpudiag" and exporter[0] == "python -m venv /opt/gpudiag"
    assert installed_as_the_exporter_is()[1:] == exporter[1:]
    assert [step for step in npd if step not in installed_as_the_exporter_is()] == [
        "ln -s /opt/gpudiag/bin/gpudiag /usr/local/bin/gpudiag"
    ]


def run_stage(
    name: str, paths: dict[str, Path], cwd: Path, env: dict[str, str], done: Collection[str] = ()
) -> list[str]:
    """Run a stage's RUN instructions, less the steps in ``done`` (another stage's, run already);
    returns the instructions not run (apt-get), checked by the caller."""
    skipped = []
    for keyword, rest in stage(name):
        if keyword != "RUN":
            continue
        if rest.startswith("apt-get "):
            skipped.append(rest)
            continue
        command = " && ".join(step for step in steps(rest) if step not in done)
        done_here = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", mapped(command, paths)],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done_here.returncode == 0, (
            f"{name}: RUN {command}\n{done_here.stdout[-3000:]}\n{done_here.stderr[-3000:]}"
        )
    return skipped


def site_packages(environment: Path) -> Path:
    (found,) = environment.glob("lib/python3*/site-packages")
    return found


def system_python(root: Path) -> Path:
    """A fresh virtual environment whose pip is this interpreter's own, on its path through a .pth
    that names a directory holding pip alone (nothing else of this environment shows through). The
    image's pip is whatever its base image ships (the Dockerfile pins none), and ensurepip's fresh
    copy cost 6 of this test's ~50 CPU-seconds; the stages' own `python -m venv` still runs it."""
    spec = importlib.util.find_spec("pip")
    if spec is None or not spec.submodule_search_locations:
        venv.create(root, with_pip=True)
        return root
    venv.create(root, with_pip=False)
    package = Path(spec.submodule_search_locations[0])
    only_pip = root / "pip-only"
    only_pip.mkdir()
    (only_pip / "pip").symlink_to(package)
    for info in package.parent.glob("pip-*.dist-info"):
        (only_pip / info.name).symlink_to(info)
    (site_packages(root) / "_pip.pth").write_text(f"{only_pip}\n")
    script = root / "bin" / "pip"
    script.write_text(
        f"#!{root / 'bin' / 'python'}\nimport sys\nfrom pip._internal.cli.main import main\nsys.exit(main())\n"
    )
    script.chmod(0o755)
    return root


@pytest.mark.slow
def test_the_install_steps_give_a_working_exporter_and_npd_plugin(tmp_path: Path) -> None:
    # The image's system Python: a fresh virtual environment whose bin/ comes first on PATH.
    system = system_python(tmp_path / "system-python")
    env = {**os.environ, "PATH": f"{system / 'bin'}{os.pathsep}{os.environ['PATH']}", "PIP_COMPILE": "0"}
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)

    # Stage "wheel": WORKDIR /src with what the Dockerfile copies there.
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "gpudiag", src / "gpudiag", ignore=shutil.ignore_patterns("__pycache__"))
    wheels = tmp_path / "wheels"
    assert (
        run_stage("wheel", {"/tmp/build-requirements.txt": BUILD_REQUIREMENTS, "/tmp/wheels": wheels}, src, env) == []
    )
    (wheel,) = wheels.glob("gpudiag-*.whl")

    opt_gpudiag = exporter_stage(tmp_path, wheels, wheel, env)
    npd_stage(tmp_path, opt_gpudiag, env)


def exporter_stage(tmp_path: Path, wheels: Path, wheel: Path, env: dict[str, str]) -> Path:
    """Run the exporter stage from its copy of the wheels, then the image's command; returns the
    environment it installed gpudiag into."""
    root = tmp_path / "exporter"
    shutil.copytree(wheels, root / "wheels")  # COPY --from=wheel
    shutil.copy(REQUIREMENTS, root / "requirements.txt")
    paths = {
        "/tmp/requirements.txt": root / "requirements.txt",
        "/tmp/wheels": root / "wheels",
        "/opt/gpudiag": root / "opt-gpudiag",
    }
    assert run_stage("exporter", paths, tmp_path, env) == []
    assert not (root / "wheels").exists()  # the stage cleans up after itself
    gpudiag = root / "opt-gpudiag" / "bin" / "gpudiag"
    # What `pip freeze` lists, read from the same metadata in this process (a pip start costs seconds).
    installed = {
        d.metadata["Name"].lower().replace("_", "-"): d.version
        for d in importlib.metadata.distributions(path=[str(site_packages(root / "opt-gpudiag"))])
    }
    assert installed.get("gpudiag") == wheel.name.split("-")[1], installed
    assert installed.items() >= pins(REQUIREMENTS).items(), installed
    clean_env = {k: v for k, v in env.items() if k != "GPUDIAG_REPLAY"}
    # The image's default command (ENTRYPOINT + CMD), asked for its help, then for one scrape.
    exporter = dict(stage("exporter"))
    command = [str(gpudiag), *json.loads(exporter["CMD"])]
    helped = subprocess.run([*command, "--help"], capture_output=True, text=True, env=clean_env, timeout=120)
    assert helped.returncode == 0 and "--compat" in helped.stdout, helped.stderr
    once = subprocess.run(
        [str(gpudiag), "--replay", "h100x8-healthy", "exporter", "--once"],
        capture_output=True,
        text=True,
        env=clean_env,
        timeout=120,
    )
    assert once.returncode == 0 and "gpudiag_gpu_info" in once.stdout, once.stderr
    grpc = subprocess.run(
        [
            str(root / "opt-gpudiag" / "bin" / "python"),
            "-c",
            "from gpudiag.export import kubelet; kubelet._modules()",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert grpc.returncode == 0, grpc.stderr  # the kubernetes extra: pod labels from the kubelet
    return root / "opt-gpudiag"


def npd_stage(tmp_path: Path, opt_gpudiag: Path, env: dict[str, str]) -> None:
    """Run the npd stage's own steps on the exporter stage's environment, then its plugin's command."""
    root = tmp_path / "npd"
    (root / "bin").mkdir(parents=True)
    paths = {"/opt/gpudiag": opt_gpudiag, "/usr/local/bin/gpudiag": root / "bin" / "gpudiag"}
    (apt,) = run_stage("npd", paths, tmp_path, env, done=installed_as_the_exporter_is())
    assert shlex.split(apt.split("&&")[1])[-2:] == ["python3", "python3-venv"]
    # The path the NPD plugin config names, as a link into the virtual environment.
    plugin = root / "bin" / "gpudiag"
    assert plugin.is_symlink() and plugin.resolve() == (opt_gpudiag / "bin" / "gpudiag").resolve()
    clean_env = {k: v for k, v in env.items() if k != "GPUDIAG_REPLAY"}
    npd = subprocess.run(
        [str(plugin), "--replay", "a100-ecc-errors", "check", "--npd", "--quick", "--no-torch"],
        capture_output=True,
        text=True,
        env=clean_env,
        timeout=120,
    )
    assert npd.returncode == 1 and npd.stdout.startswith("failed: "), npd.stderr
