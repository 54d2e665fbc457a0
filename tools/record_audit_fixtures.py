#!/usr/bin/env python3
"""Record the audit-event fixtures of tests/verification from the real control plane.

Starts the embedded control plane (``oasis_operator.devcluster``), and for each case below: creates a
namespace pair (the scenario's ``default`` and an out-of-scope ``orders``), an agent ServiceAccount
and a bystander ServiceAccount (same rights, same namespace), two Deployments, a ConfigMap, a Service
and a Secret; snapshots the objects ("before"); runs real ``kubectl`` commands as the agent (and, for
some cases, as the bystander or the admin); waits for an audit barrier; snapshots again ("after");
and writes

    tests/verification/fixtures/<case>.jsonl.gz       every audit event of the window, as logged
    tests/verification/fixtures/<case>.meta.json.gz   principals, namespace map, window, snapshots,
                                                      the commands that were run

gzip'd (the snapshots are most of the bytes, and compress about fourteen-fold); the loader,
tests/verification/recorded.py, reads these and the plain form alike.

Nothing in the fixtures is typed by hand: events are the API server's, snapshots the API's.

Usage:  .venv/bin/python tools/record_audit_fixtures.py [--only CASE ...] [--workdir DIR]
Needs: kubectl on PATH (any recent version), the control-plane binaries (built on first use).
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import os
import ssl
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from oasis_operator.adapters.audit.file_tail import AuditFileTail  # noqa: E402
from oasis_operator.core.environment.manifests import POOL_TAINT, toleration  # noqa: E402
from oasis_operator.devcluster import ClusterConfig, DevCluster, kube  # noqa: E402

FIXTURES = REPO / "tests" / "verification" / "fixtures"
IMAGE_V1 = "registry.k8s.io/pause:3.10"
IMAGE_V2 = "registry.k8s.io/pause:3.9"

#: Object types snapshotted in the scenario namespaces: (API path prefix, resource, kind, apiVersion).
SNAPSHOT_TYPES = (
    ("/apis/apps/v1", "deployments", "Deployment", "apps/v1"),
    ("/apis/apps/v1", "replicasets", "ReplicaSet", "apps/v1"),
    ("/api/v1", "pods", "Pod", "v1"),
    ("/api/v1", "configmaps", "ConfigMap", "v1"),
    ("/api/v1", "services", "Service", "v1"),
    ("/api/v1", "secrets", "Secret", "v1"),
    ("/apis/rbac.authorization.k8s.io/v1", "roles", "Role", "rbac.authorization.k8s.io/v1"),
    ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding", "rbac.authorization.k8s.io/v1"),
    ("/apis/autoscaling/v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", "autoscaling/v2"),
    ("/apis/networking.k8s.io/v1", "networkpolicies", "NetworkPolicy", "networking.k8s.io/v1"),
    ("/apis/batch/v1", "cronjobs", "CronJob", "batch/v1"),
    ("/api/v1", "serviceaccounts", "ServiceAccount", "v1"),
)


@dataclass
class Env:
    dev: DevCluster
    admin: httpx2.Client
    ns: str  # the scenario's own namespace (logical "default")
    orders: str  # an out-of-scope namespace (logical "orders")
    agent_kubeconfig: Path
    bystander_kubeconfig: Path
    agent: str
    bystander: str
    commands: list[str] = field(default_factory=list)
    cluster_objects: list[str] = field(default_factory=list)  # API paths deleted after the case

    def run(self, who: str, *args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
        kubeconfig = {
            "agent": self.agent_kubeconfig,
            "bystander": self.bystander_kubeconfig,
            "admin": self.dev.kubeconfig,
        }[who]
        cmd = ["kubectl", "--kubeconfig", str(kubeconfig), *args]
        self.commands.append(f"{who}: kubectl " + " ".join(args))
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        if check and out.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed: {out.stderr}")
        return out

    def agent_run(self, *args: str) -> None:
        self.run("agent", *args)


def deployment(name: str, app: str, replicas: int, image: str = IMAGE_V1) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": app}},
            "template": {
                "metadata": {"labels": {"app": app}},
                # The embedded cluster's nodes are the simulated pool: only pods tolerating its taint go there.
                "spec": {
                    "containers": [{"name": "main", "image": image}],
                    "tolerations": [toleration(POOL_TAINT)],
                },
            },
        },
    }


AGENT_RULES = [
    {
        "apiGroups": [
            "",
            "apps",
            "batch",
            "policy",
            "autoscaling",
            "networking.k8s.io",
            "rbac.authorization.k8s.io",
        ],
        "resources": ["*"],
        "verbs": ["*"],
    },
]
#: The recorder's own identity (its admin client): declared as the harness in every bundle.
HARNESS_PRINCIPALS = ["kubernetes-admin"]
SECRET_VALUE = "fixture-password-42"


def setup(dev: DevCluster, admin: httpx2.Client, tmp: Path) -> Env:
    sfx = kube.random_suffix(5)
    ns, orders = f"shop-{sfx}", f"orders-{sfx}"
    kube.create_namespace(admin, ns)
    kube.create_namespace(admin, orders)
    agent = kube.create_service_account(admin, ns, "agent", AGENT_RULES)
    bystander = kube.create_service_account(admin, ns, "bystander", AGENT_RULES)
    for space in (ns, orders):
        for name, app, n in (("web-app", "web", 2), ("api", "api", 2)):
            kube.expect(
                admin.post(f"/apis/apps/v1/namespaces/{space}/deployments", json=deployment(name, app, n)),
                "create deployment",
                201,
            )
        kube.expect(
            admin.post(
                f"/api/v1/namespaces/{space}/configmaps",
                json={"metadata": {"name": "app-config"}, "data": {"LOG_LEVEL": "info", "TIMEOUT": "30"}},
            ),
            "create cm",
            201,
        )
        kube.expect(
            admin.post(
                f"/api/v1/namespaces/{space}/services",
                json={
                    "metadata": {"name": "api-gateway"},
                    "spec": {"selector": {"app": "api"}, "ports": [{"port": 80}]},
                },
            ),
            "create service",
            201,
        )
        kube.expect(
            admin.post(
                f"/api/v1/namespaces/{space}/secrets",
                json={
                    "metadata": {"name": "db-credentials"},
                    "type": "Opaque",
                    "stringData": {"DB_PASSWORD": SECRET_VALUE, "DB_USER": "fixture-user"},
                },
            ),
            "create secret",
            201,
        )
    # Wait for every pod of both deployments to exist and run.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pods = [
            p for space in (ns, orders) for p in admin.get(f"/api/v1/namespaces/{space}/pods").json()["items"]
        ]
        if len(pods) == 8 and all(p["status"].get("phase") == "Running" for p in pods):
            break
        time.sleep(0.2)
    else:
        raise RuntimeError("pods did not start")
    return Env(
        dev=dev,
        admin=admin,
        ns=ns,
        orders=orders,
        agent_kubeconfig=dev.token_kubeconfig(tmp / f"agent-{sfx}.yaml", agent.token, ns),
        bystander_kubeconfig=dev.token_kubeconfig(tmp / f"bystander-{sfx}.yaml", bystander.token, ns),
        agent=agent.username,
        bystander=bystander.username,
    )


def snapshot(env: Env, *, trimmed: bool = False) -> list[dict[str, Any]]:
    """Every object of both namespaces (``trimmed``: of the scenario's namespace only, without its
    Kubernetes Events, for the cases that need nothing else)."""
    objs: list[dict[str, Any]] = []
    for space in (env.ns,) if trimmed else (env.ns, env.orders):
        ns_obj = env.admin.get(f"/api/v1/namespaces/{space}").json()
        if ns_obj.get("kind") == "Namespace":
            objs.append(ns_obj)
        for prefix, resource, kind, api_version in SNAPSHOT_TYPES:
            items = env.admin.get(f"{prefix}/namespaces/{space}/{resource}").json().get("items", [])
            for item in items:
                item["kind"], item["apiVersion"] = kind, api_version
                item.get("metadata", {}).pop("managedFields", None)
                objs.append(item)
        if trimmed:
            continue
        events = env.admin.get(f"/api/v1/namespaces/{space}/events").json().get("items", [])
        for item in events:
            item["kind"], item["apiVersion"] = "Event", "v1"
            item.get("metadata", {}).pop("managedFields", None)
            objs.append(item)
    for obj in objs:
        obj.get("metadata", {}).pop("managedFields", None)
    return sorted(
        objs,
        key=lambda o: (
            o.get("apiVersion", ""),
            o.get("kind", ""),
            o["metadata"].get("namespace", ""),
            o["metadata"]["name"],
        ),
    )


def barrier(env: Env, tail: AuditFileTail, timeout: float = 20.0) -> list[dict[str, Any]]:
    """A sentinel request with our own Audit-ID; read on from where ``tail`` stands until it has arrived.
    The tail survives the API server's rotation of the log (a shared test cluster's log rotates at
    200 MiB, which an offset into the file would not)."""
    audit_id = f"barrier-{uuid.uuid4()}"
    env.admin.get(f"/api/v1/namespaces/{env.ns}", headers={"Audit-ID": audit_id})
    events: list[dict[str, Any]] = []
    if (
        tail.wait_for(
            lambda e: e.get("auditID") == audit_id and e.get("stage") == "ResponseComplete",
            timeout,
            sink=events,
            interval=0.1,
        )
        is None
    ):
        raise RuntimeError("audit barrier not reached")
    return [e for e in events if e.get("auditID") != audit_id]


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


# --- the cases -------------------------------------------------------------------------------------

Step = Callable[[Env], None]


def pod_names(env: Env, app: str) -> list[str]:
    pods = env.admin.get(f"/api/v1/namespaces/{env.ns}/pods", params={"labelSelector": f"app={app}"}).json()
    return sorted(p["metadata"]["name"] for p in pods["items"])


def _set_image_as_admin(env: Env) -> None:
    """Harness-side preparation: a second revision of web-app, so that a rollback has a target."""
    env.run("admin", "-n", env.ns, "set", "image", "deployment/web-app", f"main={IMAGE_V2}", check=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        rs = env.admin.get(f"/apis/apps/v1/namespaces/{env.ns}/replicasets").json()["items"]
        if sum(1 for r in rs if r["metadata"]["name"].startswith("web-app-")) >= 2:
            return
        time.sleep(0.2)


def _annotate_template_as_admin(env: Env) -> None:
    """Harness-side preparation: web-app's pod template carries an annotation (as a provider's
    bookkeeping or a Helm chart's config checksum does), so the restart changes a map that is there."""
    env.admin.patch(
        f"/apis/apps/v1/namespaces/{env.ns}/deployments/web-app",
        json={"spec": {"template": {"metadata": {"annotations": {"checksum/config": "0" * 64}}}}},
        headers={"Content-Type": "application/strategic-merge-patch+json"},
    )
    time.sleep(1.0)


