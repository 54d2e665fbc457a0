"""A tool plane is built from one factory per back-end and the cluster it works through, passed with
every call (adapters/toolplane/factory.py): the operator never names a back-end, and two planes built
for two clusters share nothing."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oasis_operator.adapters.toolplane import FACTORIES, Cluster, tool_plane
from oasis_operator.adapters.toolplane.database_settings import DatabaseSettings
from oasis_operator.adapters.toolplane.gitops import GitOps, GitOpsSettings
from oasis_operator.adapters.toolplane.logs import LogsSettings, PodLogs
from oasis_operator.adapters.toolplane.metrics import Alerts, AlertsSettings, Metrics, MetricsSettings
from oasis_operator.adapters.toolplane.routes import RoutesSettings
from oasis_operator.adapters.toolplane.traces import TracesSettings
from oasis_operator.adapters.toolplane.usage import UsageSettings
from oasis_operator.core.errors import ToolPlaneError
from oasis_operator.core.toolplane import registry

BUILT_IN = {"dashboards", "runbooks", "node-conditions"}


def settings_for(tmp: Path) -> dict[str, object]:
    """Settings of every back-end that takes any (what ToolPlaneSettings or discovery would give)."""
    return {
        "logs": LogsSettings(tmp / "logs"),
        "resource-metrics": UsageSettings(),
        "metrics": MetricsSettings(tmp / "metrics", "http://127.0.0.1:1", "http://127.0.0.1:2"),
        "alerts": AlertsSettings(tmp / "alerts" / "rules", "http://127.0.0.1:3"),
        "traces": TracesSettings(tmp / "traces"),
        "gitops": GitOpsSettings(tmp / "gitops", "http://127.0.0.1:4", "http://git.svc:4", "gitops-system"),
        "traffic-routing": RoutesSettings(),
        "database": DatabaseSettings(tmp / "database", "postgresql://oasis@127.0.0.1:5/postgres"),
    }


def cluster(name: str) -> Cluster:
    return Cluster(
        httpx2.AsyncClient(base_url=f"https://{name}.example:6443"), f"https://{name}.example:6443"
    )


def test_every_row_has_a_factory_and_every_factory_a_row() -> None:
    assert set(FACTORIES) == set(registry.BY_NAME)
    for name, factory in FACTORIES.items():
        row = registry.BY_NAME[name]
        assert (factory.parse is not None) == (row.provision is registry.Provision.CONFIGURED), name
        assert (factory.discover is not None) == (row.provision is registry.Provision.DISCOVERED), name


async def test_with_no_settings_a_plane_has_its_built_in_back_ends() -> None:
    plane = tool_plane(cluster("a"))
    assert plane.backends == BUILT_IN
    await plane.aclose()


async def test_each_back_end_is_built_from_its_settings_on_the_cluster_given(tmp_path: Path) -> None:
    on = cluster("a")
    plane = tool_plane(on, settings_for(tmp_path))
    assert plane.backends == BUILT_IN | set(settings_for(tmp_path))
    logs = plane.adapters["logs"]
    assert isinstance(logs, PodLogs)
    assert (logs.http, logs.server, logs.directory) == (on.http, on.server, tmp_path / "logs")
    gitops = plane.adapters["gitops"]
    assert isinstance(gitops, GitOps)
    assert (gitops.http, gitops.git_url, gitops.flux_url) == (
        on.http,
        "http://127.0.0.1:4",
        "http://git.svc:4",
    )
    assert gitops.principals == (
        "system:serviceaccount:gitops-system:source-controller",
        "system:serviceaccount:gitops-system:kustomize-controller",
    )
    metrics, alerts = plane.adapters["metrics"], plane.adapters["alerts"]
    assert isinstance(metrics, Metrics)
    assert isinstance(alerts, Alerts)
    # One vmauth (one grant registry, one lock) for both, on the plane's own client, not the cluster's.
    assert alerts.vmauth is metrics.vmauth
    assert metrics.vmauth.http is not on.http
    await plane.aclose()
    assert metrics.vmauth.http.is_closed


async def test_two_planes_for_two_clusters_share_no_client_and_no_vmauth(tmp_path: Path) -> None:
    a, b = cluster("a"), cluster("b")
    one, two = tool_plane(a, settings_for(tmp_path)), tool_plane(b, settings_for(tmp_path))
    for name in one.backends:
        assert one.adapters[name] is not two.adapters[name], name
        for attribute in ("http", "server", "vmauth"):
            if hasattr(one.adapters[name], attribute):
                assert getattr(one.adapters[name], attribute) != getattr(two.adapters[name], attribute)
    await one.aclose()
    await two.aclose()


#: sentence -> (settings, words the error names)
REFUSED: dict[str, tuple[dict[str, object], tuple[str, ...]]] = {
    "a back-end that has no row": ({"tarot": LogsSettings(Path("/x"))}, ("no tool-plane back-end tarot",)),
    "the alerting back-end without the metrics one": (
        {"alerts": AlertsSettings(Path("/x"), "http://127.0.0.1:3")},
        ("alerts back-end needs metrics",),
    ),
    "another back-end's settings": (
        {"gitops": LogsSettings(Path("/x"))},
        ("gitops back-end takes GitOpsSettings", "not LogsSettings"),
    ),
}


@pytest.mark.parametrize("sentence", sorted(REFUSED))
async def test_settings_a_plane_cannot_be_built_from_are_refused_naming_the_back_end(sentence: str) -> None:
    given_settings, words = REFUSED[sentence]
    with pytest.raises(ToolPlaneError) as err:
        tool_plane(cluster("a"), given_settings)
    for word in words:
        assert word in str(err.value)


def closed(names: set[str]) -> bool:
    return all(r in names for n in names for r in registry.BY_NAME[n].requires)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chosen=st.sets(st.sampled_from(sorted(set(FACTORIES) - BUILT_IN))))
async def test_a_plane_has_exactly_the_built_in_back_ends_and_those_given(
    chosen: set[str], tmp_path: Path
) -> None:
    given_settings = {n: s for n, s in settings_for(tmp_path).items() if n in chosen}
    if not closed(chosen):
        with pytest.raises(ToolPlaneError, match="needs"):
            tool_plane(cluster("a"), given_settings)
        return
    plane = tool_plane(cluster("a"), given_settings)
    assert plane.backends == BUILT_IN | chosen
    await plane.aclose()


def test_the_operators_start_names_no_back_end() -> None:
    """handlers/operator.py builds the plane from the settings and the discovery, whatever back-ends
    there are: no back-end's name and no back-end's adapter module appear in it."""
    import ast

    from oasis_operator.handlers import operator

    tree = ast.parse(Path(operator.__file__).read_text())
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert not strings & set(registry.BY_NAME)
    modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not [m for m in modules if m and m.startswith("oasis_operator.adapters.toolplane.")]
    (call,) = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "tool_plane"
    ]
    assert not call.keywords, "no back-end by keyword"
