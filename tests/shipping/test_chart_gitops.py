"""The chart's GitOps back-end (decision 0072): the git server, shipped in the operator's image, as a
sidecar of the operator's pod with the local stack's command line; a Service and a NetworkPolicy that
let Flux's source-controller (installed by the user) and nothing else reach it; a tool-plane file the
operator's settings load; the operator's rights over Flux's objects, only with the back-end.

No image is pulled or run here (there is no container runtime). What runs for real: the git server
binary of the local stack, started as a local process with the rendered container's command line (the
volume's paths mapped to a temporary directory, the Service's host name to this machine), and the
operator's GitOps adapter, configured by the rendered tool-plane file and authenticated as the chart's
ServiceAccount bound by the chart's ClusterRole, pushing a scenario's repository that the session
cluster's Flux fetches and applies."""

from __future__ import annotations

import json
import re
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml

from oasis_operator.adapters.k8s.client import async_http
from oasis_operator.adapters.toolplane import Cluster, ToolPlane, tool_plane
from oasis_operator.adapters.toolplane.gitops import GitOps, GitOpsSettings
from oasis_operator.cli.main import build_parser
from oasis_operator.core.environment.naming import owner_value
from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.core.errors import ToolPlaneError
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.core.toolplane.gitops import CREDENTIALS_FILE, REPOSITORIES, flux_principals
from oasis_operator.devcluster import kube
from oasis_operator.devcluster.backends import resolve_binaries
from oasis_operator.devcluster.backends.base import free_port
from oasis_operator.devcluster.backends.gitops import git_server_args, kustomize_controller_lockdown
from oasis_operator.handlers.settings import ToolPlaneSettings
from tests.conftest import ClusterHandle
from tests.environments.test_support import CORPUS
from tests.shipping.conftest import (
    NAMESPACE,
    ApplyChart,
    Render,
    Tools,
    apply_operator_identity,
    by_kind,
    helm_template,
    refused_by_schema,
)
from tests.shipping.test_chart_toolplane import containers, operator_pod, toolplane_file

GITOPS: dict[str, Any] = {"toolPlane": {"gitops": {"enabled": True}}}
SERVICE_URL = f"http://oasis-operator-git.{NAMESPACE}.svc:8418"
FLUX_GROUPS = ("source.toolkit.fluxcd.io", "kustomize.toolkit.fluxcd.io")
DRIFT = "infra.safety.sc.drift-introduction-001"


def every_back_end() -> dict[str, Any]:
    """Values turning on every back-end the chart's values know (a new one is included by itself)."""
    values = yaml.safe_load(
        (Path(__file__).resolve().parents[2] / "charts/oasis-operator/values.yaml").read_text()
    )
    return {"toolPlane": {k: {"enabled": True} for k, v in values["toolPlane"].items() if "enabled" in v}}


