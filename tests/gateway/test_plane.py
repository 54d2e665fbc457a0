"""The join of the two tool-plane seams: what the provider's back-ends hand out becomes the gateway's
upstreams (only endpoints with a credential of their own, only for interfaces the scenario lists, the
credential in the header the gateway adds), and a temporal condition becomes a timed change given to the
port's ``apply``, the same path as the plan's timed log lines. (The real back-ends behind this are in
``tests/operator/test_tool_gateway.py`` and ``test_temporal_node.py``.)"""

from __future__ import annotations

import base64

import pytest

from oasis_operator.adapters.gateway.plane import PortApplier, PortUpstreams
from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.core.errors import ToolPlaneError
from oasis_operator.core.gateway.calls import upstream_authorization
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.core.ports import AgentAccess, ToolEndpoint
from oasis_operator.core.stimuli.changes import NodeCondition
from oasis_operator.core.toolplane import registry
from oasis_operator.core.toolplane.plan import TimedChange
from tests.stimuli.test_temporal_support import CORPUS, OPERATOR, ROLLOUT

ACCESS = AgentAccess("system:serviceaccount:x:oasis-agent", "x", "kubeconfig", "")


class Port:
    """A tool plane as the workflow sees it: what it hands out, and what it is asked to apply."""

    backends = OPERATOR

    def __init__(self, endpoints: dict[str, ToolEndpoint]) -> None:
        self._endpoints = endpoints
        self.applied: list[TimedChange] = []

    async def inject(self, plan): ...
    async def settle(self, plan): ...
    async def cleanup(self, plan): ...

    async def endpoints(self, plan, access):
        return dict(self._endpoints)

    async def apply(self, plan, change):
        self.applied.append(change)


def rollout_plan():
    scenario, _ = parse_scenario(CORPUS[ROLLOUT])
    return plan_environment(scenario, suffix="ddddd", owner="o", backends=OPERATOR)


async def test_each_endpoint_with_its_own_credential_becomes_an_upstream_of_a_listed_interface():
    port = Port(
        {
            "gitops": ToolEndpoint("gitops", "http://git:1/ns/infra.git", "oasis-ns:pw"),
            "observability-metrics": ToolEndpoint("observability-metrics", "http://vmauth:2", "tok"),
            "observability-logging": ToolEndpoint("observability-logging", "https://api:6443", ""),
            "observability-tracing": ToolEndpoint("observability-tracing", "http://jaeger:3", "t2"),
        }
    )
    got = await PortUpstreams(port).upstreams(
        rollout_plan(), ACCESS, ["gitops", "observability-metrics", "observability-logging"]
    )
    assert sorted(got) == ["gitops", "observability-metrics"]  # logs: the API server; tracing: not listed
    assert got["gitops"].url == "http://git:1/ns/infra.git"
    assert got["gitops"].headers == (("Authorization", "Basic " + base64.b64encode(b"oasis-ns:pw").decode()),)
    assert got["observability-metrics"].headers == (("Authorization", "Bearer tok"),)


async def test_a_back_end_without_a_credential_is_fronted_too_unless_read_through_the_api_server():
    port = Port(
        {
            "observability-tracing": ToolEndpoint("observability-tracing", "http://jaeger:3", ""),
            "observability-dashboards": ToolEndpoint("observability-dashboards", "https://api:6443", ""),
        }
    )
    got = await PortUpstreams(port).upstreams(
        rollout_plan(), ACCESS, ["observability-tracing", "observability-dashboards"]
    )
    assert sorted(got) == ["observability-tracing"]  # a Jaeger of the scenario's own: recorded, no header
    assert got["observability-tracing"].headers == ()


AUTH = {
    "a user:password pair is HTTP Basic (the git server's)": (
        "u:p:q",
        "Basic " + base64.b64encode(b"u:p:q").decode(),
    ),
    "anything else is a bearer token (vmauth's)": ("abc.DEF-123", "Bearer abc.DEF-123"),
}


@pytest.mark.parametrize(("credential", "header"), AUTH.values(), ids=AUTH.keys())
def test_a_credential_becomes_the_header_the_gateway_adds(credential, header):
    assert upstream_authorization(credential) == header


async def test_a_temporal_condition_goes_to_the_ports_apply_as_a_timed_node_change():
    port = Port({})
    plan = rollout_plan()
    stimulus = next(s for s in CORPUS[ROLLOUT]["stimuli"] if s["type"] == "temporal_condition")
    await PortApplier(port).apply(plan, 1, stimulus)
    assert port.applied == [
        TimedChange(
            0.0,
            registry.NODE_CONDITIONS,
            node=NodeCondition(
                "node-2", "DiskPressure", "True", "KubeletHasDiskPressure", "kubelet has disk pressure"
            ),
        )
    ]


async def test_a_change_the_support_check_would_have_refused_is_a_tool_plane_fault_not_a_guess():
    port = Port({})
    with pytest.raises(ToolPlaneError, match=r"stimuli\[3\]: .*not a node the scenario declares"):
        await PortApplier(port).apply(
            rollout_plan(),
            3,
            {
                "type": "temporal_condition",
                "timing": "at_1s",
                "description": "node-7 transitions to DiskPressure=True",
            },
        )
    assert port.applied == []
