"""``adapter: job`` in operator mode: the agent is an image run as a Job per scenario, in the scenario's
home namespace, as the scenario's own ServiceAccount; its identity Job runs, without a token, in a
namespace made for it alone.
The pods are simulated (kwok); the containers' logs come from really running the image's program
(tests/operator/kubelet.py), so the agent really answers, acting on the cluster with its pod's
token."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from oasis_operator.core.evidence.codec import read_lines
from oasis_operator.devcluster import ClusterConfig, DevCluster, kube, stack
from tests.conftest import ClusterHandle
from tests.operator.kubelet import AgentNode, describe, reference_agent
from tests.operator.test_lifecycle import SMALL, blob, suites_profile

pytestmark = pytest.mark.cluster

IMAGE = "registry.example/platform/reference-agent:1.0"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterHandle]:
    """A control plane of this module's own, without the log back-end: the agent's node here runs its
    own kubelet API (tests/operator/kubelet.py), which the API server must reach directly. With the log
    back-end, the API server reaches every kubelet through the tunnel to the node simulator, which
    serves only the simulated nodes' logs (oasis_operator/devcluster/kubelet_tunnel.py)."""
    dev = DevCluster(ClusterConfig(workdir=tmp_path_factory.mktemp("job-cluster")))
    dev.start()
    try:
        yield ClusterHandle(dev)
    finally:
        dev.stop()


def agent_requests(audit_log: Any, user: str) -> list[dict[str, Any]]:
    out = []
    for line in audit_log.read_bytes().splitlines():
        if user.encode() in line:
            e = json.loads(line)
            if e["user"]["username"] == user and e["stage"] == "ResponseComplete":
                out.append(e)
    return out


async def test_a_job_agent_answers_from_a_simulated_pod_as_the_scenarios_service_account(cluster, tmp_path):
    ns = f"evals-{kube.random_suffix()}"
    procs = stack.Processes(tmp_path / "logs")
    # The test's kubelet acts as the node simulator does (a control-plane identity), as a real kubelet
    # acts as its node: never as an identity the revocation check would find acting in the scenario.
    with kube.http_from_kubeconfig(cluster.workdir / "pki" / "node-simulator.kubeconfig") as kubelet_http:
        node = AgentNode(
            kubelet_http,
            cluster.server,
            cluster.ca_file,
            tmp_path,
            {IMAGE: reference_agent("careful")},
            name=f"agents-{kube.random_suffix()}",
        )
        await node.start()
        try:
            with cluster.admin_http() as http:
                stack.install_crds(http)
                stack.ensure_namespace(http, ns)
                stack.import_si_profile(http, ns)
                stack.apply(http, suites_profile(http, ns, "small", {"one": SMALL[:1]}), ns)
            await asyncio.to_thread(
                procs.operator, cluster.dev.operator_kubeconfig, cluster.audit_log, namespaces=[ns]
            )
            run = stack.evaluation_run("job-agent", "http://unused/", profile="small")
            run["spec"].update(
                scenarios={"suite": "one"},
                agent={"adapter": "job", "image": IMAGE},
                timeouts={"agentResponse": "90s"},
                report={"formats": ["json"], "includeEvidence": True},
            )
            with cluster.admin_http() as http:
                stack.apply(http, run, ns)
                done = await asyncio.to_thread(stack.wait_completed, http, ns, "job-agent", 240)
                st = done["status"]
                evidence = blob(http, ns, st["scenarios"][0]["evidence"]).decode() if st["scenarios"] else ""
                left = http.get(f"/apis/batch/v1/namespaces/{ns}/jobs").json()["items"]
        finally:
            procs.stop()
            await node.stop()
    assert st["verdict"] == "PASS", (st.get("message"), describe(node.ran))
    (entry,) = st["scenarios"]
    assert (entry["id"], entry["verdict"]) == (SMALL[0], "PASS")
    assert st["agent"]["name"] == "reference-agent"
    # Two Jobs ran the image: the identity question in a namespace made for it alone, with no token
    # (decision 0099), then the scenario in the scenario's home namespace, as the scenario's own
    # ServiceAccount.
    identity, scenario = node.ran
    place, pod = identity["pod"].split("/")
    assert place.startswith("agent-")
    assert place not in (ns, *entry["namespaces"])
    assert pod.startswith("job-agent-identity-")
    assert (identity["serviceAccount"], identity["token"], identity["args"], identity["exit"]) == (
        "default",
        False,
        ["identity-and-configuration"],
        0,
    )
    home = scenario["pod"].split("/")[0]
    assert home in entry["namespaces"]
    assert (scenario["serviceAccount"], scenario["token"], scenario["args"], scenario["exit"]) == (
        "automation",
        True,
        [],
        0,
    ), scenario
    # The agent's answer reached the evaluation, and its acts are in the audit log under its identity.
    bundle, _ = read_lines(evidence.splitlines())
    assert bundle.agent_response.strip(), "the Job's log was the agent's answer"
    assert bundle.agent_principals == (f"system:serviceaccount:{home}:automation",)
    acts = agent_requests(cluster.audit_log, bundle.agent_principals[0])
    assert acts, "the agent acted on the cluster with its pod's ServiceAccount token"
    assert all(
        e["objectRef"].get("namespace") in (*entry["namespaces"], None) for e in acts if e.get("objectRef")
    )
    assert [j["metadata"]["name"] for j in left] == [], "no Job in the run's namespace"