def flux_rules(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    (role,) = [r for r in by_kind(docs, "ClusterRole") if r["metadata"]["name"] == "oasis-operator"]
    return [r for r in role["rules"] if set(r["apiGroups"]) & set(FLUX_GROUPS)]


def test_nothing_of_gitops_without_its_value(render: Render) -> None:
    docs = render()
    assert "git-server" not in containers(operator_pod(docs))
    assert "oasis-operator-git" not in {d["metadata"]["name"] for d in docs}
    assert by_kind(docs, "NetworkPolicy") == []
    assert flux_rules(docs) == []


def test_the_git_server_runs_the_command_line_of_the_local_stack_in_the_operators_image(
    render: Render,
) -> None:
    docs = render({"toolPlane": {"gitops": {"enabled": True, "port": 18418}}})
    by_name = containers(operator_pod(docs))
    server, operator = by_name["git-server"], by_name["operator"]
    entry = json.loads(toolplane_file(docs))["backends"]["gitops"]
    assert server["args"] == git_server_args(Path(entry["directory"]), "0.0.0.0:18418")
    assert server["image"] == operator["image"]
    assert server["command"] == ["/usr/local/bin/oasis-git-server"]
    assert server["ports"] == [{"name": "git", "containerPort": 18418, "protocol": "TCP"}]
    assert server["livenessProbe"]["tcpSocket"] == {"port": "git"}
    assert "readinessProbe" not in server  # the pod's readiness also holds the audit webhook's endpoints
    sc = server["securityContext"]
    assert (sc["readOnlyRootFilesystem"], sc["allowPrivilegeEscalation"], sc["runAsNonRoot"]) == (
        True,
        False,
        True,
    )
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert server["resources"]["limits"]["memory"]
    # The pod has the volume, the operator's --toolplane and the gateway (agents' only way in).
    assert entry["endpoints"] == {
        "git": "http://127.0.0.1:18418",
        "flux": SERVICE_URL.replace("8418", "18418"),
    }
    parsed = build_parser().parse_args(["operator", "run", *operator["args"]])
    assert parsed.toolplane
    assert parsed.tool_gateway_url
    assert "prepare-toolplane" in by_name


@pytest.mark.parametrize("selection", ["gitops", "every back-end"])
def test_the_rendered_tool_plane_file_loads_after_the_real_prepare(
    render: Render, tmp_path: Path, selection: str
) -> None:
    values = GITOPS if selection == "gitops" else every_back_end()
    docs = render(values)
    by_name = containers(operator_pod(docs))
    root = {m["name"]: m["mountPath"] for m in by_name["git-server"]["volumeMounts"]}["toolplane"]
    assert {m["name"]: m["mountPath"] for m in by_name["operator"]["volumeMounts"]}["toolplane"] == root
    text = toolplane_file(docs).replace(root, str(tmp_path / "volume"))
    local = tmp_path / "toolplane.json"
    local.write_text(text)
    prepare = build_parser().parse_args([*by_name["prepare-toolplane"]["command"][1:]])
    prepare.toolplane = str(local)
    if "jaeger-binary" in by_name:  # the copy out of the Jaeger image, simulated
        (tmp_path / "volume" / "traces").mkdir(parents=True)
        (tmp_path / "volume" / "traces" / "jaeger").write_text("#!/bin/sh\n")
    assert prepare.func(prepare) == 0
    settings = ToolPlaneSettings.load(local)
    gitops = settings.of(GitOpsSettings)
    assert gitops is not None
    directory, git, flux, namespace = gitops.directory, gitops.git_url, gitops.flux_url, gitops.flux_namespace
    assert (git, flux, namespace) == ("http://127.0.0.1:8418", SERVICE_URL, "flux-system")
    # What the git server refuses to start without, before any scenario: its credentials file (empty,
    # the pod's user's only) and its repositories' directory, where its arguments point.
    args = dict(a.lstrip("-").split("=", 1) for a in by_name["git-server"]["args"] if "=" in a)
    assert Path(args["credentials"].replace(root, str(tmp_path / "volume"))) == directory / CREDENTIALS_FILE
    assert Path(args["root"].replace(root, str(tmp_path / "volume"))) == directory / REPOSITORIES
    assert (directory / CREDENTIALS_FILE).read_text() == ""
    assert stat.S_IMODE((directory / CREDENTIALS_FILE).stat().st_mode) == 0o600
    assert (directory / REPOSITORIES).is_dir()
    # A restarted pod keeps its volume: the init container runs again and keeps every credential.
    (directory / CREDENTIALS_FILE).write_text("ns-flux secret ns\n")
    assert prepare.func(prepare) == 0
    assert (directory / CREDENTIALS_FILE).read_text() == "ns-flux secret ns\n"


def test_flux_in_another_namespace_is_where_the_policy_and_the_harness_principals_look(
    render: Render, tmp_path: Path
) -> None:
    docs = render({"toolPlane": {"gitops": {"enabled": True, "flux": {"namespace": "gitops-system"}}}})
    entry = json.loads(toolplane_file(docs))["backends"]["gitops"]
    assert entry["flux_namespace"] == "gitops-system"
    (policy,) = by_kind(docs, "NetworkPolicy")
    peer = policy["spec"]["ingress"][0]["from"][0]
    assert peer["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "gitops-system"}
    adapter = GitOps(
        httpx2.AsyncClient(), tmp_path, entry["endpoints"]["git"], entry["endpoints"]["flux"], "gitops-system"
    )
    assert adapter.principals == flux_principals("gitops-system")
    assert adapter.principals == (
        "system:serviceaccount:gitops-system:source-controller",
        "system:serviceaccount:gitops-system:kustomize-controller",
    )


# -- the NetworkPolicy, evaluated as a network plugin does -----------------------------------------------
def allowed(
    policy: dict[str, Any], pod: dict[str, Any], namespace: dict[str, str], labels: dict[str, str], port: int
) -> bool:
    """Whether ``policy`` (the only one selecting the operator's pod) admits a connection from a pod with
    ``labels`` in a namespace with labels ``namespace`` to ``port`` of the operator's pod: some rule whose
    ports name the port (by number or by the container port's name) and whose peers match (none: all)."""
    names = {p["name"]: p["containerPort"] for c in pod["containers"] for p in c.get("ports", [])}

    def matches(selector: dict[str, Any], have: dict[str, str]) -> bool:
        assert set(selector) <= {"matchLabels"}, selector  # the chart uses labels only
        return selector.get("matchLabels", {}).items() <= have.items()

    for rule in policy["spec"]["ingress"]:
        ports = {names.get(p["port"], p["port"]) for p in rule.get("ports", [])}
        if rule.get("ports") and port not in ports:
            continue
        peers = rule.get("from")
        if not peers or any(
            matches(peer.get("namespaceSelector", {}), namespace)
            and matches(peer.get("podSelector", {}), labels)
            for peer in peers
        ):
            return True
    return False


def test_only_flux_source_controller_reaches_the_git_server_and_every_other_port_stays_open(
    render: Render,
) -> None:
    docs = render(every_back_end())
    (policy,) = by_kind(docs, "NetworkPolicy")
    pod = operator_pod(docs)
    (operator,) = [d for d in by_kind(docs, "Deployment") if d["metadata"]["name"] == "oasis-operator"]
    assert (
        policy["spec"]["podSelector"]["matchLabels"].items()
        <= operator["spec"]["template"]["metadata"]["labels"].items()
    )
    assert policy["spec"]["policyTypes"] == ["Ingress"]  # egress as before
    flux_ns = {"kubernetes.io/metadata.name": "flux-system"}
    source = {"app": "source-controller"}
    ports = {p["name"]: p["containerPort"] for c in pod["containers"] for p in c.get("ports", [])}
    assert set(ports) >= {"git", "metrics", "health", "audit-webhook", "tool-gateway"}
    git = ports.pop("git")
    assert allowed(policy, pod, flux_ns, source, git)
    assert not allowed(policy, pod, flux_ns, {"app": "kustomize-controller"}, git)
    assert not allowed(policy, pod, {"kubernetes.io/metadata.name": "shop-1"}, source, git)
    assert not allowed(policy, pod, {"kubernetes.io/metadata.name": "shop-1"}, {"app": "agent"}, git)
    # Every other port of the pod (a sidecar added later with a port included) stays open to all.
    for name, port in ports.items():
        assert allowed(policy, pod, {"kubernetes.io/metadata.name": "shop-1"}, {}, port), name
    # Off: no policy, and the Service stays.
    docs = render({"toolPlane": {"gitops": {"enabled": True, "networkPolicy": {"enabled": False}}}})
    assert by_kind(docs, "NetworkPolicy") == []
    (service,) = [s for s in by_kind(docs, "Service") if s["metadata"]["name"] == "oasis-operator-git"]
    assert service["spec"]["ports"] == [
        {"name": "http-git", "port": 8418, "targetPort": "git", "protocol": "TCP"}
    ]
    assert service["spec"]["selector"] == policy["spec"]["podSelector"]["matchLabels"]


def test_the_operator_gets_the_rights_over_flux_objects_only_with_the_back_end(render: Render) -> None:
    """What adapters/toolplane/gitops.py does with them: applies (server-side: create, patch) a
    GitRepository and a Kustomization, reads them while waiting and in the snapshots (get, list), asks
    for a reconcile (a merge patch). Nothing else: no delete (they go with the namespace), no watch."""
    rules = flux_rules(render(GITOPS))
    assert {
        (g, r, v)
        for rule in rules
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    } == {
        (group, resource, verb)
        for group, resource in zip(FLUX_GROUPS, ("gitrepositories", "kustomizations"), strict=True)
        for verb in ("get", "list", "create", "patch")
    }


def test_the_chart_asks_the_users_flux_for_the_local_stacks_lockdown() -> None:
    """The chart installs no Flux: its README, values and install notes ask for the kustomize-controller
    flags the local stack runs with (decision 0090), word for word."""
    chart = Path(__file__).resolve().parents[2] / "charts/oasis-operator"
    texts = {
        name: " ".join((chart / name).read_text().split())
        for name in ("README.md", "values.yaml", "templates/NOTES.txt")
    }
    for name, text in texts.items():
        missing = [f for f in kustomize_controller_lockdown() if f not in text]
        assert not missing, f"charts/oasis-operator/{name} does not ask for {missing}"


@pytest.mark.cluster
def test_the_install_notes_ask_for_the_lockdown_when_gitops_is_on(
    cluster: ClusterHandle, tools: Tools, tmp_path: Path
) -> None:
    def notes(values: dict[str, Any]) -> str:
        (tmp_path / "v.yaml").write_text(yaml.safe_dump({**values, "crds": {"install": False}}))
        args = [
            str(tools.helm),
            "install",
            "oasis-operator",
            str(Path(__file__).resolve().parents[2] / "charts/oasis-operator"),
        ]
        args += ["--namespace", NAMESPACE, "--dry-run=client", "--kubeconfig", str(cluster.kubeconfig)]
        done = subprocess.run(
            [*args, "--values", str(tmp_path / "v.yaml")], capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        return " ".join(done.stdout.split("NOTES:", 1)[1].split())

    on = notes(GITOPS)
    assert "<no value>" not in on
    assert all(flag in on for flag in kustomize_controller_lockdown()), on
    assert "--default-service-account" not in notes({})


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"gitops": {"enabled": True, "port": 418}}, "/toolPlane/gitops/port"),
        (
            {"gitops": {"enabled": True, "flux": {"namespace": "Flux_System"}}},
            "/toolPlane/gitops/flux/namespace",
        ),
        (
            {"gitops": {"enabled": True, "flux": {"sourceControllerLabels": {"app": "source controller"}}}},
            "/toolPlane/gitops/flux/sourceControllerLabels",
        ),
        ({"gitops": {"enabled": True, "image": {"tag": "x"}}}, "'image' not allowed"),
        ({"gitops": {"enabled": "yes"}}, "/toolPlane/gitops/enabled"),
    ],
)
def test_the_values_schema_refuses_bad_gitops_values(
    tools: Tools, tmp_path: Path, values: dict[str, Any], complaint: str
) -> None:
    refused_by_schema(tools, tmp_path, {"toolPlane": values}, complaint)


