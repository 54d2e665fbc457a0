"""One way to reach a cluster (oasis_operator/adapters/k8s/cluster_access.py), against the real API
server: a KUBECONFIG list whose right context is in the second file, ``--context``, ``~/.kube/config``
alone, and an exec credential plugin printing a real token, for the command line (``get``,
``check``) and for the operator (its settings, its lightkube client, kopf's connection); and ``get``
printing the server's Table exactly as ``kubectl get`` does."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from oasis_operator.adapters.k8s.cluster_access import AccessError, ClusterAccess
from oasis_operator.cli.main import build_parser
from oasis_operator.devcluster import binaries, kube, stack
from oasis_operator.handlers.settings import OperatorSettings, connection_info

pytestmark = pytest.mark.cluster


def oasis(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    return subprocess.run(
        [sys.executable, "-m", "oasis_operator.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=base | env,
    )


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def reader_token(admin, namespace: str) -> str:
    """A real token of a ServiceAccount that may read the namespace's EvaluationRuns."""
    for path, doc in (
        (f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": "run-reader"}}),
        (
            f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles",
            {
                "metadata": {"name": "run-reader"},
                "rules": [
                    {
                        "apiGroups": ["oasis.dev"],
                        "resources": ["evaluationruns"],
                        "verbs": ["get", "list", "watch"],
                    }
                ],
            },
        ),
        (
            f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings",
            {
                "metadata": {"name": "run-reader"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "run-reader"},
                "subjects": [{"kind": "ServiceAccount", "name": "run-reader", "namespace": namespace}],
            },
        ),
    ):
        kube.expect(admin.post(path, json=doc), f"create {path}", 201, 409)
    return kube.request_token(admin, namespace, "run-reader", 600)


def kubeconfig_files(cluster, tmp_path: Path, namespace: str, token: str) -> tuple[Path, Path]:
    """Two files: the first's current context is a decoy (a closed port); the second holds the real
    cluster, its admin context ``real`` and an exec-plugin context ``sso`` (the plugin prints the token)."""
    real = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    ctx = real["contexts"][0]["context"]
    plugin = tmp_path / "login-helper"
    calls = tmp_path / "calls"
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "kind": "ExecCredential",
        "status": {"token": token},
    }
    plugin.write_text(f"#!/bin/sh\necho called >> {calls}\ncat <<'JSON'\n{json.dumps(credential)}\nJSON\n")
    plugin.chmod(plugin.stat().st_mode | stat.S_IXUSR)
    first, second = tmp_path / "decoy.yaml", tmp_path / "real.yaml"
    first.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "decoy",
                "clusters": [{"name": "decoy", "cluster": {"server": f"https://127.0.0.1:{closed_port()}"}}],
                "users": [{"name": "decoy", "user": {"token": "nope"}}],
                "contexts": [{"name": "decoy", "context": {"cluster": "decoy", "user": "decoy"}}],
            }
        )
    )
    second.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "real",
                "clusters": real["clusters"],
                "users": [
                    *real["users"],
                    {
                        "name": "sso",
                        "user": {
                            "exec": {
                                "apiVersion": "client.authentication.k8s.io/v1beta1",
                                "command": str(plugin),
                                "interactiveMode": "Never",
                            }
                        },
                    },
                ],
                "contexts": [
                    {"name": "real", "context": {**ctx, "namespace": namespace}},
                    {
                        "name": "sso",
                        "context": {"cluster": ctx["cluster"], "user": "sso", "namespace": namespace},
                    },
                ],
            }
        )
    )
    return first, second


@pytest.fixture
def runs_namespace(cluster, admin, namespace) -> str:
    stack.install_crds(admin)
    for name in ("first", "second"):
        stack.apply(admin, stack.evaluation_run(name, "http://127.0.0.1:1/agent"), namespace)
    return namespace


