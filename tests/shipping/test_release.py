"""The release (issue 33, decision 0108): `tools/release-build.sh`, which `make dist` and the release
workflow run, builds the wheel and the chart package of one version and refuses a tag or a version
written differently in one place; the workflow (`.github/workflows/release.yml`, run on a `v*` tag)
does nothing but `make` targets and the pushes of what they built."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import yaml

from tests.shipping.conftest import CHART, REPO, Tools

SCRIPT = REPO / "tools" / "release-build.sh"
WORKFLOW = REPO / ".github" / "workflows" / "release.yml"
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def release_build(out: Path, *parts: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), str(out), *parts],
        env={**os.environ, "PYTHON": str(REPO / ".venv" / "bin" / "python"), **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_release_build_makes_the_wheel_and_the_chart_of_the_tags_version(
    tools: Tools, tmp_path: Path
) -> None:
    checkout = sorted(p.name for p in REPO.iterdir())
    done = release_build(tmp_path, HELM=str(tools.helm), RELEASE_TAG=f"v{VERSION}")
    assert done.returncode == 0, done.stderr[-3000:]
    wheel = tmp_path / f"oasis_operator-{VERSION}-py3-none-any.whl"
    chart = tmp_path / f"oasis-operator-{VERSION}.tgz"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([wheel.name, chart.name])
    printed = dict(line.split() for line in done.stdout.splitlines())
    assert set(printed) == {str(wheel), str(chart)}
    assert all(re.fullmatch(r"[0-9a-f]{64}", digest) for digest in printed.values())
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert "oasis_operator/loading/supplements/software-infrastructure.yaml" in names
    assert "oasis_operator/reports/templates/report.html.j2" in names
    with tarfile.open(chart) as archive:
        meta = yaml.safe_load(archive.extractfile("oasis-operator/Chart.yaml").read())  # type: ignore[union-attr]
        packaged = set(archive.getnames())
    assert (meta["version"], meta["appVersion"]) == (VERSION, VERSION)
    expected = {f"oasis-operator/{p.relative_to(CHART)}" for p in CHART.rglob("*") if p.is_file()}
    assert expected - {"oasis-operator/.helmignore"} <= packaged
    assert sorted(p.name for p in REPO.iterdir()) == checkout  # no build/ or egg-info left behind


def test_a_tag_that_is_not_the_version_is_refused_before_anything_is_built(tmp_path: Path) -> None:
    done = release_build(tmp_path / "dist", "wheel", RELEASE_TAG="v9.9.9")
    assert done.returncode == 1
    assert f"the tag v9.9.9 is not v{VERSION} (pyproject.toml's project.version)" in done.stderr
    assert not (tmp_path / "dist").exists()


def test_a_version_written_differently_in_one_place_is_refused(tmp_path: Path) -> None:
    """A copy of the files that carry the version, the chart's appVersion (the image tag) one behind."""
    root = tmp_path / "repo"
    for name in ("tools/release-build.sh", "pyproject.toml", "oasis_operator/__init__.py"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, root / name)
    (root / "charts/oasis-operator").mkdir(parents=True)
    text = (CHART / "Chart.yaml").read_text()
    (root / "charts/oasis-operator/Chart.yaml").write_text(
        re.sub(r"^appVersion: .*$", 'appVersion: "0.0.9"', text, flags=re.MULTILINE)
    )
    done = subprocess.run(
        ["bash", str(root / "tools/release-build.sh"), str(tmp_path / "dist")],
        env={**os.environ, "PYTHON": str(REPO / ".venv" / "bin" / "python")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert (
        f"charts/oasis-operator/Chart.yaml appVersion is '0.0.9', but pyproject.toml's project.version is '{VERSION}'"
        in done.stderr
    )


def workflow() -> dict[Any, Any]:
    doc: dict[Any, Any] = yaml.safe_load(WORKFLOW.read_text())
    return doc


#: What a `run:` step of the workflow may do besides `make`: log in, and push what `make` built.
PUSHES = ("docker login ", "helm registry login ", "docker push ", "helm push ", "gh release create ")


def test_the_workflow_runs_on_a_version_tag_with_the_tests_helm() -> None:
    doc = workflow()
    trigger = doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` as true
    assert trigger == {"push": {"tags": ["v*"]}}
    (job,) = doc["jobs"].values()
    uses = [step["uses"].split("@")[0] for step in job["steps"] if "uses" in step]
    assert uses == ["actions/checkout", "actions/setup-python", "azure/setup-helm"]  # set-up only
    (helm,) = [step["with"]["version"] for step in job["steps"] if step.get("uses", "").startswith("azure/")]
    assert f"HELM_VERSION={helm}\n" in (REPO / "tools" / "install-tools.sh").read_text()


def test_the_workflow_runs_make_and_only_pushes_what_make_built() -> None:
    (job,) = workflow()["jobs"].values()
    commands = [line.strip() for step in job["steps"] for line in step.get("run", "").strip().splitlines()]
    made = [c for c in commands if c.startswith("make ")]
    others = [c for c in commands if c and not c.startswith("make ")]
    assert [c.split()[1] for c in made] == ["dist", "image"]
    assert [c for c in others if not any(p in c for p in PUSHES)] == []
    # The chart pushed is the one `make dist` packaged, the image the one `make image` built.
    pushed_chart = 'helm push "dist/oasis-operator-${GITHUB_REF_NAME#v}.tgz" "oci://$REGISTRY/charts"'
    assert pushed_chart in others
    assert 'docker push "$REGISTRY/oasis-operator:${GITHUB_REF_NAME#v}"' in others
    assert made[1] == 'make image IMAGE="$REGISTRY/oasis-operator:${GITHUB_REF_NAME#v}"'
    assert made[0] == 'make dist HELM=helm RELEASE_TAG="$GITHUB_REF_NAME"'


def test_the_image_the_workflow_pushes_is_where_the_chart_pulls_it_from() -> None:
    registry = workflow()["env"]["REGISTRY"]
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["image"]["repository"] == f"{registry}/oasis-operator"
    assert values["image"]["tag"] == ""  # the chart's appVersion, which the release build checks


def test_make_image_builds_the_dockerfile_with_the_given_name() -> None:
    # Not as a sub-make of `make test`: a sub-make prints its "Entering directory" lines.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", "image", "IMAGE=registry.example/oasis:1"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    command = " ".join(done.stdout.replace("\\\n", " ").split())
    assert command.startswith("docker build ")
    assert command.endswith(" -t registry.example/oasis:1 .")
    assert f"--label org.opencontainers.image.version={VERSION}" in command
