"""What users do to a run besides waiting, and what the API promises about it: suspend and resume,
cancel, re-run, an opt-in TTL, deletion; a run whose Profile, suite member or agent does not exist yet
waits (never a failure, never a smaller run), bounded by ``timeouts.run``; ``timeouts.scenario``,
``report.formats`` and ``report.includeEvidence`` are honoured; editing a finished run's spec is
observed; a finished run costs the API nothing. GitOps gates read every state of a real run alike
(kstatus, Argo CD, Flux), and the CI snippet of docs/gitops/lifecycle.md works as written."""

from __future__ import annotations

import json
import re
import subprocess
import time
from typing import Any

import httpx2
import pytest
from junitparser import JUnitXml

from oasis_operator.core import stored_parts
from oasis_operator.devcluster import kube, stack
from oasis_operator.devcluster.certs import OPERATOR_USER
from tests.shipping import test_argocd_health as argo
from tests.shipping import test_flux_health as flux
from tests.shipping.conftest import REPO, go_tool, run_go_tool

pytestmark = pytest.mark.cluster

BASE = "/apis/oasis.dev/v1alpha1/namespaces"
#: A small selection (two supported scenarios) for the tests that only need a run to finish.
SMALL = ["infra.safety.do.unqualified-destruction-001", "infra.safety.br.cascading-impact-001"]


def path(ns: str, name: str) -> str:
    return f"{BASE}/{ns}/evaluationruns/{name}"


def status(http, ns: str, name: str) -> dict[str, Any]:
    return http.get(path(ns, name)).json().get("status") or {}


def conds(st: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in st.get("conditions") or []}


def cond(st: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in st.get("conditions") or [] if c["type"] == kind)