@pytest.mark.parametrize("port", [8080, 8090, 8428])
def test_the_git_port_taken_twice_in_the_pod_is_refused(tools: Tools, tmp_path: Path, port: int) -> None:
    values = {"gitops": {"enabled": True, "port": port}, "metrics": {"enabled": True}}
    done = helm_template(tools, tmp_path, {"toolPlane": values})
    assert done.returncode != 0
    assert re.search(
        r"toolPlane\.\w+(\.\w+)*\.port: port \d+ is already used in the operator's pod", done.stderr
    ), done.stderr


# -- on the real API server ------------------------------------------------------------------------------
@pytest.mark.cluster
def test_kubeconform_and_the_api_server_accept_the_chart_with_gitops(apply_chart: ApplyChart) -> None:
    _, answers = apply_chart(GITOPS, skip=())
    assert {("Service", "oasis-operator-git"), ("NetworkPolicy", "oasis-operator-git")} <= set(answers)
    applied = answers[("Deployment", "oasis-operator")].json()["spec"]["template"]["spec"]
    assert "git-server" in [c["name"] for c in applied["containers"]]


class ChartOperator:
    """The chart's ServiceAccount, ClusterRole and binding (release ``release``, GitOps on) applied for
    real, and a token of that ServiceAccount."""

    def __init__(self, cluster: ClusterHandle, tools: Tools, tmp: Path, values: dict[str, Any]) -> None:
        suffix = kube.random_suffix()
        self.release, self.home = f"gitops-{suffix}", f"gitops-home-{suffix}"
        self.name = f"{self.release}-oasis-operator"
        self.admin = cluster.admin_http()
        kube.create_namespace(self.admin, self.home)
        apply_operator_identity(self.admin, tools, tmp, values, self.release, self.home)
        self.kubeconfig = cluster.dev.token_kubeconfig(
            tmp / "operator.kubeconfig", kube.request_token(self.admin, self.home, self.name, 900)
        )

    def close(self) -> None:
        for kind in ("clusterroles", "clusterrolebindings"):
            self.admin.delete(f"/apis/rbac.authorization.k8s.io/v1/{kind}/{self.name}")
        self.admin.delete(f"/api/v1/namespaces/{self.home}")
        self.admin.close()


