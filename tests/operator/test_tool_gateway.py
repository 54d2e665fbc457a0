"""The operator's recording gateway, end to end: a real operator process with the session cluster's tool
plane (``--toolplane``: logs, GitOps) runs the GitOps safety scenario beside another one. The agent is told
a ``tool_endpoints`` entry for the interface its scenario lists (and only that one), its call through the
gateway reaches the real git server, and the call is in the stored evidence of that scenario, recorded by
the gateway (not the agent's own account), with no trace in the other scenario's evidence."""

from __future__ import annotations

from typing import Any

import pytest

from oasis_operator.core.evidence.codec import read_lines
from oasis_operator.core.toolplane.registry import INTERFACE_BACKENDS
from oasis_operator.devcluster import stack
from tests.operator.test_lifecycle import blob, suites_profile

pytestmark = pytest.mark.cluster

GITOPS = "infra.safety.sc.drift-introduction-001"  # tools: container-orchestration, gitops
OTHER = "infra.safety.do.unqualified-destruction-001"  # tools: container-orchestration


@pytest.fixture(scope="module")
def evidence(cluster, installation) -> dict[str, Any]:
    ns = installation.namespace
    run = stack.evaluation_run("gateway", installation.agents["careful"], profile="gateway", parallelism=2)
    run["spec"]["scenarios"] = {"suite": "gateway"}
    run["spec"]["report"] = {"formats": ["json"], "includeEvidence": True}
    with cluster.admin_http() as http:
        stack.apply(http, suites_profile(http, ns, "gateway", {"gateway": [GITOPS, OTHER]}), ns)
        stack.apply(http, run, ns)
        st = stack.wait_completed(http, ns, "gateway", 240)["status"]
        out: dict[str, Any] = {"status": st}
        for entry in st["scenarios"]:
            out[entry["id"]] = read_lines(blob(http, ns, entry["evidence"]).decode().splitlines())[0]
    return out


def test_both_scenarios_ran_and_the_careful_agent_passed(evidence):
    st = evidence["status"]
    assert {s["id"]: s["verdict"] for s in st["scenarios"]} == {GITOPS: "PASS", OTHER: "PASS"}, st.get(
        "message"
    )


def test_the_agent_was_given_the_gitops_endpoint_and_its_call_is_the_gateways_evidence(evidence):
    bundle = evidence[GITOPS]
    # The agent's own account: it surveyed the endpoint it was offered (the reference agents read each
    # tool endpoint of the request, and only those); no other interface was offered.
    offered = [c for c in bundle.tool_calls if c.name in INTERFACE_BACKENDS]
    assert [c.name for c in offered] == ["gitops"], [c.name for c in bundle.tool_calls]
    # The gateway's account, which is what evidence rests on: the call, authenticated with the scenario's
    # token, forwarded to the git server, recorded with what the agent received.
    assert bundle.sources["tool_records"].status == "available"
    assert bundle.sources["tool_records"].type == "recording-gateway"
    calls = [r for r in bundle.tool_records if not r.refused]
    assert calls, bundle.tool_records
    (call,) = calls
    assert (call.interface, call.operation, call.request["method"]) == ("gitops", "get", "GET")
    # The git server's smart-HTTP advertisement: the back-end credential the gateway added (never shown to
    # the agent) was accepted, and the agent got the repository's refs.
    assert call.status == 200, call
    assert call.request["path"] == "/info/refs"
    # The upstream is the repository's own URL: the record still names the repository it read.
    assert call.target.removeprefix("repository/") not in ("", call.target), call.target
    assert call.request["query"] == {"service": ["git-upload-pack"]}
    assert call.response_meta["content_type"] == "application/x-git-upload-pack-advertisement"
    assert call.response_meta["bytes"] > 0
    assert len(call.response_meta["sha256"]) == 64
    assert bundle.window_start <= call.time <= bundle.window_end


def test_the_other_scenario_has_no_tool_route_and_no_record(evidence):
    bundle = evidence[OTHER]
    assert "tool_records" not in bundle.sources
    assert bundle.tool_records == ()
    assert [c.name for c in bundle.tool_calls if c.name == "gitops"] == []
