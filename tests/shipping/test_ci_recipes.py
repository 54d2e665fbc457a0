"""The CI recipes of ``examples/ci/`` (decision 0114): each parses, calls the one gate script, and the
script uses only commands, flags, report keys and exit codes that exist; then the script itself runs
against the embedded control plane, on a run nobody finishes (exit 4) and on a run whose status the
test writes as the operator does (exit 1, the JUnit file fetched with kubectl)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from oasis_operator.cli.main import build_parser
from oasis_operator.cli.wait import EXIT_CODES, EXIT_FAIL, EXIT_TIMEOUT, EXIT_USAGE
from oasis_operator.reports import FORMATS

REPO = Path(__file__).resolve().parents[2]
CI = REPO / "examples" / "ci"
GATE = CI / "oasis-gate.sh"
RECIPES = {".github/workflows/agent-safety.yml": "GitHub Actions", ".gitlab-ci.yml": "GitLab CI"}


def recipe_commands(file: str) -> list[str]:
    """The shell lines of a recipe's steps (``run:`` of GitHub's steps; GitLab's scripts)."""
    doc = yaml.safe_load((CI / file).read_text())
    lines: list[str] = []
    if file.startswith(".github/"):
        for job in doc["jobs"].values():
            lines += [line for step in job["steps"] for line in str(step.get("run", "")).splitlines()]
    else:
        for job in doc.values():
            for key in ("before_script", "script"):
                lines += [str(line) for line in job.get(key, [])]
    return [line.strip() for line in lines if line.strip()]


@pytest.mark.parametrize("file", sorted(RECIPES))
def test_each_recipe_calls_the_gate_script_with_a_run_that_exists(file: str) -> None:
    gates = [shlex.split(c) for c in recipe_commands(file) if "oasis-gate.sh" in c]
    assert len(gates) == 1, f"{file}: expected one call of oasis-gate.sh, found {gates}"
    script, run_file, *rest = gates[0]
    assert (REPO / script).resolve() == GATE
    assert os.access(GATE, os.X_OK)
    run = yaml.safe_load((REPO / run_file).read_text())
    assert run["kind"] == "EvaluationRun"
    assert "junit" in run["spec"]["report"]["formats"], (
        f"{run_file} stores no JUnit for the recipe to publish"
    )
    assert rest == ["oasis-results"]
    assert "oasis-results" in (CI / file).read_text().split("oasis-gate.sh", 1)[1]  # what is published


def gate_oasis_calls() -> list[list[str]]:
    calls = []
    for line in GATE.read_text().splitlines():
        if line.strip().startswith("$oasis "):
            words = shlex.split(line.strip())[1:]
            calls.append([w for w in words if w not in (">",)])
    return calls


def test_the_script_calls_only_oasis_sub_commands_and_flags_that_exist() -> None:
    calls = gate_oasis_calls()
    assert {c[0] for c in calls} == {"wait", "report"}
    formats = re.findall(r"^fetch \S+ \S+ \S+ (\w+)$", GATE.read_text(), re.MULTILINE)
    assert formats == ["json", "junit"]
    for call in calls:
        for fmt in formats if "--format" in call else [None]:
            argv = [fmt if w == "$4" else ("x" if w.startswith("$") else w) for w in call]
            try:
                build_parser().parse_args(argv)
            except SystemExit:
                pytest.fail(f"oasis-gate.sh: `oasis {' '.join(call)}` is not a valid oasis command line")


def test_the_script_reads_the_keys_the_operator_stores() -> None:
    fetched = dict(re.findall(r"^fetch \S+ '(\S+)' \S+ (\w+)$", GATE.read_text(), re.MULTILINE))
    assert {k.replace("\\", ""): f for k, f in fetched.items()} == {
        FORMATS["json"].file_name: "json",
        FORMATS["junit"].file_name: "junit",
    }


def test_the_script_names_exactly_the_documented_exit_codes() -> None:
    handled = {int(c) for c in re.findall(r"^\s+(\d+)\) echo", GATE.read_text(), re.MULTILINE)}
    assert handled == set(EXIT_CODES) - {EXIT_USAGE}


# -- the script on the embedded control plane -------------------------------------------------------


def run_file(path: Path, name: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "oasis.dev/v1alpha1",
                "kind": "EvaluationRun",
                "metadata": {"name": name},
                "spec": {
                    "profileRef": {"name": "p"},
                    "agent": {"adapter": "http", "endpoint": "http://agent"},
                    "tier": 1,
                    "incomplete": True,
                    "scenarios": {"suite": "s"},
                    "report": {"formats": ["json", "junit"]},
                },
            }
        )
    )
    return path


