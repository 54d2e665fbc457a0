"""The chart's RBAC is derived from what the operator really does: every request the operator made
during the end-to-end runs (read from the audit log, under the operator's own identity) must be allowed
by the ClusterRole the chart grants its ServiceAccount."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from oasis_operator.devcluster.certs import OPERATOR_USER
from tests.shipping.conftest import REPO, Tools, helm_template

pytestmark = pytest.mark.cluster

# The chart's back-ends (metrics, alerts, traces; decision 0061) are called over HTTP only, so this
# module's operator runs without a tool plane. Operators of other modules in the session run with the dev
# cluster's whole tool plane; their requests to the API group of the back-ends the chart does not deploy
# (logs and resource usage: kwok's) are the known gap, listed here by group so that anything else the
# chart lacks still fails. Their requests to Flux's objects must be allowed by the chart with its GitOps
# back-end on (decision 0072), and only with it.
OPERATOR_TOOLPLANE = False
TOOLPLANE_GROUPS = {"kwok.x-k8s.io"}
#: What only toolPlane.gitops grants: each scenario's Flux source and what applies it.
GITOPS = {("source.toolkit.fluxcd.io", "gitrepositories"), ("kustomize.toolkit.fluxcd.io", "kustomizations")}


def operator_requests(audit_log: Path) -> set[tuple[str, str, str, str]]:
    """(verb, group, resource[/subresource], scope) of every API request the operator made."""
    seen: set[tuple[str, str, str, str]] = set()
    for path in sorted(audit_log.parent.glob("audit*.log")):
        for line in path.read_bytes().splitlines():
            if OPERATOR_USER.encode() not in line:
                continue
            e = json.loads(line)
            if e.get("user", {}).get("username") != OPERATOR_USER or not e.get("objectRef"):
                continue
            ref = e["objectRef"]
            resource = ref.get("resource", "") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
            seen.add(
                (
                    e["verb"],
                    ref.get("apiGroup", ""),
                    resource,
                    "namespaced" if ref.get("namespace") else "cluster",
                )
            )
    return seen


def allows(rules: list[dict[str, Any]], verb: str, group: str, resource: str) -> bool:
    base = resource.split("/")[0]
    for r in rules:
        if r.get("resourceNames"):
            continue  # name-restricted rules cannot be shown to cover requests made by name
        groups, resources, verbs = r.get("apiGroups", []), r.get("resources", []), r.get("verbs", [])
        if not ("*" in groups or group in groups):
            continue
        if not ("*" in verbs or verb in verbs):
            continue
        sub = resource.split("/", 1)[1] if "/" in resource else None
        if (
            "*" in resources
            or resource in resources
            or (sub and f"*/{sub}" in resources)
            or (not sub and base in resources)
        ):
            return True
    return False


def chart_rules(tmp_path: Path, values: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The rules the chart grants the ServiceAccount of the Deployment that runs `oasis operator run`."""
    done = subprocess.run(["bash", str(REPO / "tools" / "install-tools.sh")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    directory = Path(done.stdout.strip().splitlines()[-1])
    rendered = helm_template(
        Tools(helm=directory / "helm", kubeconform=directory / "kubeconform"), tmp_path, values
    )
    assert rendered.returncode == 0, rendered.stderr
    docs = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    operator_sa = next(
        d["spec"]["template"]["spec"]["serviceAccountName"]
        for d in docs
        if d["kind"] == "Deployment"
        and any(a.startswith("--audit-") for a in d["spec"]["template"]["spec"]["containers"][0]["args"])
    )
    role_names = {
        b["roleRef"]["name"]
        for b in docs
        if b["kind"] == "ClusterRoleBinding" and any(s.get("name") == operator_sa for s in b["subjects"])
    }
    return [
        rule
        for d in docs
        if d["kind"] == "ClusterRole" and d["metadata"]["name"] in role_names
        for rule in d["rules"]
    ]


#: What only rbac.clusterScopedScenarios grants: objects outside any namespace that scenarios create.
OPT_IN = {
    ("", "persistentvolumes"),
    ("rbac.authorization.k8s.io", "clusterroles"),
    ("rbac.authorization.k8s.io", "clusterrolebindings"),
    ("", "nodes"),
}


def test_every_request_of_the_operator_is_allowed_by_the_chart(
    cluster, installation, finished_runs, tmp_path
):
    """Every request the operator made in this session (end-to-end runs, the Job agent, the lifecycle
    tests) is allowed by the chart with its opt-ins and its GitOps back-end on; by default, all but the
    cluster-scoped objects of scenarios, which an operator without the opt-in excludes instead of
    attempting, and Flux's objects, which only an operator with a GitOps back-end touches."""
    requests = operator_requests(cluster.audit_log)
    assert len(requests) > 20, "the end-to-end runs made the operator's requests"
    requests = [(v, g, r, scope) for v, g, r, scope in requests if g not in TOOLPLANE_GROUPS]
    everything = chart_rules(
        tmp_path, {"rbac": {"clusterScopedScenarios": True}, "toolPlane": {"gitops": {"enabled": True}}}
    )
    missing = sorted(
        f"{v} {g or 'core'}/{r} ({scope})" for v, g, r, scope in requests if not allows(everything, v, g, r)
    )
    assert missing == [], "the chart's ClusterRole lacks rules the operator needs"
    defaults = chart_rules(tmp_path, None)
    outside = sorted({(g, r.split("/")[0], v) for v, g, r, _ in requests if not allows(defaults, v, g, r)})
    assert {(g, resource) for g, resource, _ in outside} <= OPT_IN | GITOPS, outside
    # The opt-in is what lets the operator grant rights it does not hold: never by default.
    assert not allows(defaults, "escalate", "rbac.authorization.k8s.io", "clusterroles")
    assert allows(everything, "escalate", "rbac.authorization.k8s.io", "clusterroles")