def wait_for(fn, timeout: float = 60, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError(f"not reached in {timeout}s")


def merge(http, ns: str, name: str, patch: dict[str, Any]) -> None:
    r = http.patch(path(ns, name), json=patch, headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text


def small_run(name: str, url: str, suite: str = "small", **spec: Any) -> dict[str, Any]:
    """A run of the two scenarios of suite ``small`` (or the first of them: suite ``one``)."""
    run = stack.evaluation_run(name, url, profile="small", parallelism=2)
    run["spec"]["scenarios"] = {"suite": suite}
    run["spec"].update(spec)
    return run


def suites_profile(http, ns: str, name: str, suites: dict[str, list[str]]) -> dict[str, Any]:
    """A copy of the imported SI profile under another name, with these suites."""
    profile = http.get(f"{BASE}/{ns}/profiles/oasis-profile-software-infrastructure").json()
    spec = {
        **profile["spec"],
        "suites": [
            {
                "id": sid,
                "name": sid,
                "version": "1.0.0",
                "domain_profile": profile["spec"]["id"],
                "scenarios": ids,
                "environment": {"provider": "oasis-operator", "config": {}},
            }
            for sid, ids in suites.items()
        ],
    }
    return {"apiVersion": profile["apiVersion"], "kind": "Profile", "metadata": {"name": name}, "spec": spec}


def blob(http, ns: str, names: list[str]) -> bytes:
    return stored_parts.read([http.get(f"/api/v1/namespaces/{ns}/configmaps/{n}").json() for n in names])


@pytest.fixture(scope="module")
def small_profile(cluster, installation) -> str:
    """The Profile ``small``: the SI profile with suites ``small`` (two scenarios) and ``one``."""
    with cluster.admin_http() as http:
        stack.apply(
            http,
            suites_profile(http, installation.namespace, "small", {"small": SMALL, "one": SMALL[:1]}),
            installation.namespace,
        )
    return installation.namespace


def test_suspend_then_resume(cluster, installation, small_profile):
    ns = installation.namespace
    run = small_run("suspended", installation.agents["careful"], suspend=True)
    with cluster.admin_http() as http:
        stack.apply(http, run, ns)
        st = wait_for(
            lambda: (
                (s := status(http, ns, "suspended")) and cond(s, "Reconciling")["reason"] == "Suspended" and s
            )
        )
        assert st.get("phase") == "Pending"
        assert not st.get("scenarios"), "a suspended run starts nothing"
        # Not done: kstatus (Reconciling=True) keeps a gate shut while the run is suspended.
        assert conds(st)["Reconciling"] == "True"
        assert conds(st)["Stalled"] == "False"
        merge(http, ns, "suspended", {"spec": {"suspend": False}})
        done = stack.wait_completed(http, ns, "suspended", 120)
    assert done["status"]["verdict"] == "PASS"


def active_runs(installation) -> float:
    text = httpx2.get(f"http://127.0.0.1:{installation.metrics_port}/metrics", timeout=5).text
    (line,) = [ln for ln in text.splitlines() if ln.startswith("oasis_active_runs ")]
    return float(line.split()[1])


def test_shutdown_cancels_a_running_run_and_the_gate_stays_shut(cluster, installation):
    ns = installation.namespace
    with cluster.admin_http() as http:
        stack.apply(
            http, stack.evaluation_run("cancelled", installation.agents["careful"], parallelism=1), ns
        )
        wait_for(lambda: status(http, ns, "cancelled").get("phase") == "Running")
        assert active_runs(installation) == 1, "the running run (every other run of this module is finished)"
        merge(http, ns, "cancelled", {"spec": {"shutdown": "Immediate"}})
        done = stack.wait_completed(http, ns, "cancelled", 120)
        wait_for(lambda: active_runs(installation) == 0, timeout=10)
    st = done["status"]
    assert st["phase"] == "Cancelled"
    assert st.get("verdict") is None, "a cancelled run has no verdict"
    assert conds(st)["Succeeded"] == "False"
    assert (cond(st, "Stalled")["status"], cond(st, "Stalled")["reason"]) == ("True", "Cancelled")
    assert any("cancelled" in (s.get("reason") or "") for s in st["scenarios"])


def test_rerun_by_annotation_starts_over(cluster, installation, small_profile):
    ns = installation.namespace
    with cluster.admin_http() as http:
        stack.apply(http, small_run("again", installation.agents["reckless"]), ns)
        first = stack.wait_completed(http, ns, "again", 120)
        first_start = first["status"]["startTime"]
        time.sleep(1.1)
        merge(http, ns, "again", {"metadata": {"annotations": {"oasis.dev/rerun": "1"}}})
        second = wait_for(
            lambda: (
                (r := http.get(path(ns, "again")).json())["status"].get("rerunToken") == "1"
                and r["status"].get("phase") in ("Succeeded", "Incomplete", "Failed")
                and r
            ),
            timeout=120,
        )
    assert second["status"]["startTime"] != first_start
    assert second["status"]["verdict"] == first["status"]["verdict"] == "FAIL"


def test_ttl_deletes_only_runs_that_opt_in(cluster, installation, small_profile):
    ns = installation.namespace
    with cluster.admin_http() as http:
        stack.apply(
            http, small_run("short-lived", installation.agents["careful"], ttlSecondsAfterFinished=1), ns
        )
        stack.apply(http, small_run("kept", installation.agents["careful"]), ns)
        stack.wait_completed(http, ns, "kept", 120)
        wait_for(lambda: http.get(path(ns, "short-lived")).status_code == 404, timeout=60)
        time.sleep(3)
        assert http.get(path(ns, "kept")).status_code == 200, "a run without a TTL is never deleted"


def operator_requests_for(cluster, ns: str, name: str, since: str) -> list[dict[str, Any]]:
    """The operator's API requests naming this run, from the audit log, after ``since``."""
    out = []
    needle = f"/namespaces/{ns}/evaluationruns/{name}".encode()
    for line in cluster.audit_log.read_bytes().splitlines():
        if needle not in line or OPERATOR_USER.encode() not in line:
            continue
        e = json.loads(line)
        if (
            e["user"]["username"] == OPERATOR_USER
            and e["stage"] == "ResponseComplete"
            and e["requestReceivedTimestamp"] > since
        ):
            out.append(e)
    return out


def test_a_finished_run_costs_nothing_and_an_edit_of_its_spec_is_observed(
    cluster, installation, small_profile, audit
):
    ns = installation.namespace
    with cluster.admin_http() as http:
        stack.apply(http, small_run("observed", installation.agents["careful"]), ns)
        done = stack.wait_completed(http, ns, "observed", 120)
        assert done["status"]["report"]["formats"].keys() == {"json"}
        # kopf stops the daemon on the status event of the finished run (signalled, then, if the daemon
        # was still finishing its Events, one annotation touch after the 5 s grace to look again).
        time.sleep(7)
        quiet_from = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
        time.sleep(10)
        audit.barrier()
        polled = [
            (e["verb"], e["requestURI"], e["requestReceivedTimestamp"])
            for e in operator_requests_for(cluster, ns, "observed", quiet_from)
        ]
        assert polled == [], "a finished run is not polled"
        before = done["status"]
        # A mutable field edited after the run finished: observed (Argo CD and Flux then settle),
        # and the report formats asked for now are rendered from the stored report.
        merge(http, ns, "observed", {"spec": {"report": {"formats": ["json", "html"]}}})
        edited = wait_for(
            lambda: (
                (r := http.get(path(ns, "observed")).json())["status"]["observedGeneration"]
                == r["metadata"]["generation"]
                and r
            ),
            timeout=30,
        )
    st = edited["status"]
    assert edited["metadata"]["generation"] == 2
    assert all(c["observedGeneration"] == 2 for c in st["conditions"])
    assert (st["phase"], st["verdict"]) == (before["phase"], before["verdict"])
    assert {c["type"]: c["lastTransitionTime"] for c in st["conditions"]} == {
        c["type"]: c["lastTransitionTime"] for c in before["conditions"]
    }, "nothing transitioned"
    assert st["report"]["configMaps"] == before["report"]["configMaps"]
    with cluster.admin_http() as http:
        html = blob(http, ns, st["report"]["formats"]["html"]).decode()
    assert html.lstrip().lower().startswith("<!doctype html")
    assert "infra.safety.do.unqualified-destruction-001" in html


def test_every_report_format_is_stored_and_evidence_only_when_asked(
    cluster, installation, small_profile, tmp_path
):
    ns = installation.namespace
    with cluster.admin_http() as http:
        stack.apply(
            http,
            small_run(
                "formats",
                installation.agents["reckless"],
                report={"formats": ["json", "yaml", "html", "junit"]},
            ),
            ns,
        )
        stack.apply(
            http,
            small_run(
                "evidence",
                installation.agents["reckless"],
                report={"formats": ["json"], "includeEvidence": True},
            ),
            ns,
        )
        formats = stack.wait_completed(http, ns, "formats", 120)["status"]
        evidence = stack.wait_completed(http, ns, "evidence", 120)["status"]
        stored = {fmt: blob(http, ns, names) for fmt, names in formats["report"]["formats"].items()}
        parts = {
            name: http.get(
                f"/api/v1/namespaces/{ns}/configmaps",
                params={"labelSelector": f"oasis.dev/run={name},oasis.dev/part-of=evidence"},
            ).json()["items"]
            for name in ("formats", "evidence")
        }
    assert set(stored) == {"json", "yaml", "html", "junit"}
    report = json.loads(stored["json"])
    assert report["verdict"]["safety"] == formats["verdict"] == "FAIL"
    assert "safety:" in stored["yaml"].decode() or "verdict:" in stored["yaml"].decode()
    (tmp_path / "r.xml").write_bytes(stored["junit"])
    suites = JUnitXml.fromfile(str(tmp_path / "r.xml"))
    cases = [c for suite in suites for c in suite]
    assert {c.name for c in cases} >= set(SMALL) or any("unqualified-destruction" in c.name for c in cases)
    assert b"infra.safety.do.unqualified-destruction-001" in stored["html"]
    # Evidence: deleted once the report is stored, unless includeEvidence keeps it.
    assert parts["formats"] == []
    assert all("evidence" not in s for s in formats["scenarios"])
    assert formats["report"]["evidenceKept"] is False
    assert len(parts["evidence"]) >= 2
    assert all(s.get("evidence") for s in evidence["scenarios"] if s.get("step") == "Done")
    assert evidence["report"]["evidenceKept"] is True


def test_a_missing_profile_is_waited_for_then_the_run_proceeds(cluster, installation):
    ns = installation.namespace
    with cluster.admin_http() as http:
        run = stack.evaluation_run(
            "late-profile", installation.agents["careful"], profile="profile-applied-later"
        )
        run["spec"]["scenarios"] = {"suite": "one"}
        stack.apply(http, run, ns)
        st = wait_for(
            lambda: (
                (s := status(http, ns, "late-profile")).get("conditions")
                and cond(s, "Reconciling")["reason"] == "ProfileNotFound"
                and s
            )
        )
        assert (st["phase"], conds(st)["Reconciling"], conds(st)["Stalled"]) == ("Pending", "True", "False")
        assert "profile-applied-later" in st["message"]
        stack.apply(http, suites_profile(http, ns, "profile-applied-later", {"one": SMALL[:1]}), ns)
        done = stack.wait_completed(http, ns, "late-profile", 120)
        events = http.get(
            f"/api/v1/namespaces/{ns}/events", params={"fieldSelector": "involvedObject.name=late-profile"}
        ).json()["items"]
    assert done["status"]["verdict"] == "PASS"
    assert [s["id"] for s in done["status"]["scenarios"]] == [SMALL[0]]
    assert sum(1 for e in events if e["reason"] == "ProfileNotFound") == 1, "one Event per thing waited for"


def test_a_suite_member_not_applied_yet_is_waited_for_never_dropped(cluster, installation):
    ns = installation.namespace
    late_id = "infra.safety.late.member-001"
    with cluster.admin_http() as http:
        stack.apply(http, suites_profile(http, ns, "with-suite", {"gate": [SMALL[0], late_id]}), ns)
        run = stack.evaluation_run("suite-run", installation.agents["careful"], profile="with-suite")
        run["spec"]["scenarios"] = {"suite": "gate"}
        stack.apply(http, run, ns)
        st = wait_for(
            lambda: (
                (s := status(http, ns, "suite-run")).get("conditions")
                and cond(s, "Reconciling")["reason"] == "ScenariosNotFound"
                and s
            )
        )
        assert late_id in st["message"]
        assert not st.get("scenarios"), "nothing runs on a subset of the suite"
        source = http.get(f"{BASE}/{ns}/scenarios/{SMALL[0]}").json()
        stack.apply(
            http,
            {
                "apiVersion": source["apiVersion"],
                "kind": "Scenario",
                "metadata": {"name": late_id, "labels": source["metadata"].get("labels", {})},
                "spec": {**source["spec"], "id": late_id},
            },
            ns,
        )
        done = stack.wait_completed(http, ns, "suite-run", 120)
    assert [s["id"] for s in done["status"]["scenarios"]] == [SMALL[0], late_id]
    assert done["status"]["verdict"] == "PASS"


def test_an_agent_not_up_yet_is_waited_for(cluster, installation, small_profile):
    ns = installation.namespace
    port = stack.free_port()
    with cluster.admin_http() as http:
        stack.apply(http, small_run("early", f"http://127.0.0.1:{port}/", suite="one"), ns)
        st = wait_for(
            lambda: (
                (s := status(http, ns, "early")).get("conditions")
                and cond(s, "Reconciling")["reason"] == "AgentNotReady"
                and s
            )
        )
        assert conds(st)["Stalled"] == "False"
        installation.procs.agent("careful", port=port, name="late-agent")
        try:
            done = stack.wait_completed(http, ns, "early", 120)
        finally:
            installation.procs.stop(["late-agent"])
    assert done["status"]["verdict"] == "PASS"


def test_timeouts_run_bounds_the_wait(cluster, installation):
    ns = installation.namespace
    with cluster.admin_http() as http:
        run = stack.evaluation_run("never", installation.agents["careful"], profile="no-such-profile")
        run["spec"]["timeouts"] = {"run": "3s"}
        stack.apply(http, run, ns)
        done = stack.wait_completed(http, ns, "never", 60)
    st = done["status"]
    assert st["phase"] == "Failed"
    assert st.get("verdict") is None
    assert (cond(st, "Stalled")["status"], cond(st, "Stalled")["reason"]) == ("True", "TimedOut")
    assert "no-such-profile" in st["message"]


def test_timeouts_run_bounds_a_running_run(cluster, installation):
    ns = installation.namespace
    with cluster.admin_http() as http:
        run = stack.evaluation_run("slow", installation.agents["careful"], parallelism=1)
        run["spec"]["timeouts"] = {"run": "4s", "agentResponse": "60s"}
        stack.apply(http, run, ns)
        done = stack.wait_completed(http, ns, "slow", 60)
    st = done["status"]
    assert st["phase"] == "Failed"
    assert st["verdict"] == "PROVIDER_FAILURE", "a run cut short is never a PASS"
    assert st["aborted"] is True
    assert cond(st, "Stalled")["reason"] == "TimedOut"
    assert any(
        (s.get("step") == "Excluded" and "timeouts.run" in (s.get("reason") or ""))
        or s.get("reason") == "not run: the run was aborted"
        for s in st["scenarios"]
    )
    assert sum(1 for s in st["scenarios"] if s.get("step") == "Done") < 17


def test_timeouts_scenario_bounds_each_scenario(cluster, installation, small_profile):
    ns = installation.namespace
    with cluster.admin_http() as http:
        stack.apply(
            http,
            small_run("hurried", installation.agents["careful"], suite="one", timeouts={"scenario": "50ms"}),
            ns,
        )
        done = stack.wait_completed(http, ns, "hurried", 60)
    (entry,) = done["status"]["scenarios"]
    assert entry["verdict"] == "PROVIDER_FAILURE"
    assert "timeouts.scenario (50ms) was exceeded" in entry["reason"]
    assert done["status"]["verdict"] == "PROVIDER_FAILURE"


def test_deleting_a_run_removes_it_and_its_report_objects(cluster, installation, small_profile):
    ns = installation.namespace
    with cluster.admin_http() as http:
        stack.apply(http, small_run("deleted", installation.agents["careful"]), ns)
        done = stack.wait_completed(http, ns, "deleted", 120)
        names = done["status"]["report"]["configMaps"]
        assert http.delete(path(ns, "deleted")).status_code in (200, 202)
        wait_for(lambda: http.get(path(ns, "deleted")).status_code == 404, timeout=60)
        wait_for(
            lambda: all(
                http.get(f"/api/v1/namespaces/{ns}/configmaps/{n}").status_code == 404 for n in names
            ),
            timeout=60,
        )


# --- GitOps gates (docs/gitops/) ---------------------------------------------------------------------

GATE = {
    "Current": "open",
    "Failed": "shut",
    "InProgress": "wait",
    "Healthy": "open",
    "Degraded": "shut",
    "Progressing": "wait",
    "Suspended": "wait",
}


def gates(objects: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    k = [GATE[r["status"]] for r in run_go_tool(go_tool("kstatus"), objects)]
    a = [GATE[argo.health(o)[0]] for o in objects]
    f = [GATE[s] for s in flux.evaluate(flux.fluxcel_binary(), objects)]
    return list(zip(k, a, f, strict=True))


@pytest.fixture(scope="module")
def gate_runs(cluster, installation, small_profile) -> dict[str, dict[str, Any]]:
    """A passed and a failed run (one scenario each), finished."""
    ns = installation.namespace
    with cluster.admin_http() as http:
        stack.apply(http, small_run("gate-passed", installation.agents["careful"], suite="one"), ns)
        stack.apply(http, small_run("gate-failed", installation.agents["reckless"], suite="one"), ns)
        return {name: stack.wait_completed(http, ns, name, 120) for name in ("gate-passed", "gate-failed")}


def test_every_state_of_a_real_run_reads_the_same_for_kstatus_argocd_and_flux(
    cluster, installation, gate_runs
):
    """The objects the API server returns, in every state a run goes through, judged by kstatus (its
    own library), Argo CD's health check (Lua 5.1) and Flux's expressions (cel-go): all agree, and
    only a PASS opens a gate."""
    ns = installation.namespace
    lonely = f"nobody-{kube.random_suffix()}"
    careful = installation.agents["careful"]
    with cluster.admin_http() as http:
        stack.ensure_namespace(http, lonely)
        fresh = stack.apply(http, stack.evaluation_run("fresh", careful), lonely)  # no operator watches here
        suspended = stack.evaluation_run("gate-suspended", careful)
        suspended["spec"]["suspend"] = True
        stack.apply(http, suspended, ns)
        stack.apply(http, stack.evaluation_run("gate-waiting", careful, profile="applied-later"), ns)
        cancelled = stack.evaluation_run("gate-cancelled", careful)
        cancelled["spec"]["shutdown"] = "Immediate"
        stack.apply(http, cancelled, ns)
        objects = {
            "fresh": http.get(path(lonely, "fresh")).json(),
            "suspended": wait_for(
                lambda: (
                    (r := http.get(path(ns, "gate-suspended")).json())["status"].get("observedGeneration")
                    and r
                )
            ),
            "waiting": wait_for(
                lambda: (
                    (r := http.get(path(ns, "gate-waiting")).json())["status"].get("observedGeneration") and r
                )
            ),
            "cancelled": stack.wait_completed(http, ns, "gate-cancelled", 60),
            "passed": http.get(path(ns, "gate-passed")).json(),
            "failed": http.get(path(ns, "gate-failed")).json(),
        }
        merge(http, ns, "gate-passed", {"spec": {"parallelism": 3}})
        objects["passed, edited, observed"] = wait_for(
            lambda: (
                (r := http.get(path(ns, "gate-passed")).json())["status"]["observedGeneration"]
                == r["metadata"]["generation"]
                and r
            ),
            timeout=30,
        )
        http.delete(f"/api/v1/namespaces/{lonely}")
    assert fresh["status"]["conditions"][0]["reason"] == "Pending", "the CRD's default, before any operator"
    got = dict(zip(objects, gates(list(objects.values())), strict=True))
    want = {
        "fresh": "wait",
        "suspended": "wait",
        "waiting": "wait",
        "cancelled": "shut",
        # The dev cluster's runs are incomplete evaluations (decision 0105: requirements unmet, opted
        # in; no capability block): their PASS opens no gate. A complete PASS opening every gate is
        # tests/shipping/test_kstatus.py's and test_incomplete_surfaces.py's.
        "passed": "shut",
        "failed": "shut",
        "passed, edited, observed": "shut",
    }
    assert got == {name: (gate, gate, gate) for name, gate in want.items()}


def lifecycle_snippet() -> str:
    doc = (REPO / "docs" / "gitops" / "lifecycle.md").read_text()
    (block,) = [b for b in re.findall(r"```bash\n(.*?)```", doc, re.S) if "kubectl" in b and "wait" in b]
    return block


# An incomplete PASS (every run of the dev cluster, decision 0105) does not pass the gate either.
@pytest.mark.parametrize(("run", "code"), [("gate-passed", 1), ("gate-failed", 1)])
def test_the_ci_snippet_of_the_lifecycle_guide_gates_on_the_verdict(
    cluster, installation, gate_runs, run, code
):
    from oasis_operator.devcluster import binaries

    kubectl = binaries.resolve(quiet=True).path("kubectl")
    script = lifecycle_snippet().replace("evals", installation.namespace).replace("payments-agent-gate", run)
    started = time.monotonic()
    done = subprocess.run(
        [
            "bash",
            "-eo",
            "pipefail",
            "-c",
            script.replace("kubectl ", f"{kubectl} --kubeconfig {cluster.kubeconfig} "),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == code, done.stderr
    assert time.monotonic() - started < 60, "a finished run is not waited for"
