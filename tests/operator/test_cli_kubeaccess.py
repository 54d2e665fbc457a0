"""How the command line finds its cluster (oasis_operator/cli/kubeaccess.py, on the shared loader of adapters/k8s/cluster_access.py): kubeconfig lists merged
as kubectl merges them, contexts, the context's namespace, and exec credential plugins against the
real API server."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from oasis_operator.cli.kubeaccess import flattened, kubeconfig_paths, merge_kubeconfigs
from oasis_operator.cli.main import CliError


def config(
    current: str | None,
    *,
    cluster: str,
    user: str,
    context: str,
    namespace: str | None = None,
    ca: str = "ca.crt",
) -> dict:
    ctx = {"cluster": cluster, "user": user, **({"namespace": namespace} if namespace else {})}
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": cluster, "cluster": {"server": f"https://{cluster}:6443", "certificate-authority": ca}}
        ],
        "users": [{"name": user, "user": {"token": f"token-of-{user}"}}],
        "contexts": [{"name": context, "context": ctx}],
    }
    if current:
        doc["current-context"] = current
    return doc


# -- pure: which files, and how they merge ------------------------------------------------------------

PATHS = [
    ("--kubeconfig wins over $KUBECONFIG", Path("/x/given"), {"KUBECONFIG": "/a:/b"}, ["/x/given"]),
    ("$KUBECONFIG is a list, in order, empty entries skipped", None, {"KUBECONFIG": "/a::/b"}, ["/a", "/b"]),
    ("without either, ~/.kube/config", None, {}, [str(Path("~/.kube/config").expanduser())]),
]


@pytest.mark.parametrize(("sentence", "explicit", "env", "expected"), PATHS, ids=[p[0] for p in PATHS])
def test_which_kubeconfig_files_are_read(sentence, explicit, env, expected) -> None:
    assert [str(p) for p in kubeconfig_paths(explicit, env)] == expected


def test_the_first_file_to_name_an_entry_or_the_current_context_wins() -> None:
    first = config(None, cluster="east", user="alice", context="prod")
    second = config("dev", cluster="east", user="bob", context="dev")
    second["clusters"][0]["cluster"]["server"] = "https://elsewhere:6443"
    second["contexts"].append({"name": "prod", "context": {"cluster": "nowhere", "user": "bob"}})
    merged = merge_kubeconfigs([(Path("/one/config"), first), (Path("/two/config"), second)])
    assert merged["current-context"] == "dev"  # the first file sets none, the second does
    assert [c["name"] for c in merged["contexts"]] == ["prod", "dev"]
    assert merged["contexts"][0]["context"]["cluster"] == "east"  # prod from the first file
    assert merged["clusters"] == [
        {"name": "east", "cluster": {"server": "https://east:6443", "certificate-authority": "/one/ca.crt"}}
    ]
    assert [u["name"] for u in merged["users"]] == ["alice", "bob"]


def test_relative_paths_are_resolved_against_their_own_file_absolute_ones_kept() -> None:
    doc = config("c", cluster="k", user="u", context="c", ca="../pki/ca.crt")
    doc["users"][0]["user"] = {"client-certificate": "u.crt", "client-key": "/abs/u.key"}
    merged = merge_kubeconfigs([(Path("/home/me/.kube/config"), doc)])
    assert merged["clusters"][0]["cluster"]["certificate-authority"] == "/home/me/.kube/../pki/ca.crt"
    assert merged["users"][0]["user"] == {
        "client-certificate": "/home/me/.kube/u.crt",
        "client-key": "/abs/u.key",
    }


# -- against the real API server -----------------------------------------------------------------------


def oasis(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "oasis_operator.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.cluster
def test_a_child_process_gets_the_merged_files_with_the_chosen_context(tmp_path: Path, monkeypatch) -> None:
    """`oasis run` hands its local operator one kubeconfig: the KUBECONFIG list merged, the context
    chosen by --context (else the merged current one); an unknown context is refused."""
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text(
        yaml.safe_dump(
            {
                "current-context": "one",
                "contexts": [{"name": "one", "context": {"cluster": "c1", "user": "u1"}}],
                "clusters": [
                    {"name": "c1", "cluster": {"server": "https://one", "certificate-authority": "ca.crt"}}
                ],
                "users": [{"name": "u1", "user": {"token": "t1"}}],
            }
        )
    )
    second.write_text(
        yaml.safe_dump(
            {"contexts": [{"name": "two", "context": {"cluster": "c1", "user": "u1", "namespace": "evals"}}]}
        )
    )
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(first), str(second)]))
    doc = flattened(None, None)
    assert doc["current-context"] == "one"
    assert {c["name"] for c in doc["contexts"]} == {"one", "two"}
    assert doc["clusters"][0]["cluster"]["certificate-authority"] == str(tmp_path / "ca.crt")
    assert flattened(None, "two")["current-context"] == "two"
    with pytest.raises(CliError, match="no context 'three'"):
        flattened(None, "three")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing.yaml"))
    with pytest.raises(CliError, match="no kubeconfig"):
        flattened(None, None)


def test_a_kubeconfig_list_a_context_and_its_namespace(
    cluster, installation, finished_runs, tmp_path
) -> None:
    real = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    # A second file adds a context on the same cluster and user, whose namespace is the installation's.
    extra = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [],
        "users": [],
        "contexts": [
            {
                "name": "evals",
                "context": {
                    "cluster": real["contexts"][0]["context"]["cluster"],
                    "user": real["contexts"][0]["context"]["user"],
                    "namespace": installation.namespace,
                },
            }
        ],
    }
    (tmp_path / "extra").write_text(yaml.safe_dump(extra))
    env = {
        "KUBECONFIG": f"{tmp_path / 'missing'}{os.pathsep}{cluster.kubeconfig}{os.pathsep}{tmp_path / 'extra'}"
    }
    got = oasis("get", "--context", "evals", "-o", "name", env=env)
    assert got.returncode == 0, got.stderr
    assert sorted(got.stdout.split()) == [
        "evaluationrun.oasis.dev/careful",
        "evaluationrun.oasis.dev/reckless",
    ]
    # The current context (the real file's) has no namespace: "default", where there is no run.
    assert oasis("get", "-o", "name", env=env).stdout.strip() == ""
    unknown = oasis("get", "--context", "nope", env=env)
    assert unknown.returncode == 5  # the cluster cannot be read (cli/main.py: EXIT_CLUSTER)
    assert "Context 'nope' not found" in unknown.stderr
    waited = oasis("wait", "reckless", "--context", "evals", env=env)
    assert waited.returncode == 1, waited.stdout + waited.stderr
    assert waited.stdout.startswith(f"{installation.namespace}/reckless: FAIL")


@pytest.mark.cluster
def test_an_exec_credential_plugin_authenticates(cluster, installation, finished_runs, tmp_path) -> None:
    ns = installation.namespace
    with cluster.admin_http() as http:
        for doc in (
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "run-reader", "namespace": ns},
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": "run-reader", "namespace": ns},
                "rules": [
                    {
                        "apiGroups": ["oasis.dev"],
                        "resources": ["evaluationruns"],
                        "verbs": ["get", "list", "watch"],
                    }
                ],
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "run-reader", "namespace": ns},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "run-reader"},
                "subjects": [{"kind": "ServiceAccount", "name": "run-reader", "namespace": ns}],
            },
        ):
            plural = {
                "ServiceAccount": f"/api/v1/namespaces/{ns}/serviceaccounts",
                "Role": f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
                "RoleBinding": f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
            }[doc["kind"]]
            r = http.post(plural, json=doc)
            assert r.status_code in (201, 409), r.text
        r = http.post(
            f"/api/v1/namespaces/{ns}/serviceaccounts/run-reader/token",
            json={
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 600},
            },
        )
        assert r.status_code == 201, r.text
        token = r.json()["status"]["token"]
    plugin = tmp_path / "login-helper"
    calls = tmp_path / "calls"
    plugin.write_text(
        textwrap.dedent(f"""\
        #!/bin/sh
        echo called >> {calls}
        cat <<'JSON'
        {
            json.dumps(
                {
                    "apiVersion": "client.authentication.k8s.io/v1beta1",
                    "kind": "ExecCredential",
                    "status": {"token": token},
                }
            )
        }
        JSON
        """)
    )
    plugin.chmod(plugin.stat().st_mode | stat.S_IXUSR)
    real = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    exec_config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "cloud",
        "clusters": real["clusters"],
        "users": [
            {
                "name": "sso",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": str(plugin),
                        "interactiveMode": "Never",
                    }
                },
            }
        ],
        "contexts": [
            {
                "name": "cloud",
                "context": {"cluster": real["clusters"][0]["name"], "user": "sso", "namespace": ns},
            }
        ],
    }
    path = tmp_path / "cloud.kubeconfig"
    path.write_text(yaml.safe_dump(exec_config))
    got = oasis("get", "--kubeconfig", str(path))
    assert got.returncode == 0, got.stderr
    assert any(line.split()[:2] == ["reckless", "FAIL"] for line in got.stdout.splitlines())
    assert calls.read_text().count("called") >= 1  # the plugin, not a stored credential, authenticated
    # A plugin of an exec API version lightkube does not speak: a clear error naming the context.
    exec_config["users"][0]["user"]["exec"]["apiVersion"] = "client.authentication.k8s.io/v1"
    path.write_text(yaml.safe_dump(exec_config))
    refused = oasis("get", "--kubeconfig", str(path))
    assert refused.returncode == 5
    assert (
        "context cloud: auth exec api version client.authentication.k8s.io/v1 not implemented"
        in refused.stderr
    )
    assert "Traceback" not in refused.stderr