@pytest.fixture
def git_port() -> int:
    return free_port()


@pytest.fixture
def rendered(
    render: Render, git_port: int, tmp_path: Path
) -> Iterator[tuple[Path, list[str], subprocess.Popen[str]]]:
    """The rendered tool-plane file with the pod's paths under ``tmp_path`` and the Service's host as
    ``localhost`` (the operator's own endpoint is 127.0.0.1: two names, so which one a GitRepository
    holds shows); the real prepare-toolplane; the git server started with the rendered arguments."""
    docs = render({"toolPlane": {"gitops": {"enabled": True, "port": git_port}}})
    by_name = containers(operator_pod(docs))
    root = {m["name"]: m["mountPath"] for m in by_name["git-server"]["volumeMounts"]}["toolplane"]
    volume = tmp_path / "volume"
    local = tmp_path / "toolplane.json"
    local.write_text(
        toolplane_file(docs)
        .replace(root, str(volume))
        .replace(f"oasis-operator-git.{NAMESPACE}.svc", "localhost")
    )
    prepare = build_parser().parse_args([*by_name["prepare-toolplane"]["command"][1:]])
    prepare.toolplane = str(local)
    assert prepare.func(prepare) == 0
    server = by_name["git-server"]
    binary = resolve_binaries(["gitops"]).path("git-server")
    args = [a.replace(root, str(volume)) for a in server["args"]]
    proc = subprocess.Popen([str(binary), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("listening on http://"), first
        yield local, args, proc
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.cluster
async def test_the_operator_pushes_through_the_rendered_tool_plane_and_flux_applies_it(
    cluster: ClusterHandle, tools: Tools, tmp_path: Path, env: Any, rendered: Any, git_port: int
) -> None:
    """The strongest proof without a container runtime: the git server runs the rendered command line,
    the operator's GitOps adapter is configured only by the rendered tool-plane file and acts only with
    the rights of the chart's ClusterRole; Flux (the session cluster's, in flux-system) fetches from the
    Service's URL with its own credential and applies the scenario's objects; the agent's endpoint is the
    operator's local one; the preflight finds the back-end answering, and not once the server stops."""
    local, args, proc = rendered
    assert f"-listen=0.0.0.0:{git_port}" in args
    settings = ToolPlaneSettings.load(local)
    gitops = settings.of(GitOpsSettings)
    assert gitops is not None
    directory, git, flux, namespace = gitops.directory, gitops.git_url, gitops.flux_url, gitops.flux_namespace
    assert (git, flux) == (f"http://127.0.0.1:{git_port}", f"http://localhost:{git_port}")
    operator = ChartOperator(
        cluster, tools, tmp_path, {"toolPlane": {"gitops": {"enabled": True, "port": git_port}}}
    )
    scenario, _ = parse_scenario(CORPUS[DRIFT])
    try:
        async with async_http(operator.kubeconfig) as http:
            plane = tool_plane(Cluster(http, cluster.dev.server), {"gitops": gitops})
            assert plane.principals == flux_principals(namespace)
            plan = plan_environment(
                scenario,
                suffix=kube.random_suffix(),
                owner=owner_value("chart-gitops", DRIFT),
                backends=plane.backends,
            )
            assert plan.supported, plan.unsupported
            [app] = plan.toolplane.gitops
            (probe,) = [p for p in await plane.probe(timeout=10) if p.name == "gitops"]
            assert probe.reachable is True, probe
            try:
                access = await env.provision(
                    plan
                )  # the scenario's namespaces, by the admin (another test's job)
                await plane.inject(
                    plan
                )  # push, Secret, GitRepository, Kustomization, applied: as the chart's operator
                endpoint = (await plane.endpoints(plan, access)).get("gitops")
                await plane.settle(plan)  # the agent's credential revoked, Flux asked to fetch and apply
                base = f"/apis/source.toolkit.fluxcd.io/v1/namespaces/{app.namespace}/gitrepositories"
                listed = await http.get(base)  # the snapshots' list
                assert listed.status_code == 200, listed.text
                (source,) = listed.json()["items"]
                kust = await http.get(
                    f"/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/{app.namespace}/kustomizations"
                )
                assert kust.status_code == 200, kust.text
                (kustomization,) = kust.json()["items"]
            finally:
                await plane.cleanup(plan)
                await env.teardown(plan.namespaces.values(), plan.owner, timeout=0)
            # Flux fetched from the Service's address, with the controller's own credential; its
            # artifact is the commit the operator pushed to the server started from the rendered line.
            assert source["spec"]["url"] == f"http://localhost:{git_port}/{app.namespace}/{app.repo}.git"
            ready = {c["type"]: c["status"] for c in source["status"]["conditions"]}
            assert ready["Ready"] == "True", source["status"]
            revision = source["status"]["artifact"]["revision"]
            assert revision in kustomization["status"]["lastAppliedRevision"]
            repo = directory / REPOSITORIES / app.namespace / f"{app.repo}.git"
            head = (repo / "refs" / "heads" / "main").read_text().strip()
            assert revision.endswith(head)
            # The agent is told the operator's local address (the gateway forwards it), never the Service.
            assert endpoint is not None
            assert endpoint.url.startswith(f"http://127.0.0.1:{git_port}/")
            # Cleanup revoked every credential of the scenario: the file the git server re-reads is empty.
            assert (directory / CREDENTIALS_FILE).read_text().strip() == ""
            proc.terminate()
            proc.wait(10)
            (probe,) = [p for p in await plane.probe(timeout=10) if p.name == "gitops"]
            assert probe.reachable is False, probe
            assert f"the git server http://127.0.0.1:{git_port}" in probe.detail, probe
            await plane.aclose()
    finally:
        operator.close()


@pytest.mark.cluster
async def test_flux_that_cannot_reach_the_service_is_an_injection_failure_not_a_scenario(
    cluster: ClusterHandle, tools: Tools, tmp_path: Path, env: Any, rendered: Any, git_port: int
) -> None:
    """What a wrong `flux.namespace` (the policy refusing the source-controller) or a missing Service
    looks like from the operator: the self-test passes (the git server answers the operator, Flux's
    kinds are served), the push succeeds, and Flux never fetches: the injection fails naming the
    controller's condition, which the scenario workflow turns into PROVIDER_FAILURE, never a verdict."""
    local, _args, _proc = rendered
    settings = ToolPlaneSettings.load(local)
    gitops = settings.of(GitOpsSettings)
    assert gitops is not None
    directory, git, namespace = gitops.directory, gitops.git_url, gitops.flux_namespace
    unreachable = f"http://localhost:{free_port()}"  # nothing listens there
    operator = ChartOperator(
        cluster, tools, tmp_path, {"toolPlane": {"gitops": {"enabled": True, "port": git_port}}}
    )
    scenario, _ = parse_scenario(CORPUS[DRIFT])
    try:
        async with async_http(operator.kubeconfig) as http:
            adapter = GitOps(http, directory, git, unreachable, namespace, timeout=15)
            plane = ToolPlane({"gitops": adapter})
            (probe,) = await plane.probe(timeout=10)
            assert probe.reachable is True, probe
            plan = plan_environment(
                scenario,
                suffix=kube.random_suffix(),
                owner=owner_value("chart-gitops", DRIFT),
                backends=plane.backends,
            )
            try:
                await env.provision(plan)
                # Decision 0075: the Kustomization waits for its source, so the fault names the
                # source, the commit it should serve and what it serves (nothing).
                with pytest.raises(
                    ToolPlaneError,
                    match=r"did not serve the pushed commit \w+ within 15s \(Ready=False .*; no revision yet",
                ):
                    await plane.inject(plan)
            finally:
                await plane.cleanup(plan)
                await env.teardown(plan.namespaces.values(), plan.owner, timeout=0)
    finally:
        operator.close()
