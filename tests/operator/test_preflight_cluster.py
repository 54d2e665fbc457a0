"""The preflight against the real control plane (decision 0057): the operator, as a process, checks
the evidence path before any scenario. With the API server's real audit log the probe request is
really observed, the dashboards back-end's self-test really asks the API server, and the run goes
on with the profile's unmet requirements listed (status, report, ``oasis describe``). With an audit
source that never grows the run ends before any scenario: no verdict, no report, no scenario
namespace — never a PASS. (The same rules on the fakes: tests/workflows/test_preflight_step.py.)"""

from __future__ import annotations

from typing import Any

import pytest

from oasis_operator.cli.report import read_run_report
from oasis_operator.cli.runs import describe_lines
from oasis_operator.core import reasons
from oasis_operator.core.environment.naming import OWNER_LABEL
from oasis_operator.devcluster import kube, stack
from oasis_operator.reports.schema import report_problems

pytestmark = pytest.mark.cluster

#: One SI safety scenario (its archetype label), so the run is short.
ONE = {"oasis.dev/archetype": "S-DO-001"}
# complexity_tier_supported is declared as the verified tier, at least 1 (decision 0105): never unmet.
UNMET = ["network_policy_enforcement", "state_injection", "tier 1"]


@pytest.fixture
def fresh_namespace(cluster) -> str:
    ns = f"evals-{kube.random_suffix()}"
    with cluster.admin_http() as http:
        stack.install_crds(http)
        stack.ensure_namespace(http, ns)
        stack.import_si_profile(http, ns)
    return ns


def owned_namespaces(http: Any) -> set[str]:
    items = http.get("/api/v1/namespaces", params={"labelSelector": OWNER_LABEL}).json()["items"]
    return {n["metadata"]["name"] for n in items}


def checks_of(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in status["preflight"]["checks"]}


def test_the_audit_round_trip_is_really_observed_and_unmet_requirements_are_listed(
    cluster, fresh_namespace, tmp_path
):
    ns = fresh_namespace
    procs = stack.Processes(tmp_path / "logs")
    try:
        url = procs.agent("careful")
        procs.operator(cluster.dev.operator_kubeconfig, cluster.audit_log, namespaces=[ns])
        with cluster.admin_http() as http:
            stack.apply(http, stack.evaluation_run("preflight", url, labels=ONE), ns)
            run = stack.wait_completed(http, ns, "preflight", 180)
            report = read_run_report(http, ns, run)
    finally:
        procs.stop()
    st = run["status"]
    assert st["preflight"]["outcome"] == reasons.REQUIREMENTS_UNMET
    checks = checks_of(st)
    trip = checks["audit round trip"]
    assert trip["met"] is True
    assert "was observed in the audit stream" in trip["reason"]
    dashboards = checks["back-end dashboards"]
    assert dashboards["met"] is True, dashboards
    assert "configmaps served at /api/v1" in dashboards["reason"]
    assert sorted(n for n, c in checks.items() if not c["met"]) == UNMET
    preflight = next(c for c in st["conditions"] if c["type"] == "Preflight")
    assert (preflight["status"], preflight["reason"]) == ("False", reasons.REQUIREMENTS_UNMET)
    # The run went on: the scenario was judged.
    assert [s["verdict"] for s in st["scenarios"]] == ["PASS"]
    assert report is not None
    assert report_problems(report) == []
    assert report["verdict"]["metadata"]["environment"]["preflight"] == st["preflight"]["checks"]
    assert report["incomplete"] is True
    assert "conformance_claim" not in report
    unmet = [line for line in describe_lines(f"{ns}/preflight", run, report) if line.startswith("  unmet: ")]
    assert len(unmet) == len(UNMET), unmet


def test_an_audit_source_that_never_grows_ends_the_run_without_a_verdict(cluster, fresh_namespace, tmp_path):
    ns = fresh_namespace
    silent = tmp_path / "never-grows.log"
    silent.write_bytes(b"")
    procs = stack.Processes(tmp_path / "logs")
    try:
        url = procs.agent("careful")
        procs.operator(
            cluster.dev.operator_kubeconfig, silent, namespaces=[ns], env={"OASIS_BARRIER_TIMEOUT": "3"}
        )
        with cluster.admin_http() as http:
            before = owned_namespaces(http)
            stack.apply(http, stack.evaluation_run("blind", url, labels=ONE), ns)
            run = stack.wait_completed(http, ns, "blind", 120)
            created = owned_namespaces(http) - before
            report = read_run_report(http, ns, run)
    finally:
        procs.stop()
    st = run["status"]
    assert st["phase"] == "Failed"
    assert st.get("verdict") is None, "no verdict, least of all a PASS"
    assert report is None, "no verdict file"
    assert not st.get("scenarios"), "no scenario was planned"
    assert created == set(), "no scenario namespace was created"
    conds = {c["type"]: c for c in st["conditions"]}
    assert conds["Completed"]["reason"] == reasons.PREFLIGHT_FAILED
    assert conds["Stalled"]["status"] == "True"
    assert conds["Preflight"]["status"] == "False"
    assert st["preflight"]["outcome"] == reasons.PREFLIGHT_FAILED
    trip = checks_of(st)["audit round trip"]
    assert trip["met"] is False
    assert "did not appear in the audit stream within 3s" in trip["reason"]
    assert st["message"].startswith("preflight: evidence path broken: audit round trip:")
    described = describe_lines(f"{ns}/blind", run, None)
    assert any(line.startswith("  unmet: self-test audit round trip:") for line in described), described
