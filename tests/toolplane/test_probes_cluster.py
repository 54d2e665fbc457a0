"""The tool-plane back-ends' self-tests (the run's preflight, decision 0057) on the real control plane
and the session's real back-ends: each configured back-end answers; one whose directory is gone, whose
git server does not answer or whose objects the API server does not serve is reported unreachable
(which ends a run before its first scenario); an adapter without a self-test is reported as such."""

from __future__ import annotations

from pathlib import Path

import pytest

import oasis_operator.adapters.toolplane.logs as logs_module
import oasis_operator.adapters.toolplane.routes as routes_module
from oasis_operator.adapters.toolplane import Cluster, ToolPlane, discovered, serves_routes, tool_plane
from oasis_operator.adapters.toolplane.gitops import GitOps
from oasis_operator.adapters.toolplane.logs import PodLogs
from oasis_operator.adapters.toolplane.routes import TrafficRoutes
from oasis_operator.devcluster.stack import free_port

pytestmark = pytest.mark.cluster


async def test_every_back_end_of_the_session_answers_its_self_test(toolplane: ToolPlane) -> None:
    probes = {p.name: p for p in await toolplane.probe(timeout=10)}
    assert set(probes) == {
        "logs",
        "dashboards",
        "runbooks",
        "gitops",
        "node-conditions",
        "metrics",
        "alerts",
        "traces",
        "resource-metrics",
        "traffic-routing",
        "database",
    }
    for p in probes.values():
        assert p.reachable is True, p
    assert "configmaps served at /api/v1" in probes["dashboards"].detail
    assert "nodes served at /api/v1" in probes["node-conditions"].detail
    assert "VictoriaMetrics answers" in probes["metrics"].detail
    assert "vmauth answers" in probes["metrics"].detail
    assert "vmalert answers" in probes["alerts"].detail
    assert "the jaeger binary is at" in probes["traces"].detail
    assert "clusterlogs served at /apis/kwok.x-k8s.io/v1alpha1" in probes["logs"].detail
    assert "gitrepositories served" in probes["gitops"].detail
    assert "kustomizations served" in probes["gitops"].detail
    assert "configmaps served at /api/v1" in probes["runbooks"].detail
    assert "pods served at /apis/metrics.k8s.io/v1beta1" in probes["resource-metrics"].detail
    assert "clusterresourceusages served" in probes["resource-metrics"].detail
    assert "httproutes served at /apis/gateway.networking.k8s.io/v1" in probes["traffic-routing"].detail
    assert "PostgreSQL 1" in probes["database"].detail
    assert "answers at postgresql://" in probes["database"].detail


class NoSelfTest:
    name = "traces"


@pytest.mark.parametrize(
    ("broken", "detail_has"),
    [
        pytest.param("logs-directory", "missing or not writable", id="the log back-end's directory is gone"),
        pytest.param("git-server", "the git server http://127.0.0.1:", id="the git server does not answer"),
        pytest.param(
            "not-served",
            "does not serve clusterlogs",
            id="the API server does not serve the back-end's objects",
        ),
    ],
)
async def test_a_broken_back_end_is_reported_unreachable(
    toolplane: ToolPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, broken: str, detail_has: str
) -> None:
    logs = toolplane.adapters["logs"]
    gitops = toolplane.adapters["gitops"]
    assert isinstance(logs, PodLogs)
    assert isinstance(gitops, GitOps)
    if broken == "logs-directory":
        adapter: PodLogs | GitOps = PodLogs(logs.http, tmp_path / "gone", logs.server)
        name = "logs"
    elif broken == "git-server":
        tmp_path.joinpath("gitops").mkdir()
        adapter = GitOps(gitops.http, tmp_path / "gitops", f"http://127.0.0.1:{free_port()}")
        name = "gitops"
    else:
        adapter = PodLogs(logs.http, logs.directory, logs.server)
        name = "logs"
        # Discovery of a group version that is served but has no such resource.
        monkeypatch.setattr(logs_module, "CLUSTER_LOGS", "/api/v1/clusterlogs")
    (probe,) = await ToolPlane({name: adapter}).probe(timeout=10)
    assert probe.reachable is False, probe
    assert detail_has in probe.detail


async def test_an_adapter_without_a_self_test_is_reported_as_not_self_tested() -> None:
    (probe,) = await ToolPlane({"traces": NoSelfTest()}).probe()  # type: ignore[dict-item]
    assert (probe.name, probe.reachable) == ("traces", None)
    assert "no self-test" in probe.detail


async def test_the_routing_back_end_is_found_only_where_the_cluster_serves_httproutes(
    toolplane: ToolPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator's start-up discovery (decision 0063): the session cluster serves HTTPRoutes; a group
    version the API server does not serve (as on a cluster without the Gateway API's CRDs) is no back-end,
    and the support step then refuses a traffic weight naming why."""
    routing = toolplane.adapters["traffic-routing"]
    assert isinstance(routing, TrafficRoutes)
    assert await serves_routes(routing.http) is True
    monkeypatch.setattr(routes_module, "GROUP_VERSION", "/apis/gateway.networking.k8s.io/v1alpha9")
    assert await serves_routes(routing.http) is False
    on = Cluster(routing.http, "https://unused")
    assert await discovered(on) == {}
    plane = tool_plane(on, await discovered(on))
    assert "traffic-routing" not in plane.backends
    (probe,) = await ToolPlane({"traffic-routing": routing}).probe(timeout=10)
    assert probe.reachable is False, probe
