"""GitOps gates on real runs: the objects the API server returns, in every state a run goes through,
judged by kstatus (its own library), Argo CD's health check (Lua 5.1) and Flux's expressions (cel-go):
all three agree, and only a PASS opens a gate. And the CI snippet of docs/gitops/lifecycle.md, run as
written, exits 0 for a PASS and non-zero for a FAIL."""

from __future__ import annotations

import re
import subprocess
import time
from typing import Any

import pytest

from oasis_operator.devcluster import kube, stack
from tests.operator.test_lifecycle import merge, path, wait_for
from tests.shipping import test_argocd_health as argo
from tests.shipping import test_flux_health as flux
from tests.shipping.conftest import REPO, go_tool, run_go_tool

pytestmark = pytest.mark.cluster

GATE = {"Current": "open", "Failed": "shut", "InProgress": "wait", "Healthy": "open", "Degraded": "shut",
        "Progressing": "wait", "Suspended": "wait"}


def gates(objects: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    k = [GATE[r["status"]] for r in run_go_tool(go_tool("kstatus"), objects)]
    a = [GATE[argo.health(o)[0]] for o in objects]
    f = [GATE[s] for s in flux.evaluate(flux.fluxcel_binary(), objects)]
    return list(zip(k, a, f, strict=True))


def test_every_state_of_a_real_run_reads_the_same_for_kstatus_argocd_and_flux(cluster, installation, finished_runs):
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
            "suspended": wait_for(lambda: (r := http.get(path(ns, "gate-suspended")).json())["status"].get(
                "observedGeneration") and r),
            "waiting": wait_for(lambda: (r := http.get(path(ns, "gate-waiting")).json())["status"].get(
                "observedGeneration") and r),
            "cancelled": stack.wait_completed(http, ns, "gate-cancelled", 60),
            "passed": http.get(path(ns, "careful")).json(),
            "failed": http.get(path(ns, "reckless")).json(),
        }
        merge(http, ns, "careful", {"spec": {"parallelism": 3}})
        objects["passed, edited, observed"] = wait_for(
            lambda: (r := http.get(path(ns, "careful")).json())["status"]["observedGeneration"]
            == r["metadata"]["generation"] and r, timeout=30)
        http.delete(f"/api/v1/namespaces/{lonely}")
    assert fresh["status"]["conditions"][0]["reason"] == "Pending", "the CRD's default, before any operator"
    got = dict(zip(objects, gates(list(objects.values())), strict=True))
    want = {"fresh": "wait", "suspended": "wait", "waiting": "wait", "cancelled": "shut", "passed": "open",
            "failed": "shut", "passed, edited, observed": "open"}
    assert got == {name: (gate, gate, gate) for name, gate in want.items()}


def lifecycle_snippet() -> str:
    doc = (REPO / "docs" / "gitops" / "lifecycle.md").read_text()
    (block,) = [b for b in re.findall(r"```bash\n(.*?)```", doc, re.S) if "kubectl" in b and "wait" in b]
    return block


@pytest.mark.parametrize(("run", "code"), [("careful", 0), ("reckless", 1)])
def test_the_ci_snippet_gates_on_the_verdict(cluster, installation, finished_runs, run, code):
    from oasis_operator.devcluster import binaries

    kubectl = binaries.resolve(quiet=True).path("kubectl")
    script = lifecycle_snippet().replace("evals", installation.namespace).replace("payments-agent-gate", run)
    started = time.monotonic()
    done = subprocess.run(["bash", "-eo", "pipefail", "-c", script.replace("kubectl ", f"{kubectl} --kubeconfig "
                                                                          f"{cluster.kubeconfig} ")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == code, done.stderr
    assert time.monotonic() - started < 60, "a finished run is not waited for"
