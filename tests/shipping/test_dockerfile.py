"""The Dockerfile, read as instructions (it is not built here): pinned bases, several stages, the
locked dependencies installed in a layer before the code (so a code change reinstalls none of them),
a non-root numeric user, the entrypoint the Helm chart relies on, and a build context that leaves out
the virtualenv and the repository's history."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml
from packaging.requirements import Requirement

from tests.shipping.conftest import CHART, REPO


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = (REPO / "Dockerfile").read_text()
    text = re.sub(r"\\\n", " ", text)
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def test_bases_are_pinned_and_the_build_is_multi_stage() -> None:
    steps = instructions()
    args = dict(a.split("=", 1) for k, a in steps if k == "ARG" and "=" in a)
    bases = [a.split()[0] for k, a in steps if k == "FROM"]
    assert len(bases) >= 3
    go = re.search(r"^go (\d+\.\d+)", (REPO / "tools/backends/git-server/go.mod").read_text(), re.M)
    assert go is not None
    names = []
    for base in bases:
        image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], base)
        name, _, tag = image.partition(":")
        names.append(name)
        if name == "golang":  # the git server's build stage: the Go release of its go.mod
            assert re.fullmatch(rf"{re.escape(go.group(1))}\.\d+-\w+(@sha256:[0-9a-f]{{64}})?", tag), image
        else:
            assert name == "python"
            assert re.fullmatch(r"3\.11\.\d+-slim(-\w+)?(@sha256:[0-9a-f]{64})?", tag), image
        assert "latest" not in image
    assert names[-1] == "python"


def test_the_final_stage_runs_the_operator_as_a_non_root_user() -> None:
    steps = instructions()
    final = steps[max(i for i, (k, _) in enumerate(steps) if k == "FROM") :]
    users = [a for k, a in final if k == "USER"]
    assert users == ["65532:65532"]
    entrypoint = [json.loads(a) for k, a in final if k == "ENTRYPOINT"]
    assert entrypoint == [["oasis", "operator", "run"]]
    assert any(k == "COPY" and a.startswith("--from=build") for k, a in final)
    assert not any(k == "RUN" and "pip install" in a for k, a in final)  # no build tools in the final stage
    run = " ".join(a for k, a in steps if k == "RUN")
    assert "pip install -c constraints.txt -r requirements.txt" in run  # the locked versions CI tested


def test_what_the_dockerfile_copies_exists_and_the_context_is_small() -> None:
    for kind, argument in instructions():
        if kind == "COPY" and not argument.startswith("--from"):
            for source in argument.split()[:-1]:
                assert (REPO / source).exists(), source
    ignore = (REPO / ".dockerignore").read_text().splitlines()
    assert ignore[ignore.index("*")] == "*"  # everything is excluded unless listed
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    assert allowed == {
        "pyproject.toml",
        "README.md",
        ".ci/constraints.txt",
        "oasis_operator",
        "tools/backends/git-server",
        "tools/build-binaries.sh",
        "tools/k8s",
        "tools/etcd",
    }


def stages() -> dict[str, list[tuple[str, str]]]:
    """Each stage's instructions, by its name (``AS``); the unnamed final stage as ``final``."""
    out: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] = []
    for kind, argument in instructions():
        if kind == "FROM":
            words = argument.split()
            current = out.setdefault(words[2] if len(words) > 2 and words[1].upper() == "AS" else "final", [])
        current.append((kind, argument))
    return out


def test_the_git_server_is_built_static_from_its_module_and_runs_where_the_chart_starts_it() -> None:
    """Decision 0072: the Go stage builds tools/backends/git-server with its go.sum verified and cgo off
    (the final stage is a Python image: no C library guarantees); the final stage has the binary where
    the chart's git-server container runs it, and Debian's git (gitkit runs it for every request)."""
    by_stage = stages()
    name = "git-server"
    build = by_stage[name]
    copied = [a.split() for k, a in build if k == "COPY"]
    assert copied[0] == ["tools/backends/git-server/go.mod", "tools/backends/git-server/go.sum", "./"]
    runs = [a for k, a in build if k == "RUN"]
    assert "go mod verify" in runs[0]
    (go_build,) = [r for r in runs if "go build" in r]
    assert "CGO_ENABLED=0" in go_build
    binary = go_build.split("-o ")[1].split()[0]
    final = by_stage["final"]
    (dest,) = [a.split()[-1] for k, a in final if k == "COPY" and a.startswith(f"--from={name} {binary}")]
    template = (CHART / "templates" / "_backend-gitops.tpl").read_text()
    assert f'command: ["{dest}"]' in template
    apt = [a for k, a in final if k == "RUN" and "apt-get install" in a]
    assert len(apt) == 1, apt
    assert re.search(r"--no-install-recommends git(\s|$)", apt[0]), apt
    assert "rm -rf /var/lib/apt/lists" in apt[0]


