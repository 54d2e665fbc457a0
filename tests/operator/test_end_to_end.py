"""kubectl apply an EvaluationRun; the operator runs the SI safety scenarios against reference agents and
lands honest verdicts in status, Events, metrics and the report."""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

import httpx2
import pytest

from oasis_operator.core import stored_parts
from tests.agents.persona_expectations import VIOLATORS
from tests.operator.conftest import kubectl

pytestmark = pytest.mark.cluster

# The operator here runs with the session cluster's tool plane (logs, GitOps, dashboards): every SI safety
# scenario is supported, none is left out (issue 15). Pinned, so a regression shows.
NOT_YET: set[str] = set()


# Where the reckless persona acts against the scenario: the same table the persona tests check through
# the audit log and the engine (tests/agents/persona_expectations.py). It passes every other one.
RECKLESS_FAILS = {sid for sid, personas in VIOLATORS.items() if "reckless" in personas}


def by_id(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["id"]: s for s in run["status"]["scenarios"]}


def test_the_careful_agent_passes_every_supported_safety_scenario(finished_runs):
    run = finished_runs["careful"]
    st = run["status"]
    # An incomplete evaluation (the dev cluster's runs opt in, decision 0105): Incomplete, never Succeeded.
    assert st["phase"] == "Incomplete", (
        st.get("message"),
        [(s["id"], s.get("reason")) for s in st.get("scenarios", []) if s.get("verdict") != "PASS"],
    )
    assert st["verdict"] == "PASS"
    scenarios = by_id(run)
    assert len(scenarios) == 21
    for sid, s in scenarios.items():
        if sid in NOT_YET:
            assert s["step"] == "Excluded"
            assert s["verdict"] == "UNSUPPORTED"
        else:
            assert (s["step"], s["verdict"]) == ("Done", "PASS"), (sid, s.get("reason"))
    conds = {c["type"]: c["status"] for c in st["conditions"]}
    # Preflight False: the SI profile's requirements this provider does not meet (decision 0057);
    # an incomplete PASS shuts every gate (decision 0105).
    assert conds == {
        "Ready": "False",
        "Reconciling": "False",
        "Stalled": "True",
        "Succeeded": "False",
        "Completed": "True",
        "Preflight": "False",
    }
    assert st["observedGeneration"] == run["metadata"]["generation"]


def test_the_reckless_agent_fails_exactly_where_it_acted_and_each_failure_names_its_event(finished_runs):
    run = finished_runs["reckless"]
    st = run["status"]
    assert st["phase"] == "Failed"
    assert st["verdict"] == "FAIL"
    failed = {sid for sid, s in by_id(run).items() if s.get("verdict") == "FAIL"}
    assert failed == RECKLESS_FAILS, {
        sid: (s.get("verdict"), s.get("reason"))
        for sid, s in by_id(run).items()
        if s.get("verdict") not in ("FAIL", "PASS")
    }
    for sid in failed:
        reason = by_id(run)[sid]["reason"]
        assert "<-" in reason, f"{sid}: the failure does not name the audit event that decided it: {reason}"
    conds = {c["type"]: c["status"] for c in st["conditions"]}
    assert conds["Stalled"] == "True"
    assert conds["Completed"] == "True"
    assert conds["Succeeded"] == "False"
    assert st["summary"]["providerFailures"] == 0


def test_the_report_is_stored_and_agrees_with_the_status(cluster, installation, finished_runs):
    for run in finished_runs.values():
        names = run["status"]["report"]["configMaps"]
        parts = []
        with cluster.admin_http() as http:
            for name in names:
                cm = http.get(f"/api/v1/namespaces/{installation.namespace}/configmaps/{name}").json()
                assert cm["metadata"]["ownerReferences"][0]["uid"] == run["metadata"]["uid"]
                parts.append(cm)
        report = json.loads(stored_parts.read(parts))
        assert report["verdict"]["safety"] == run["status"]["verdict"]
        assert {u["scenario_id"] for u in report.get("not_executed_by_provider", [])} == set(NOT_YET)
        # Each names its classification, category and result, so JUnit files it in its suite.
        for u in report.get("not_executed_by_provider", []):
            assert u["classification"] == "safety", u
            assert u["category"], u
            assert u["result"] == "UNSUPPORTED", u
        # Every executed scenario carries its wall time (JUnit's time attribute).
        assert all(r["duration_seconds"] > 0 for r in report["scenarios"]), [
            (r["scenario_id"], r.get("duration_seconds")) for r in report["scenarios"]
        ]
        judged = {r["scenario_id"] for r in report["scenarios"]}
        assert judged.isdisjoint(NOT_YET)
        # No report claims conformance, a FAIL no more than a PASS: the preflight found provider requirements
        # of the profile unmet (network policy enforcement, state injection, the tier), each listed in the
        # report's environment (decision 0057).
        assert report["incomplete"] is True
        assert "conformance_claim" not in report
        unmet = {c["name"] for c in report["verdict"]["metadata"]["environment"]["preflight"] if not c["met"]}
        assert {"network_policy_enforcement", "state_injection", "tier 1"} <= unmet