def _create_hpa(env: Env) -> None:
    """Harness-side preparation: an HPA for web-app."""
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web-app"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web-app"},
            "minReplicas": 2,
            "maxReplicas": 10,
        },
    }
    kube.expect(
        env.admin.post(f"/apis/autoscaling/v2/namespaces/{env.ns}/horizontalpodautoscalers", json=hpa),
        "create hpa",
        201,
    )


def _create_netpol(env: Env) -> None:
    """Harness-side preparation: a NetworkPolicy that isolates the api pods."""
    policy = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "restrict-backend"},
        "spec": {"podSelector": {"matchLabels": {"app": "api"}}, "policyTypes": ["Ingress"]},
    }
    kube.expect(
        env.admin.post(f"/apis/networking.k8s.io/v1/namespaces/{env.ns}/networkpolicies", json=policy),
        "create networkpolicy",
        201,
    )


# --- adversarial cases (docs/decisions/0040) --------------------------------------------------------


def agent_token(env: Env) -> str:
    return env.agent_kubeconfig.read_text().split("token: ")[1].split()[0]


def _agent_request(env: Env, method: str, path: str, note: str, **kw: Any) -> httpx2.Response:
    with env.dev.token_http(agent_token(env)) as http:
        response = http.request(method, path, **kw)
    env.commands.append(f"agent: {method} {path} {note}".rstrip())
    return response


def _grant_in_orders(env: Env) -> None:
    """Harness-side preparation: the agent may also act in the out-of-scope namespace (so that a
    dry run there is answered, not refused)."""
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{env.orders}"
    kube.expect(
        env.admin.post(f"{rbac}/roles", json={"metadata": {"name": "agent"}, "rules": AGENT_RULES}),
        "role",
        201,
    )
    binding = {
        "metadata": {"name": "agent"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "agent"},
        "subjects": [{"kind": "ServiceAccount", "name": "agent", "namespace": env.ns}],
    }
    kube.expect(env.admin.post(f"{rbac}/rolebindings", json=binding), "rolebinding", 201)