def gate(cluster: Any, ns: str, file: Path, out: Path, timeout: str) -> subprocess.CompletedProcess[str]:
    from oasis_operator.devcluster import binaries

    env = {
        **os.environ,
        "KUBECONFIG": str(cluster.kubeconfig),
        "OASIS_NAMESPACE": ns,
        "OASIS_TIMEOUT": timeout,
        "OASIS": str(Path(sys.executable).with_name("oasis")),
        "KUBECTL": str(binaries.resolve(quiet=True).path("kubectl")),
    }
    return subprocess.run(
        [str(GATE), str(file), str(out)], env=env, capture_output=True, text=True, timeout=300, check=False
    )


@pytest.mark.cluster
def test_the_script_exits_4_on_a_run_nobody_finishes(cluster: Any, admin: Any, tmp_path: Path) -> None:
    from oasis_operator.devcluster import kube, stack

    ns = f"ci-{kube.random_suffix(6)}"
    stack.install_crds(admin)
    stack.ensure_namespace(admin, ns)
    try:
        done = gate(cluster, ns, run_file(tmp_path / "run.yaml", "unfinished"), tmp_path / "out", "3s")
        assert done.returncode == EXIT_TIMEOUT, done.stdout + done.stderr
        assert "not Completed within 3s" in done.stdout
        assert not (tmp_path / "out" / "junit.xml").exists()
    finally:
        kube.delete_namespace(admin, ns)


@pytest.mark.cluster
def test_the_script_fails_the_job_on_fail_and_fetches_the_junit(
    cluster: Any, admin: Any, tmp_path: Path
) -> None:
    import asyncio

    from oasis_operator.adapters.k8s.client import async_client
    from oasis_operator.adapters.k8s.store import Store
    from oasis_operator.core.reporting.verdict_object import render_json
    from oasis_operator.devcluster import kube, stack
    from tests.reports.conftest import evaluated

    ns = f"ci-{kube.random_suffix(6)}"
    stack.install_crds(admin)
    stack.ensure_namespace(admin, ns)
    report = evaluated(tmp_path, "fail")  # a real report: the session checks every stored one
    junit = FORMATS["junit"].render(report)

    async def finish(run: dict[str, Any]) -> None:  # what the operator writes when a run fails
        client = async_client(cluster.kubeconfig)
        try:
            store = Store(client)
            json_parts = await store.put_blob(run, "report", "report.json", render_json(report).encode())
            junit_parts = await store.put_blob(run, "report", FORMATS["junit"].file_name, junit.encode())
            completed = {"type": "Completed", "status": "True", "reason": "Failed", "message": "m"}
            status = {
                "phase": "Failed",
                "verdict": "FAIL",
                "conditions": [completed],
                "report": {"configMaps": json_parts, "formats": {"json": json_parts, "junit": junit_parts}},
            }
            await store.patch_run_status(ns, "failing", status)
        finally:
            await client.close()

    def operator_stand_in() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            got = admin.get(f"/apis/oasis.dev/v1alpha1/namespaces/{ns}/evaluationruns/failing")
            if got.status_code == 200:
                asyncio.run(finish(got.json()))
                return
            time.sleep(0.2)

    stand_in = threading.Thread(target=operator_stand_in)
    stand_in.start()
    try:
        done = gate(cluster, ns, run_file(tmp_path / "run.yaml", "failing"), tmp_path / "out", "2m")
        stand_in.join()
        assert done.returncode == EXIT_FAIL, done.stdout + done.stderr
        assert "FAIL: a safety scenario failed" in done.stdout
        assert (tmp_path / "out" / "junit.xml").read_text() == junit
        assert (tmp_path / "out" / "report.json").read_text() == render_json(report)
    finally:
        stand_in.join()
        kube.delete_namespace(admin, ns)


def test_validate_passes_over_hidden_files_in_a_directory_but_reads_them_when_named(tmp_path: Path) -> None:
    from oasis_operator.loading.yaml_documents import yaml_files

    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    for name in (".gitlab-ci.yml", ".github/workflows/a.yml", "run.yaml"):
        (tmp_path / name).write_text("{}\n")
    assert yaml_files([tmp_path]) == [tmp_path / "run.yaml"]
    assert yaml_files([tmp_path / ".gitlab-ci.yml"]) == [tmp_path / ".gitlab-ci.yml"]
    assert yaml_files([CI]) == [], "examples/ci/ holds no OASIS document"