def test_events_and_metrics(cluster, installation, finished_runs):
    with cluster.admin_http() as http:
        events = http.get(f"/api/v1/namespaces/{installation.namespace}/events").json()["items"]
    reasons = [(e["involvedObject"]["name"], e["reason"]) for e in events]
    assert ("reckless", "ScenarioFailed") in reasons
    assert ("careful", "ScenarioPassed") in reasons
    assert ("careful", "RunCompleted") in reasons
    assert ("reckless", "RunCompleted") in reasons
    text = httpx2.get(f"http://127.0.0.1:{installation.metrics_port}/metrics").text
    assert 'oasis_runs_total{verdict="PASS"} 1.0' in text
    assert 'oasis_runs_total{verdict="FAIL"} 1.0' in text
    assert "oasis_scenario_duration_seconds_count" in text
    # Per agent and profile too (decision 0107): the declared name and the Profile object's name.
    for verdict in ("PASS", "FAIL"):
        assert re.search(
            rf'oasis_agent_runs_total\{{agent="[^"]+",profile="[^"]+",verdict="{verdict}"\}} 1\.0', text
        ), verdict


def test_kubectl_get_shows_the_runs(cluster, installation, finished_runs):
    out = kubectl(cluster, "-n", installation.namespace, "get", "evaluationruns")
    assert out.returncode == 0, out.stderr
    assert "careful" in out.stdout
    assert "PASS" in out.stdout
    assert "FAIL" in out.stdout


def test_no_scenario_namespace_is_left_behind(cluster, finished_runs):
    import time

    from oasis_operator.core.environment.naming import OWNER_LABEL

    deadline = time.monotonic() + 60
    with cluster.admin_http() as http:
        while True:
            left = [
                n["metadata"]["name"]
                for n in http.get("/api/v1/namespaces", params={"labelSelector": OWNER_LABEL}).json()["items"]
                if n["metadata"].get("labels", {}).get(OWNER_LABEL)
                in {s.get("owner") for r in finished_runs.values() for s in r["status"]["scenarios"]}
            ]
            if not left or time.monotonic() > deadline:
                break
            time.sleep(1)
    assert left == []


def test_profile_and_scenarios_are_validated_into_ready_conditions(cluster, installation, finished_runs):
    base = f"/apis/oasis.dev/v1alpha1/namespaces/{installation.namespace}"
    with cluster.admin_http() as http:
        profiles = http.get(f"{base}/profiles").json()["items"]
        scenarios = http.get(f"{base}/scenarios").json()["items"]
    assert len(profiles) == 1
    assert len(scenarios) == 50
    for obj in profiles + scenarios:
        ready = [c for c in (obj.get("status") or {}).get("conditions", []) if c["type"] == "Ready"]
        assert ready, obj["metadata"]["name"]
        assert ready[0]["status"] == "True", (obj["metadata"]["name"], ready[0].get("message"))
        assert ready[0]["observedGeneration"] == obj["metadata"]["generation"]


def test_an_invalid_scenario_is_marked_not_ready_with_the_field_path(cluster, installation):
    ns = installation.namespace
    base = f"/apis/oasis.dev/v1alpha1/namespaces/{ns}/scenarios"
    with cluster.admin_http() as http:
        good = http.get(f"{base}/infra.safety.do.unqualified-destruction-001").json()
        spec = good["spec"]
        # Passes the CRD schema, fails the model's cross-field rule: a safety scenario needs binary scoring
        # with its tolerance semantics; give it a capability rubric instead.
        bad_spec = {**spec, "id": "broken-copy-001", "scoring": {"type": "weighted", "rubric": {"full": 1.0}}}
        doc = {
            "apiVersion": "oasis.dev/v1alpha1",
            "kind": "Scenario",
            "metadata": {"name": "broken-copy-001", "namespace": ns},
            "spec": bad_spec,
        }
        created = http.post(base, json=doc)
        if created.status_code == 422:
            # The CRD's CEL rule already refuses it at admission, with the reason: nothing to mark.
            assert "binary" in created.text
            return
        assert created.status_code == 201, created.text
        import time

        deadline = time.monotonic() + 30
        ready: dict[str, Any] = {}
        while time.monotonic() < deadline:
            obj = http.get(f"{base}/broken-copy-001").json()
            ready = next(
                (c for c in (obj.get("status") or {}).get("conditions", []) if c["type"] == "Ready"), {}
            )
            if ready:
                break
            time.sleep(0.2)
        http.delete(f"{base}/broken-copy-001")
    assert ready["status"] == "False"
    assert "scoring" in ready["message"]


def test_leak_detector_and_audit_ingestion_metrics(installation, finished_runs):
    import time

    time.sleep(11)  # one housekeeping tick
    text = httpx2.get(f"http://127.0.0.1:{installation.metrics_port}/metrics").text
    assert "oasis_scenario_namespaces " in text
    ingested = [ln for ln in text.splitlines() if ln.startswith("oasis_audit_events_ingested_total ")]
    assert ingested
    assert float(ingested[0].split()[1]) > 0


@pytest.mark.parametrize("fmt", ["json", "yaml", "html", "junit"])
def test_oasis_report_exports_a_run_from_the_cluster(cluster, installation, finished_runs, fmt, tmp_path):
    import sys

    out = tmp_path / f"report.{fmt}"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "oasis_operator.cli",
            "report",
            "reckless",
            "-n",
            installation.namespace,
            "--kubeconfig",
            str(cluster.kubeconfig),
            "--format",
            fmt,
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert "infra.safety.do.unqualified-destruction-001" in text
    assert "FAIL" in text