async def test_the_operator_and_every_command_find_the_cluster_the_same_way(
    cluster, admin, runs_namespace, tmp_path
) -> None:
    ns = runs_namespace
    token = reader_token(admin, ns)
    first, second = kubeconfig_files(cluster, tmp_path, ns, token)
    env = {"KUBECONFIG": os.pathsep.join([str(tmp_path / "missing"), str(first), str(second)])}

    # The command line: the merged current context is the first file's decoy ...
    refused = oasis("get", env=env)
    assert refused.returncode == 5, refused.stderr
    assert "cannot reach the API server https://127.0.0.1:" in refused.stderr
    assert "(context decoy)" in refused.stderr
    # ... --context picks the second file's, with its namespace; an exec plugin's token works too.
    for context in ("real", "sso"):
        got = oasis("get", "--context", context, "-o", "name", env=env)
        assert got.returncode == 0, got.stderr
        assert got.stdout.split() == ["evaluationrun.oasis.dev/first", "evaluationrun.oasis.dev/second"]
    assert (tmp_path / "calls").read_text().count("called") == 1
    # `oasis check` takes the same list and --context (it used to accept $KUBECONFIG as one file only).
    checked = oasis("check", "--context", "real", "--audit-timeout", "1", env=env, timeout=180)
    assert f"OK    api    {cluster.server}" in checked.stdout, checked.stdout + checked.stderr
    # ~/.kube/config alone, as kind leaves it.
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text(second.read_text())
    alone = oasis("get", "-o", "name", env={"HOME": str(home)})
    assert alone.returncode == 0, alone.stderr
    assert "evaluationrun.oasis.dev/first" in alone.stdout

    # The operator: the same list, --context, and the exec plugin, for lightkube, httpx and kopf.
    args = build_parser().parse_args(["operator", "run", "--context", "sso", "--audit-log", "/x.log"])
    settings = OperatorSettings.from_args(args, env | {"HOME": str(home)})
    access = settings.access
    assert access.context == "sso"
    assert access.server == cluster.server
    assert (
        access.endpoint().ca_data
        == yaml.safe_load(second.read_text())["clusters"][0]["cluster"]["certificate-authority-data"]
    )
    async with access.http() as http:
        assert await _whoami(http) == f"system:serviceaccount:{ns}:run-reader"
    info = connection_info(access)  # kopf's login: the plugin is run again at each login
    assert info.token == token
    assert info.server == cluster.server
    assert info.default_namespace == ns
    from lightkube import AsyncClient
    from lightkube.generic_resource import create_namespaced_resource

    run_kind = create_namespaced_resource("oasis.dev", "v1alpha1", "EvaluationRun", "evaluationruns")
    client = AsyncClient(access.lightkube_config())
    try:
        names = [r.metadata.name async for r in client.list(run_kind, namespace=ns)]
    finally:
        await client.close()
    assert sorted(names) == ["first", "second"]
    with pytest.raises(AccessError, match="Context 'nope' not found"):
        ClusterAccess.discover(None, tmp_path, env, "nope")


async def _whoami(http) -> str:
    r = await http.post(
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    assert r.status_code == 201, r.text
    return str(r.json()["status"]["userInfo"]["username"])


def _cells(line: str) -> list[str]:
    return line.split()


def test_get_prints_what_kubectl_get_prints(cluster, runs_namespace) -> None:
    ns = runs_namespace
    env = {"KUBECONFIG": str(cluster.kubeconfig)}
    kubectl = str(binaries.resolve(quiet=True).path("kubectl"))
    for extra in ([], ["-o", "wide"]):
        ours = oasis("get", "-n", ns, *extra, env=env)
        theirs = subprocess.run(
            [kubectl, "--kubeconfig", str(cluster.kubeconfig), "get", "evaluationruns", "-n", ns, *extra],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert ours.returncode == 0, ours.stderr
        assert theirs.returncode == 0, theirs.stderr
        mine, kubectls = ours.stdout.splitlines(), theirs.stdout.splitlines()
        assert mine[0] == kubectls[0], (
            f"the same header, columns at the same places:\n{ours.stdout}\n{theirs.stdout}"
        )
        assert mine[0].split()[-1] == "AGE"
        assert len(mine) == len(kubectls) == 3
        for a, b in zip(mine[1:], kubectls[1:], strict=True):
            # The same cells; the age may have moved on by a second between the two commands.
            assert _cells(a)[:-1] == _cells(b)[:-1]
            assert _cells(a)[-1].rstrip("s").isdigit() or _cells(a)[-1] == _cells(b)[-1]
            assert len(a) - len(b) in (-1, 0, 1)
    one = oasis("get", "first", "-n", ns, "-o", "json", env=env)
    assert one.returncode == 0, one.stderr
    got = json.loads(one.stdout)
    assert (got["kind"], got["metadata"]["name"]) == ("EvaluationRun", "first")
    missing = oasis("get", "nope", "-n", ns, env=env)
    assert missing.returncode == 2
    assert "EvaluationRun" in missing.stderr
    assert "not found" in missing.stderr