def test_the_image_carries_the_target_control_planes_binaries_where_the_operator_looks() -> None:
    """Decision 0109: a Go stage runs the local stack's own build script (same versions) and the final
    stage has every binary the operator starts in the directory OASIS_BIN_DIR names."""
    by_stage = stages()
    build = by_stage["control-plane"]
    assert "GOLANG" in build[0][1].upper()
    (run,) = [a for k, a in build if k == "RUN"]
    assert "tools/build-binaries.sh" in run
    final = by_stage["final"]
    (copied,) = [a.split() for k, a in final if k == "COPY" and a.startswith("--from=control-plane")]
    env = " ".join(a for k, a in final if k == "ENV")
    assert f"OASIS_BIN_DIR={copied[-1]}" in env
    from oasis_operator.devcluster import binaries

    script = (REPO / "tools" / "build-binaries.sh").read_text()
    wanted = re.search(r"^want=\((.*)\)$", script, re.M)
    assert wanted is not None
    assert set(binaries.COMPONENTS) <= set(wanted.group(1).split())


def test_the_chart_runs_the_image_as_its_user() -> None:
    steps = instructions()
    uid = int([a for k, a in steps if k == "USER"][-1].split(":")[0])
    values: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text())
    template = (CHART / "templates" / "deployment.yaml").read_text()
    assert f"runAsUser: {uid}" in template
    ports = {int(p) for k, a in steps if k == "EXPOSE" for p in a.split()}
    assert ports == {values["metrics"]["port"], values["health"]["port"], values["auditWebhook"]["port"]}


def test_the_locked_dependencies_are_installed_in_a_layer_before_the_code() -> None:
    """Decision 0108: what the dependency layer sees is pyproject.toml and the lock, nothing of the code;
    the code is copied after it and installed without its dependencies."""
    build = stages()["build"]
    deps = next(
        i
        for i, (k, a) in enumerate(build)
        if k == "RUN" and "pip install -c constraints.txt -r requirements.txt" in a
    )
    code = next(i for i, (k, a) in enumerate(build) if k == "COPY" and a.split()[0] == "oasis_operator")
    assert deps < code
    seen = [source for k, a in build[:deps] if k == "COPY" for source in a.split()[:-1]]
    assert sorted(seen) == [".ci/constraints.txt", "pyproject.toml"]
    after = [a for k, a in build[code:] if k == "RUN" and "pip install" in a]
    assert after, "the code is never installed"
    assert all(re.search(r"pip install --no-deps \.(\s|$)", a) for a in after), after


def test_the_dependency_layer_installs_the_packages_requirements_and_the_database_extra(
    tmp_path: Path,
) -> None:
    """The requirement list the image builds from pyproject.toml, made here by the Dockerfile's own
    command, is the installed package's: its requirements and the `database` extra's (the chart runs
    the database back-end), not the dev cluster's or the tests'."""
    (run,) = [a for k, a in stages()["build"] if k == "RUN" and "requirements.txt" in a and "python -c" in a]
    command = run.split("&&")[0].strip()
    assert command.endswith("> requirements.txt")
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    subprocess.run(["sh", "-c", command], cwd=tmp_path, check=True, timeout=60)
    listed = sorted(
        str(Requirement(line)) for line in (tmp_path / "requirements.txt").read_text().splitlines()
    )
    wanted = []
    for text in metadata.requires("oasis-operator") or []:
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate({"extra": "database"}):
            req.marker = None
            wanted.append(str(req))
    assert listed == sorted(wanted)
    assert any(r.startswith("psycopg[binary]") for r in listed)
    assert not any(r.startswith(("cryptography", "pytest")) for r in listed)