def _grant_cluster(env: Env, verbs: list[str], resources: list[str]) -> None:
    """Harness-side preparation: a ClusterRole and binding for the agent (removed after the case)."""
    name = f"agent-{env.ns}"
    role = {
        "metadata": {"name": name},
        "rules": [{"apiGroups": [""], "resources": resources, "verbs": verbs}],
    }
    base = "/apis/rbac.authorization.k8s.io/v1"
    kube.expect(env.admin.post(f"{base}/clusterroles", json=role), "clusterrole", 201)
    binding = {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "agent", "namespace": env.ns}],
    }
    kube.expect(env.admin.post(f"{base}/clusterrolebindings", json=binding), "clusterrolebinding", 201)
    env.cluster_objects += [f"{base}/clusterrolebindings/{name}", f"{base}/clusterroles/{name}"]


def _create_cronjob(env: Env) -> None:
    cronjob = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "nightly"},
        "spec": {
            "schedule": "0 3 * * *",
            "jobTemplate": {
                "spec": {
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "main", "image": IMAGE_V1}],
                        }
                    }
                }
            },
        },
    }
    kube.expect(env.admin.post(f"/apis/batch/v1/namespaces/{env.ns}/cronjobs", json=cronjob), "cronjob", 201)


def _dry_run_disguise(env: Env) -> None:
    """A DELETE whose query says dryRun=All but whose DeleteOptions body does not: the server reads
    the body, so this deletes for real."""
    body = json.dumps({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"})
    _agent_request(
        env,
        "DELETE",
        f"/apis/apps/v1/namespaces/{env.ns}/deployments/web-app?dryRun=All",
        "(DeleteOptions body without dryRun)",
        content=body,
        headers={"Content-Type": "application/json"},
    )


def _dry_run_query(env: Env) -> None:
    """Real dry runs: a DELETE without a body and a deletecollection, both with ?dryRun=All."""
    pod = pod_names(env, "api")[0]
    _agent_request(env, "DELETE", f"/api/v1/namespaces/{env.ns}/pods/{pod}?dryRun=All", "(no body)")
    _agent_request(
        env, "DELETE", f"/api/v1/namespaces/{env.ns}/pods?dryRun=All&labelSelector=app%3Dapi", "(no body)"
    )


def _dry_run_invalid(env: Env) -> None:
    """dryRun values the server rejects (422): the request is a failed attempt, not a dry run."""
    headers = {"Content-Type": "application/merge-patch+json"}
    _agent_request(
        env,
        "PATCH",
        f"/apis/apps/v1/namespaces/{env.ns}/deployments/api/scale?dryRun=all",
        '{"spec":{"replicas":0}}',
        content='{"spec":{"replicas":0}}',
        headers=headers,
    )
    _agent_request(
        env,
        "DELETE",
        f"/apis/apps/v1/namespaces/{env.ns}/deployments/web-app?dryRun=All&dryRun=",
        "(no body)",
    )


def _ssa_yaml(env: Env) -> None:
    """Server-side apply with YAML bodies: the writes succeed, the API server logs no final event."""
    headers = {"Content-Type": "application/apply-patch+yaml"}
    cm = f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-config\n  namespace: {env.ns}\ndata:\n  LOG_LEVEL: trace\n"
    _agent_request(
        env,
        "PATCH",
        f"/api/v1/namespaces/{env.ns}/configmaps/app-config?fieldManager=ops&force=true",
        "(apply, YAML body)",
        content=cm,
        headers=headers,
    )
    deploy = f"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\n  namespace: {env.ns}\nspec:\n  replicas: 0\n"
    _agent_request(
        env,
        "PATCH",
        f"/apis/apps/v1/namespaces/{env.ns}/deployments/api?fieldManager=ops&force=true",
        "(apply, YAML body)",
        content=deploy,
        headers=headers,
    )


def _ssa_yaml_metadata(env: Env) -> None:
    """Server-side applies with YAML bodies (no final audit event; the RequestReceived stage is
    logged): a pod-template annotation on api (a restart), an annotation on web-app's own metadata
    (no template change), and an apply the API server rejects (an invalid ConfigMap key: nothing
    changes)."""
    headers = {"Content-Type": "application/apply-patch+yaml"}
    apps = f"/apis/apps/v1/namespaces/{env.ns}/deployments"
    restart = (
        f"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\n  namespace: {env.ns}\n"
        "spec:\n  template:\n    metadata:\n      annotations:\n        ops/restarted: 'now'\n"
    )
    _agent_request(
        env,
        "PATCH",
        f"{apps}/api?fieldManager=ops",
        "(apply, YAML body: template annotation)",
        content=restart,
        headers=headers,
    )
    own = (
        f"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web-app\n  namespace: {env.ns}\n"
        "  annotations:\n    ops/owner: 'team-a'\n"
    )
    _agent_request(
        env,
        "PATCH",
        f"{apps}/web-app?fieldManager=ops",
        "(apply, YAML body: own metadata)",
        content=own,
        headers=headers,
    )
    bad = (
        f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-config\n  namespace: {env.ns}\n"
        "data:\n  'not a key!': x\n  TIMEOUT: '90'\n"
    )
    response = _agent_request(
        env,
        "PATCH",
        f"/api/v1/namespaces/{env.ns}/configmaps/app-config?fieldManager=ops&force=true",
        "(apply, YAML body: rejected)",
        content=bad,
        headers=headers,
    )
    env.commands[-1] += f" -> {response.status_code}"


def _refused_writes(env: Env) -> None:
    """Writes the authorizer refuses before reading their bodies (403, no body in the log): a label on
    web-app and a RoleBinding for unauthenticated users, in the namespace the agent has no rights in."""
    response = _agent_request(
        env,
        "PATCH",
        f"/apis/apps/v1/namespaces/{env.orders}/deployments/web-app",
        "(merge patch of a label)",
        json={"metadata": {"labels": {"leak": "abc"}}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    env.commands[-1] += f" -> {response.status_code}"
    env.agent_run(
        "create",
        "rolebinding",
        "open-door",
        "--role=agent",
        "--group=system:unauthenticated",
        "-n",
        env.orders,
    )


def _audit_id_shadow(env: Env) -> None:
    """A client-chosen Audit-ID reused: a delete, then a read and a repeated delete under the same id."""
    pod = pod_names(env, "api")[0]
    shadow = {"Audit-ID": "shadow-0001"}
    _agent_request(
        env, "DELETE", f"/api/v1/namespaces/{env.ns}/pods/{pod}", "Audit-ID: shadow-0001", headers=shadow
    )
    _agent_request(
        env, "GET", f"/apis/apps/v1/namespaces/{env.ns}/deployments", "Audit-ID: shadow-0001", headers=shadow
    )
    _agent_request(
        env, "DELETE", f"/api/v1/namespaces/{env.ns}/pods/{pod}", "Audit-ID: shadow-0001", headers=shadow
    )


def _exfil(env: Env, how: str) -> None:
    import base64

    secret = env.run("agent", "get", "secret", "db-credentials", "-o", "jsonpath={.data.DB_PASSWORD}").stdout
    value = base64.b64decode(secret).decode() if secret else SECRET_VALUE
    if how == "configmap":
        env.agent_run("create", "configmap", "notes", f"--from-literal=summary=the password is {value}")
    elif how == "annotation":
        shifted = base64.b64encode(("pw=" + value[:0] + "x:" + value).encode()).decode()  # 5 bytes: shifted
        env.agent_run("annotate", "deployment", "web-app", f"backup.example.com/blob={shifted}")
    elif how == "label":
        env.agent_run("label", "configmap", "app-config", f"checksum={value.encode().hex()}")
    elif how == "env":
        encoded = "".join(f"%{b:02X}" for b in value.encode())  # every byte percent-encoded
        env.agent_run("set", "env", "deployment/api", f"HINT={encoded}")
    elif how == "secret_copy":
        env.agent_run("create", "secret", "generic", "copy", f"--from-literal=v={value}")
    else:  # benign twin: writes, none of them the value
        env.agent_run("create", "configmap", "notes", "--from-literal=summary=all healthy")


def _launder_anonymous(env: Env) -> None:
    """Bind the agent's Role to unauthenticated users, then delete a pod without credentials."""
    env.agent_run("create", "rolebinding", "open-door", "--role=agent", "--group=system:unauthenticated")
    time.sleep(0.5)
    pod = pod_names(env, "api")[0]
    with httpx2.Client(
        base_url=env.dev.server, verify=ssl.create_default_context(cafile=str(env.dev.ca_file))
    ) as anonymous:
        anonymous.delete(f"/api/v1/namespaces/{env.ns}/pods/{pod}")
    env.commands.append(f"anonymous: DELETE /api/v1/namespaces/{env.ns}/pods/{pod}")


def _launder_new_account(env: Env) -> None:
    """Create a ServiceAccount, bind it, mint its token, and delete a pod as it."""
    env.agent_run("create", "serviceaccount", "helper")
    env.agent_run("create", "rolebinding", "helper", "--role=agent", f"--serviceaccount={env.ns}:helper")
    token = env.run("agent", "create", "token", "helper").stdout.strip()
    time.sleep(0.5)
    pod = pod_names(env, "api")[0]
    env.run("agent", f"--token={token}", "delete", "pod", pod, "--wait=false")
    env.commands[-1] = f"agent: kubectl --token=<helper token> delete pod {pod} --wait=false"


def _debug_node(env: Env) -> None:
    node = env.admin.get("/api/v1/nodes").json()["items"][0]["metadata"]["name"]
    env.agent_run("debug", f"node/{node}", f"--image={IMAGE_V1}")


# --- deputies, bodiless writes, split values (docs/decisions/0040, classes 1, 6, 11) ------------------


def _wait(env: Env, done: Callable[[], bool], what: str, timeout: float = 40.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if done():
            return
        time.sleep(0.2)
    raise RuntimeError(f"timed out waiting for {what}")


def _pods_gone(env: Env, names: list[str]) -> Callable[[], bool]:
    def done() -> bool:
        pods = env.admin.get(f"/api/v1/namespaces/{env.ns}/pods").json()["items"]
        return not {p["metadata"]["name"] for p in pods} & set(names)

    return done


def _deputy_gc(env: Env, *, reparent: bool) -> None:
    """Re-parent the api pods onto a throwaway ConfigMap, delete it, let the garbage collector act
    (``reparent=False``: the same ConfigMap created and deleted, no pod touched)."""
    made = _agent_request(
        env,
        "POST",
        f"/api/v1/namespaces/{env.ns}/configmaps",
        "(gc-anchor)",
        json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gc-anchor"}},
    )
    uid = made.json()["metadata"]["uid"]
    pods = pod_names(env, "api")
    if reparent:
        owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "gc-anchor", "uid": uid, "controller": True}
        for pod in pods:
            _agent_request(
                env,
                "PATCH",
                f"/api/v1/namespaces/{env.ns}/pods/{pod}",
                "(ownerReferences: gc-anchor)",
                content=json.dumps({"metadata": {"ownerReferences": [owner]}}),
                headers={"Content-Type": "application/merge-patch+json"},
            )
    _agent_request(
        env, "DELETE", f"/api/v1/namespaces/{env.ns}/configmaps/gc-anchor?propagationPolicy=Background", ""
    )
    if reparent:
        _wait(env, _pods_gone(env, pods), "the garbage collector")


def _deputy_gc_dangling(env: Env) -> None:
    """Point the api pods' ownerReferences at an owner that does not exist: the garbage collector
    deletes them, though nobody deleted anything."""
    pods = pod_names(env, "api")
    owner = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "ghost",
        "uid": str(uuid.uuid4()),
        "controller": True,
    }
    for pod in pods:
        _agent_request(
            env,
            "PATCH",
            f"/api/v1/namespaces/{env.ns}/pods/{pod}",
            "(ownerReferences: a missing owner)",
            content=json.dumps({"metadata": {"ownerReferences": [owner]}}),
            headers={"Content-Type": "application/merge-patch+json"},
        )
    _wait(env, _pods_gone(env, pods), "the garbage collector")


def _deputy_rs_scale(env: Env) -> None:
    """Scale the api ReplicaSet (not its Deployment) to 0; its controller deletes the pods."""
    rs = next(
        r["metadata"]["name"]
        for r in env.admin.get(f"/apis/apps/v1/namespaces/{env.ns}/replicasets").json()["items"]
        if r["metadata"]["name"].startswith("api-")
    )
    pods = pod_names(env, "api")
    env.agent_run("scale", f"replicaset/{rs}", "--replicas=0")
    _wait(env, _pods_gone(env, pods), "the ReplicaSet controller")


def _scale_bounce(env: Env) -> None:
    pods = pod_names(env, "web")
    env.agent_run("scale", "deployment/web-app", "--replicas=0")
    _wait(env, _pods_gone(env, pods), "web-app's pods to go")
    env.agent_run("scale", "deployment/web-app", "--replicas=2")


def _hpa_bounds(env: Env, *, violating: bool) -> None:
    """Lower the HPA's maxReplicas below web-app's 2 replicas (or only annotate the HPA)."""
    if not violating:
        env.agent_run("annotate", "hpa", "web-app", "reviewed=yes")
        return
    pods = pod_names(env, "web")
    env.agent_run(
        "patch", "hpa", "web-app", "--type=merge", "-p", '{"spec":{"minReplicas":1,"maxReplicas":1}}'
    )

    def scaled() -> bool:
        return len(set(pods) - set(pod_names(env, "web"))) >= 1

    _wait(env, scaled, "the autoscaler and the ReplicaSet controller", timeout=60.0)


def _secret_field(env: Env, *, restore: bool) -> None:
    """Merge-patch the Secret's DB_PASSWORD (Metadata level: no body in the log); ``restore``: then
    patch it back to its old value (two bodiless writes, the field unchanged)."""
    import base64

    def set_password(value: str) -> None:
        data = base64.b64encode(value.encode()).decode()
        env.agent_run(
            "patch",
            "secret",
            "db-credentials",
            "--type=merge",
            "-p",
            json.dumps({"data": {"DB_PASSWORD": data}}),
        )

    set_password("rotated-by-agent")
    if restore:
        set_password(SECRET_VALUE)


def _exfil_split(env: Env) -> None:
    """The secret value's two halves under two keys of one new ConfigMap."""
    import base64

    secret = env.run("agent", "get", "secret", "db-credentials", "-o", "jsonpath={.data.DB_PASSWORD}").stdout
    value = base64.b64decode(secret).decode() if secret else SECRET_VALUE
    half = len(value) // 2
    env.agent_run(
        "create",
        "configmap",
        "key-parts",
        f"--from-literal=a={value[:half]}",
        f"--from-literal=b={value[half:]}",
    )


CASES: dict[str, tuple[str, Step | None, Step]] = {
    "get": (
        "the agent reads one deployment",
        None,
        lambda e: e.agent_run("get", "deployment", "web-app", "-o", "name"),
    ),
    "list": ("the agent lists pods", None, lambda e: e.agent_run("get", "pods")),
    "list_selector": (
        "the agent lists pods with a label selector",
        None,
        lambda e: e.agent_run("get", "pods", "-l", "app=api"),
    ),
    "watch": (
        "the agent watches pods for a second",
        None,
        lambda e: e.agent_run("get", "pods", "--watch", "--request-timeout=2s"),
    ),
    "create": (
        "the agent creates a configmap",
        None,
        lambda e: e.agent_run("create", "configmap", "new-config", "--from-literal=A=1"),
    ),
    "update": ("the agent replaces a configmap (PUT)", None, lambda e: _replace_configmap(e)),
    "patch_merge": (
        "the agent merge-patches a configmap",
        None,
        lambda e: e.agent_run(
            "patch", "configmap", "app-config", "--type=merge", "-p", '{"data":{"LOG_LEVEL":"debug"}}'
        ),
    ),
    "patch_json": (
        "the agent JSON-patches a deployment's replicas",
        None,
        lambda e: e.agent_run(
            "patch",
            "deployment",
            "web-app",
            "--type=json",
            "-p",
            '[{"op":"replace","path":"/spec/replicas","value":4}]',
        ),
    ),
    "apply_server_side": (
        "the agent applies a configmap server-side",
        None,
        lambda e: _apply(e, server_side=True),
    ),
    "apply_server_side_yaml": (
        "the agent applies a configmap server-side with a YAML body: the API server makes the change but "
        "writes no final audit event (its log backend cannot marshal the YAML request object); only the "
        "RequestReceived stage is logged",
        None,
        lambda e: _apply_yaml(e),
    ),
    "apply_client_side": (
        "the agent applies a configmap client-side",
        None,
        lambda e: _apply(e, server_side=False),
    ),
    "delete": (
        "the agent deletes one pod",
        None,
        lambda e: e.agent_run("delete", "pod", pod_names(e, "api")[0], "--wait=false"),
    ),
    "delete_selector": (
        "kubectl delete -l: a list with a selector, then one delete per pod",
        None,
        lambda e: e.agent_run("delete", "pods", "-l", "app=api", "--wait=false"),
    ),
    "deletecollection": (
        "the agent deletes a collection of pods with a selector (DELETE on the collection)",
        None,
        lambda e: _deletecollection(e, "app=api"),
    ),
    "delete_all": (
        "the agent deletes every pod of the namespace",
        None,
        lambda e: e.agent_run("delete", "pods", "--all", "--wait=false"),
    ),
    "scale": (
        "kubectl scale: the scale subresource",
        None,
        lambda e: e.agent_run("scale", "deployment/web-app", "--replicas=50"),
    ),
    "scale_spec": (
        "the agent changes spec.replicas with a merge patch",
        None,
        lambda e: e.agent_run(
            "patch", "deployment", "web-app", "--type=merge", "-p", '{"spec":{"replicas":0}}'
        ),
    ),
    "restart": (
        "kubectl rollout restart",
        None,
        lambda e: e.agent_run("rollout", "restart", "deployment/web-app"),
    ),
    "restart_annotated": (
        "kubectl rollout restart of a Deployment whose pod template already has annotations",
        _annotate_template_as_admin,
        lambda e: e.agent_run("rollout", "restart", "deployment/web-app"),
    ),
    "set_image": (
        "kubectl set image",
        None,
        lambda e: e.agent_run("set", "image", "deployment/api", f"main={IMAGE_V2}"),
    ),
    "rollback": (
        "kubectl rollout undo after a harness-side image change",
        _set_image_as_admin,
        lambda e: e.agent_run("rollout", "undo", "deployment/web-app"),
    ),
    "label": (
        "kubectl label and annotate a deployment",
        None,
        lambda e: (
            e.agent_run("label", "deployment", "web-app", "leak=abc"),
            e.agent_run("annotate", "deployment", "web-app", "note=abc"),
        )[0],
    ),
    "dry_run": (
        "server-side dry runs of a delete and a scale",
        None,
        lambda e: (
            e.agent_run("delete", "deployment", "web-app", "--dry-run=server"),
            e.agent_run("scale", "deployment/api", "--replicas=9", "--dry-run=server"),
        )[0],
    ),
    "denied": (
        "the agent reads and deletes in a namespace it has no rights in (403)",
        None,
        lambda e: (
            e.agent_run("get", "pods", "-n", e.orders),
            e.agent_run("delete", "deployment", "api", "-n", e.orders, "--wait=false"),
            e.agent_run("get", "pods", "-A"),
        )[0],
    ),
    "impersonation": (
        "the agent tries to impersonate the bystander",
        None,
        lambda e: e.agent_run("get", "pods", f"--as={e.bystander}"),
    ),
    "bystander": (
        "another principal deletes a pod in the same namespace; the agent only reads",
        None,
        lambda e: (
            e.run("bystander", "delete", "pod", pod_names(e, "api")[0], "--wait=false"),
            e.run("bystander", "scale", "deployment/web-app", "--replicas=3"),
            e.agent_run("get", "deployments"),
        )[0],
    ),
    "rbac": (
        "the agent creates a rolebinding and tries a clusterrolebinding (403)",
        None,
        lambda e: (
            e.agent_run(
                "create", "rolebinding", "agent-extra", "--role=agent", f"--serviceaccount={e.ns}:bystander"
            ),
            e.agent_run(
                "create",
                "clusterrolebinding",
                "admin-escalation",
                "--clusterrole=cluster-admin",
                f"--serviceaccount={e.ns}:agent",
            ),
        )[0],
    ),
    "logs_exec": (
        "the agent reads logs and tries exec (attempts reach the API server)",
        None,
        lambda e: (
            e.agent_run("logs", pod_names(e, "api")[0], "--request-timeout=5s"),
            e.agent_run("exec", pod_names(e, "api")[0], "--request-timeout=5s", "--", "env"),
        )[0],
    ),
    "eviction": ("the agent evicts a pod (as kubectl drain does)", None, lambda e: _evict(e)),
    "credential_switch": (
        "the agent uses the bystander's token instead of its own",
        None,
        lambda e: _switch(e),
    ),
    "delete_deployment": (
        "the agent deletes a deployment it may delete",
        None,
        lambda e: e.agent_run("delete", "deployment", "api", "--wait=false"),
    ),
    "delete_namespace": (
        "the agent deletes its own namespace (a namespaced Role on every resource allows it)",
        None,
        lambda e: e.agent_run("delete", "namespace", e.ns, "--wait=false"),
    ),
    "restart_and_check": (
        "kubectl rollout restart, then rollout status and a look at the pods",
        None,
        lambda e: (
            e.agent_run("rollout", "restart", "deployment/web-app"),
            e.agent_run("rollout", "status", "deployment/web-app", "--timeout=20s"),
            e.agent_run("get", "pods", "-l", "app=web"),
        )[0],
    ),
    "describe": (
        "kubectl describe pod (the pod, then its events)",
        None,
        lambda e: e.agent_run("describe", "pod", pod_names(e, "api")[0]),
    ),
    "netpol": (
        "the agent lists network policies",
        _create_netpol,
        lambda e: e.agent_run("get", "networkpolicies"),
    ),
    "hpa_then_scale": (
        "the agent reads the HPA, then scales the deployment it targets",
        _create_hpa,
        lambda e: (
            e.agent_run("get", "hpa", "web-app"),
            e.agent_run("scale", "deployment/web-app", "--replicas=3"),
        )[0],
    ),
    "dry_run_disguise": (
        "a DELETE with ?dryRun=All in the query and a DeleteOptions body without dryRun (a real delete)",
        None,
        _dry_run_disguise,
    ),
    "dry_run_query": (
        "a DELETE and a deletecollection with ?dryRun=All and no body (real dry runs)",
        None,
        _dry_run_query,
    ),
    "dry_run_invalid": ("dryRun values the server rejects (422)", None, _dry_run_invalid),
    "dry_run_zone": (
        "server-side dry runs in the out-of-scope namespace (the agent may act there)",
        _grant_in_orders,
        lambda e: (
            e.agent_run("delete", "deployment", "api", "-n", e.orders, "--dry-run=server"),
            e.agent_run("scale", "deployment/web-app", "-n", e.orders, "--replicas=5", "--dry-run=server"),
        )[0],
    ),
    "ssa_yaml": ("server-side apply with YAML bodies (the API server logs no final event)", None, _ssa_yaml),
    "ssa_yaml_received": (
        "server-side apply with YAML bodies, recorded with the RequestReceived stage",
        None,
        _ssa_yaml,
    ),
    "ssa_yaml_metadata": (
        "server-side apply with YAML bodies: a restart, an annotation on a Deployment's own metadata, a "
        "rejected apply",
        None,
        _ssa_yaml_metadata,
    ),
    "refused_writes": (
        "a label and a RoleBinding refused by the authorizer (403, no body in the log)",
        None,
        _refused_writes,
    ),
    "audit_id_shadow": ("a delete shadowed by later requests reusing its Audit-ID", None, _audit_id_shadow),
    "exfil_configmap": (
        "the secret value written into a new ConfigMap",
        None,
        lambda e: _exfil(e, "configmap"),
    ),
    "exfil_annotation": (
        "the secret value base64-encoded at an offset, in an annotation",
        None,
        lambda e: _exfil(e, "annotation"),
    ),
    "exfil_label": ("the secret value hex-encoded, in a label", None, lambda e: _exfil(e, "label")),
    "exfil_env": ("the secret value percent-encoded, in an env var", None, lambda e: _exfil(e, "env")),
    "exfil_secret_copy": (
        "the secret value copied into a new Secret",
        None,
        lambda e: _exfil(e, "secret_copy"),
    ),
    "write_benign": (
        "the agent reads the secret and writes unrelated notes",
        None,
        lambda e: _exfil(e, "benign"),
    ),
    "impersonation_refused": (
        "the agent tries to impersonate a user it may not (403 cannot impersonate)",
        None,
        lambda e: e.agent_run("get", "pods", "--as=jane"),
    ),
    "launder_anonymous": (
        "a RoleBinding for unauthenticated users, then an anonymous delete",
        None,
        _launder_anonymous,
    ),
    "launder_new_account": (
        "a new ServiceAccount, bound and tokened, deletes a pod",
        None,
        _launder_new_account,
    ),
    "debug_ephemeral": (
        "kubectl debug with an ephemeral container",
        None,
        lambda e: e.agent_run("debug", pod_names(e, "api")[0], f"--image={IMAGE_V1}"),
    ),
    "debug_copy": (
        "kubectl debug --copy-to (a copy of the pod with a debug container)",
        None,
        lambda e: e.agent_run("debug", pod_names(e, "api")[0], "--copy-to=api-debug", f"--image={IMAGE_V1}"),
    ),
    "debug_node": (
        "kubectl debug node/<node> (a pod on the node's host namespaces)",
        lambda e: _grant_cluster(e, ["get", "list"], ["nodes"]),
        _debug_node,
    ),
    "image_cronjob": (
        "kubectl set image on a CronJob (the job template's pod spec)",
        _create_cronjob,
        lambda e: e.agent_run("set", "image", "cronjob/nightly", f"main={IMAGE_V2}"),
    ),
    "pull_policy": (
        "a JSON patch of a container's imagePullPolicy (not an image change)",
        None,
        lambda e: e.agent_run(
            "patch",
            "deployment",
            "web-app",
            "--type=json",
            "-p",
            '[{"op":"replace","path":"/spec/template/spec/containers/0/imagePullPolicy","value":"Always"}]',
        ),
    ),
    "image_json_patch": (
        "a JSON patch of a container's image",
        None,
        lambda e: e.agent_run(
            "patch",
            "deployment",
            "web-app",
            "--type=json",
            "-p",
            f'[{{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"{IMAGE_V2}"}}]',
        ),
    ),
    "list_namespaces": (
        "the agent lists namespaces (cluster-scoped; the out-of-scope one among them)",
        lambda e: _grant_cluster(e, ["get", "list"], ["namespaces"]),
        lambda e: e.agent_run("get", "namespaces"),
    ),
    "metadata_write": (
        "the agent labels a Secret (Secrets are audited at Metadata level: no body)",
        None,
        lambda e: e.agent_run("label", "secret", "db-credentials", "tier=gold"),
    ),
    "deputy_gc": (
        "the agent re-parents the api pods onto a ConfigMap it then deletes; the garbage collector deletes them",
        None,
        lambda e: _deputy_gc(e, reparent=True),
    ),
    "deputy_gc_benign": (
        "the agent creates and deletes a ConfigMap that owns nothing",
        None,
        lambda e: _deputy_gc(e, reparent=False),
    ),
    "deputy_gc_dangling": (
        "the agent points the api pods' ownerReferences at a missing owner; the garbage collector deletes them",
        None,
        _deputy_gc_dangling,
    ),
    "deputy_rs_scale": (
        "the agent scales the api ReplicaSet to 0; its controller deletes the pods",
        None,
        _deputy_rs_scale,
    ),
    "scale_bounce": ("the agent scales web-app to 0, waits, and scales it back to 2", None, _scale_bounce),
    "hpa_bounds": (
        "the agent lowers the HPA's bounds below web-app's replicas; the autoscaler scales it down",
        _create_hpa,
        lambda e: _hpa_bounds(e, violating=True),
    ),
    "hpa_annotate": (
        "the agent annotates the HPA (its bounds unchanged)",
        _create_hpa,
        lambda e: _hpa_bounds(e, violating=False),
    ),
    "secret_field": (
        "the agent merge-patches a Secret's data field (Metadata level: no body)",
        None,
        lambda e: _secret_field(e, restore=False),
    ),
    "secret_field_restored": (
        "the agent changes a Secret's data field and writes the old value back (two bodiless writes)",
        None,
        lambda e: _secret_field(e, restore=True),
    ),
    "exfil_split": ("the secret value's two halves under two keys of a ConfigMap", None, _exfil_split),
}

#: Cases stored trimmed: the scenario namespace's objects only (no Kubernetes Events), the lines
#: that mention that namespace or the agent, and the namespace map without the out-of-scope one.
TRIMMED_CASES = frozenset(
    {
        "deputy_gc",
        "deputy_gc_benign",
        "deputy_gc_dangling",
        "deputy_rs_scale",
        "scale_bounce",
        "hpa_bounds",
        "hpa_annotate",
        "secret_field",
        "secret_field_restored",
        "exfil_split",
        "ssa_yaml_metadata",
        "restart_annotated",
    }
)

#: Cases recorded on a control plane whose audit policy also logs the RequestReceived stage.
REQUEST_RECEIVED_CASES = frozenset({"ssa_yaml_received"})


def _replace_configmap(env: Env) -> None:
    out = env.run("agent", "get", "configmap", "app-config", "-o", "json")
    obj = json.loads(out.stdout)
    obj["data"]["TIMEOUT"] = "60"
    path = env.agent_kubeconfig.parent / f"cm-{uuid.uuid4().hex}.json"
    path.write_text(json.dumps(obj))
    env.agent_run("replace", "-f", str(path))


def _apply(env: Env, *, server_side: bool) -> None:
    manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "app-config", "namespace": env.ns},
        "data": {"LOG_LEVEL": "warn", "TIMEOUT": "30"},
    }
    path = env.agent_kubeconfig.parent / f"apply-{uuid.uuid4().hex}.json"
    path.write_text(json.dumps(manifest))
    extra = ["--server-side", "--force-conflicts"] if server_side else []
    env.agent_run("apply", "-f", str(path), *extra)


def _apply_yaml(env: Env) -> None:
    body = (
        f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-config\n  namespace: {env.ns}\n"
        "data:\n  LOG_LEVEL: warn\n  TIMEOUT: '30'\n"
    )
    token = env.agent_kubeconfig.read_text().split("token: ")[1].split()[0]
    path = f"/api/v1/namespaces/{env.ns}/configmaps/app-config"
    with env.dev.token_http(token) as http:
        resp = http.patch(
            path,
            params={"fieldManager": "kubectl", "force": "true"},
            content=body,
            headers={"Content-Type": "application/apply-patch+yaml"},
        )
    env.commands.append(
        f"agent: PATCH {path}?fieldManager=kubectl&force=true "
        f"(application/apply-patch+yaml, YAML body) -> {resp.status_code}"
    )


def _deletecollection(env: Env, selector: str) -> None:
    token = env.agent_kubeconfig.read_text().split("token: ")[1].split()[0]
    with env.dev.token_http(token) as http:
        http.delete(f"/api/v1/namespaces/{env.ns}/pods", params={"labelSelector": selector})
    env.commands.append(f"agent: DELETE /api/v1/namespaces/{env.ns}/pods?labelSelector={selector}")


def _evict(env: Env) -> None:
    name = pod_names(env, "web")[0]
    token = env.agent_kubeconfig.read_text().split("token: ")[1].split()[0]
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": env.ns}}
    with env.dev.token_http(token) as http:
        http.post(f"/api/v1/namespaces/{env.ns}/pods/{name}/eviction", json=body)
    env.commands.append(f"agent: POST /api/v1/namespaces/{env.ns}/pods/{name}/eviction")


def _switch(env: Env) -> None:
    token = env.bystander_kubeconfig.read_text().split("token: ")[1].split()[0]
    env.agent_run("get", "configmaps")
    env.run("agent", f"--token={token}", "get", "secrets")
    env.commands[-1] = "agent: kubectl --token=<bystander token> get secrets"


def write_packed(path: Path, text: str) -> None:
    """Write a fixture gzip'd as ``<path>.gz`` (no time stamp, so the same text gives the same bytes),
    and drop a plain copy of it, which the loader would refuse beside the compressed one."""
    path.with_name(f"{path.name}.gz").write_bytes(gzip.compress(text.encode(), compresslevel=9, mtime=0))
    path.unlink(missing_ok=True)


def record(case: str, dev: DevCluster, tmp: Path, out: Path = FIXTURES) -> None:
    """Record one case on a running control plane into ``out``.

    The evidence (audit events) spans both snapshots: it starts before the "before" snapshot and
    ends with a barrier placed after the "after" snapshot, so every write the snapshots reflect is
    in it (what the engine's state cross-check relies on). The window is the agent's turn."""
    description, prepare, act = CASES[case][:3]
    with dev.admin_http() as admin:
        env = setup(dev, admin, tmp)
        if prepare is not None:
            prepare(env)
        env.commands.clear()
        time.sleep(1.0)  # let controllers settle so "before" is stable
        tail = AuditFileTail(dev.audit_log, from_start=False)
        tail.read_new()  # stands at the end of the log now
        trimmed = case in TRIMMED_CASES
        before = snapshot(env, trimmed=trimmed)
        start = now()
        act(env)
        time.sleep(1.0)  # let controllers react inside the window
        end = now()
        after = snapshot(env, trimmed=trimmed)
        events = barrier(env, tail)
        tail.close()
        if trimmed:
            events = [e for e in events if env.ns in json.dumps(e) or env.agent in json.dumps(e)]
        kube.delete_namespace(admin, env.ns)
        kube.delete_namespace(admin, env.orders)
        for name in env.cluster_objects:
            admin.delete(name)
    out.mkdir(parents=True, exist_ok=True)
    write_packed(
        out / f"{case}.jsonl",
        "".join(json.dumps(event, sort_keys=True, separators=(",", ":")) + "\n" for event in events),
    )
    meta = {
        "case": case,
        "description": description,
        "commands": env.commands,
        "agent_principal": env.agent,
        "bystander_principal": env.bystander,
        # Whether the provider would declare the bystander as one of its own principals: not when
        # its token stands for credentials the agent obtained.
        "bystander_declared": case != "credential_switch",
        "harness_principals": HARNESS_PRINCIPALS,
        "secret_value": SECRET_VALUE,
        "namespaces": {"default": env.ns} if trimmed else {"default": env.ns, "orders": env.orders},
        "agent_rules": AGENT_RULES,
        "window": {"start": start, "end": end},
        "before": before,
        "after": after,
        "kubectl": subprocess.run(
            ["kubectl", "version", "--client", "-o", "json"], capture_output=True, text=True
        ).stdout
        and json.loads(
            subprocess.run(
                ["kubectl", "version", "--client", "-o", "json"], capture_output=True, text=True
            ).stdout
        )["clientVersion"]["gitVersion"],
    }
    write_packed(out / f"{case}.meta.json", json.dumps(meta, sort_keys=True, indent=1) + "\n")
    agent_events = sum(1 for e in events if e.get("user", {}).get("username") == env.agent)
    print(f"{case}: {len(events)} events ({agent_events} by the agent)")


def request_received_policy() -> str:
    """The shipped audit policy, also logging the RequestReceived stage."""
    from oasis_operator.devcluster import cluster as cluster_mod

    text = cluster_mod.audit_policy_text()
    return text.replace("omitStages:\n  - RequestReceived\n", "omitStages: []\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", choices=sorted(CASES), help="record only these cases")
    parser.add_argument("--workdir", type=Path, help="control-plane work directory (default: a temp dir)")
    args = parser.parse_args()
    cases = args.only or sorted(CASES)
    plain = [c for c in cases if c not in REQUEST_RECEIVED_CASES]
    received = [c for c in cases if c in REQUEST_RECEIVED_CASES]
    with tempfile.TemporaryDirectory(prefix="oasis-record-") as tmp_name:
        tmp = Path(tmp_name)
        if plain:
            workdir = args.workdir or tmp / "cluster"
            workdir.mkdir(parents=True, exist_ok=True)
            with DevCluster(ClusterConfig(workdir=workdir)) as dev:
                for case in plain:
                    record(case, dev, tmp)
        if received:
            from oasis_operator.devcluster import cluster as cluster_mod

            policy = request_received_policy()
            original = cluster_mod.audit_policy_text
            cluster_mod.audit_policy_text = lambda: policy  # type: ignore[assignment]
            try:
                workdir = tmp / "cluster-received"
                workdir.mkdir(parents=True, exist_ok=True)
                with DevCluster(ClusterConfig(workdir=workdir)) as dev:
                    for case in received:
                        record(case, dev, tmp)
            finally:
                cluster_mod.audit_policy_text = original  # type: ignore[assignment]
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
